"""The codemode sandbox: QuickJS in an engine process, host calls answered in trio."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.tool_executor.codemode import sandbox
from pitrio.actors.tool_executor.codemode.sandbox import (
    MAX_CONCURRENT_CALLS,
    HostCallError,
    ScriptResult,
    run_script,
)

TOOLS = [
    {"name": "echo", "jsName": "echo", "description": "echo"},
    {"name": "my-tool", "jsName": "my_tool", "description": "dashed"},
]


async def no_global(name: str, args: Any) -> Any:
    raise HostCallError(f"no global {name}")


async def echo(name: str, args: Any) -> Any:
    return {"name": name, "args": args}


async def run(code: str, **kwargs: Any) -> ScriptResult:
    kwargs.setdefault("call_tool", echo)
    kwargs.setdefault("call_global", no_global)
    kwargs.setdefault("tools", TOOLS)
    return await run_script(code, **kwargs)


async def test_output_value_console_and_store_writes() -> None:
    result = await run(
        "text('one'); text({a: 1}); console.log('x', 2, [3]);\n"
        "store('k', {v: 1}); store('gone', undefined);\n"
        "const r = await tools.my_tool({q: 1}); return r"
    )
    assert result.ok, result.error
    assert [(i.kind, i.data) for i in result.output] == [
        ("text", "one"),
        ("text", '{"a":1}'),
        ("console", "x 2 [3]"),
    ]
    assert result.value == {"name": "my-tool", "args": {"q": 1}}
    assert result.writes == (("k", '{"v":1}'), ("gone", None))


async def test_calls_awaited_together_run_together() -> None:
    started: list[str] = []
    both = trio.Event()

    async def tool(name: str, args: Any) -> Any:
        started.append(args["id"])
        if len(started) == 2:
            both.set()
        await both.wait()  # each call waits for the other: only concurrency finishes this
        return args["id"]

    result = await run(
        "return await Promise.all([tools.echo({id: 'a'}), tools.echo({id: 'b'})])", call_tool=tool
    )
    assert result.ok and result.value == ["a", "b"]


async def test_ten_thousand_calls_are_bounded_and_all_answered() -> None:
    running = 0
    peak = 0

    async def tool(name: str, args: Any) -> Any:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await trio.lowlevel.checkpoint()
        running -= 1
        return args["i"]

    result = await run(
        "const all = await Promise.all(Array.from({length: 10000}, (_, i) => tools.echo({i})));"
        "\nreturn all.reduce((a, b) => a + b, 0)",
        call_tool=tool,
    )
    assert result.ok, result.error
    assert result.value == sum(range(10000))
    assert 1 < peak <= MAX_CONCURRENT_CALLS


async def test_a_rejected_call_is_an_error_with_the_tools_text() -> None:
    async def failing(name: str, args: Any) -> Any:
        raise HostCallError("it broke", {"code": 7})

    result = await run(
        "try { await tools.echo({}) } catch (e) { return [e.message, e.code, e instanceof Error] }",
        call_tool=failing,
    )
    assert result.value == ["it broke", 7, True]


@pytest.mark.parametrize(
    ("code", "name", "fragment"),
    [
        ("throw new TypeError('boom')", "TypeError", "boom"),
        ("await tools.nope({})", "TypeError", "tools.nope does not exist"),
        ("let x = ;", "SyntaxError", ""),
        ("await new Promise(() => {})", "Error", "can never settle"),
        ("const a = []; while (true) a.push({x: a.length})", "InternalError", "out of memory"),
        ("return 'x'.repeat(1 << 30).length", "RangeError", ""),  # a 1 GB string
        ("return 'x'.repeat(1 << 28).length", "InternalError", "out of memory"),
        ("function f() { return f() } f()", "RangeError", ""),
    ],
)
async def test_script_failures_are_results(code: str, name: str, fragment: str) -> None:
    result = await run(code, memory_limit=32 * 1024 * 1024)
    assert not result.ok and result.error is not None
    assert result.error.kind == "script"
    assert result.error.name == name
    assert fragment in result.error.message


async def test_an_endless_loop_meets_the_deadline_and_keeps_its_output() -> None:
    before = trio.current_time()
    # The deadline counts the engine's start too: room for a start on a loaded machine.
    result = await run("text('started'); while (true) {}", timeout_ms=1500)
    assert trio.current_time() - before < 10
    assert result.error is not None and result.error.kind == "timeout"
    assert result.error.message == "Execution timed out after 1500 ms"
    assert [i.data for i in result.output] == ["started"]


async def test_abort_kills_the_engine_and_cancels_pending_calls() -> None:
    cancelled = trio.Event()
    entered = trio.Event()

    async def hang(name: str, args: Any) -> Any:
        entered.set()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run, "await tools.echo({}); while (true) {}", call_tool=hang))
        await entered.wait()
        nursery.cancel_scope.cancel()
    assert cancelled.is_set()
    assert sandbox.worker_slots().active == 0


async def test_exit_ends_successfully_and_keeps_writes() -> None:
    result = await run("store('a', 1); text('before'); exit(); text('after')")
    assert result.ok and not result.has_value
    assert [i.data for i in result.output] == ["before"]
    assert result.writes == (("a", "1"),)


async def test_workers_are_limited_and_granted_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PITRIO_CODEMODE_MAX_WORKERS", "1")
    release = trio.Event()
    first_in = trio.Event()
    order: list[str] = []

    async def hold(name: str, args: Any) -> Any:
        order.append(args["who"])
        first_in.set()
        if args["who"] == "first":
            await release.wait()
        return None

    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run, "await tools.echo({who: 'first'})", call_tool=hold))
        await first_in.wait()
        nursery.start_soon(partial(run, "await tools.echo({who: 'second'})", call_tool=hold))
        await trio.testing.wait_all_tasks_blocked(0.05)
        assert order == ["first"]  # the second script has no engine yet: it waits its turn
        assert sandbox.worker_slots().active == 1
        release.set()
    assert order == ["first", "second"]


async def test_a_deadline_shorter_than_the_wait_for_a_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PITRIO_CODEMODE_MAX_WORKERS", "1")
    release = trio.Event()

    async def hold(name: str, args: Any) -> Any:
        await release.wait()

    outcome: list[ScriptResult] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(run, "await tools.echo({})", call_tool=hold))
        await trio.testing.wait_all_tasks_blocked(0.05)
        outcome.append(await run("return 1", timeout_ms=100))
        release.set()
    error = outcome[0].error
    assert error is not None and error.kind == "busy"
    assert error.message == (
        "Script timed out: Execution timed out after 100 ms while waiting for a free codemode"
        " worker"
    )


async def test_built_ins_are_locked_so_a_script_cannot_change_what_the_host_gets() -> None:
    # Sloppy-mode assignments to locked built-ins do nothing (pi 1.6.0's scripts are sloppy
    # too); the value reported and the JSON the prelude builds are unchanged.
    result = await run(
        "Array.prototype.toJSON = () => 'patched'; JSON.stringify = () => 'patched';\n"
        "Object.prototype.extra = 1; globalThis.JSON = null;\n"
        "return [[1, 2], typeof JSON, Object.isFrozen(Promise.prototype),"
        " Object.isFrozen(Object.getPrototypeOf([][Symbol.iterator]())), ({}).extra]"
    )
    assert result.ok, result.error
    assert result.value == [[1, 2], "object", True, True, None]
    strict = await run("'use strict'; Array.prototype.push = null")
    assert strict.error is not None and strict.error.name == "TypeError"  # strict code is told
    thrown = await run("Object.defineProperty(Array.prototype, 'x', {value: 1})")
    assert thrown.error is not None and thrown.error.name == "TypeError"


async def test_ordinary_code_still_overrides_inherited_names_on_its_own_objects() -> None:
    # The "override mistake": a frozen prototype's property would make these assignments fail.
    result = await run(
        "class MyError extends Error { constructor(m) { super(m); this.name = 'MyError' } }\n"
        "const o = {}; o.toString = () => 'mine'; o.constructor = 'c';\n"
        "function F() {} F.prototype.valueOf = () => 41;\n"
        "return [String(new MyError('m')), String(o), o.constructor, new F() + 1,"
        " Object.prototype.hasOwnProperty.call(o, 'toString')]"
    )
    assert result.ok, result.error
    assert result.value == ["MyError: m", "mine", "c", 42, True]
    on_built_in = await run("Error.prototype.name = 'x'")
    # Even sloppy code gets the setter's TypeError when it assigns to the built-in itself.
    assert on_built_in.error is not None and "read only property 'name'" in (
        on_built_in.error.message
    )


async def test_the_hand_over_globals_are_gone_before_the_script_runs() -> None:
    result = await run(
        "return Reflect.ownKeys(globalThis).filter((k) => String(k).startsWith('__codemode'))"
    )
    assert result.ok and result.value == []
