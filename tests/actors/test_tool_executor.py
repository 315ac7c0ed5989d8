"""The tool executor actor (pitrio/actors/tool_executor/): registry, active set, execute."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.tool_executor import (
    AgentTool,
    ToolExecutor,
    ToolExecutorHandle,
    text_result,
)
from pitrio.errors import ActorStoppedError, ToolNotFoundError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent


async def _ok(_call_id: str, _args: dict[str, Any], _update: Any) -> AgentToolResult:
    return text_result("ok")


def tool(name: str, description: str = "") -> AgentTool:
    return AgentTool(name=name, description=description, execute=_ok)


async def names(handle: ToolExecutorHandle) -> list[str]:
    return [t.name for t in await handle.active_tools()]


@pytest.fixture
async def executor(nursery: trio.Nursery) -> AsyncIterator[ToolExecutorHandle]:
    handle = ToolExecutorHandle(await nursery.start(ToolExecutor([tool("a"), tool("b")]).run))
    yield handle
    await handle.aclose()


async def test_initial_tools_are_active_in_order(executor: ToolExecutorHandle) -> None:
    assert await names(executor) == ["a", "b"]


async def test_empty_executor(nursery: trio.Nursery) -> None:
    handle = ToolExecutorHandle(await nursery.start(ToolExecutor().run))
    assert await handle.active_tools() == ()
    await handle.aclose()


async def test_register_activates_by_default_appending(executor: ToolExecutorHandle) -> None:
    await executor.register(tool("c"), tool("d"))
    assert await names(executor) == ["a", "b", "c", "d"]


async def test_register_without_activate(executor: ToolExecutorHandle) -> None:
    await executor.register(tool("c"), activate=False)
    assert await names(executor) == ["a", "b"]
    # Registered nonetheless: it can be activated by name.
    await executor.set_active(["c", "a"])
    assert await names(executor) == ["c", "a"]


async def test_active_tools_are_read_without_a_round_trip(executor: ToolExecutorHandle) -> None:
    # The executor publishes its active tools and their prompt lines; reading them sends it
    # nothing, and a change the caller awaited is visible in its very next read.
    received = executor.stats().received
    assert await names(executor) == ["a", "b"]
    assert [entry.name for entry in await executor.prompt_entries()] == ["a", "b"]
    assert executor.stats().received == received
    await executor.register(tool("c", description="see"), activate=False)
    await executor.set_active(["c"])
    assert await names(executor) == ["c"]
    assert [entry.name for entry in await executor.prompt_entries()] == ["c"]
    with pytest.raises(ToolNotFoundError):
        await executor.set_active(["nope"])
    assert await names(executor) == ["c"]  # a refused change publishes nothing
    assert executor.stats().received == received + 3


async def test_register_replaces_by_name_keeping_position(executor: ToolExecutorHandle) -> None:
    await executor.register(tool("a", description="new a"))
    active = await executor.active_tools()
    assert [t.name for t in active] == ["a", "b"]
    assert active[0].description == "new a"


async def test_replacing_an_inactive_tool_without_activate_keeps_it_inactive(
    executor: ToolExecutorHandle,
) -> None:
    await executor.set_active(["b"])
    await executor.register(tool("a", description="new a"), activate=False)
    assert await names(executor) == ["b"]
    await executor.set_active(["a"])
    assert (await executor.active_tools())[0].description == "new a"


async def test_set_active_exact_set_and_order(executor: ToolExecutorHandle) -> None:
    await executor.set_active(["b", "a"])
    assert await names(executor) == ["b", "a"]
    await executor.set_active(["b"])
    assert await names(executor) == ["b"]
    await executor.set_active([])
    assert await names(executor) == []
    # Deactivated tools stay registered.
    await executor.set_active(["a", "b"])
    assert await names(executor) == ["a", "b"]


async def test_set_active_drops_duplicates(executor: ToolExecutorHandle) -> None:
    await executor.set_active(["b", "a", "b", "a"])
    assert await names(executor) == ["b", "a"]


async def test_set_active_unknown_name_fails_and_changes_nothing(
    executor: ToolExecutorHandle,
) -> None:
    await executor.set_active(["b"])
    with pytest.raises(ToolNotFoundError, match="Unknown tool: nope"):
        await executor.set_active(["a", "nope", "other"])
    assert await names(executor) == ["b"]
    # The actor survived the error and still answers.
    await executor.register(tool("c"))
    assert await names(executor) == ["b", "c"]


async def test_active_tools_is_a_snapshot(executor: ToolExecutorHandle) -> None:
    before = await executor.active_tools()
    await executor.set_active(["b"])
    assert [t.name for t in before] == ["a", "b"]


async def test_execute_passes_arguments_and_returns_result(executor: ToolExecutorHandle) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    updates: list[AgentToolResult] = []

    async def run(call_id: str, args: dict[str, Any], update: Any) -> AgentToolResult:
        seen.append((call_id, args))
        await update(text_result("half"))
        return text_result(f"done {args['x']}", details={"n": 1})

    async def on_update(partial: AgentToolResult) -> None:
        updates.append(partial)

    result = await executor.execute(
        AgentTool(name="t", execute=run), "call_1", {"x": 42}, on_update
    )
    assert seen == [("call_1", {"x": 42})]
    assert updates == [text_result("half")]
    assert result == AgentToolResult(content=(TextContent(text="done 42"),), details={"n": 1})


async def test_execute_runs_in_the_callers_task(executor: ToolExecutorHandle) -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def run(_call_id: str, _args: dict[str, Any], update: Any) -> AgentToolResult:
        tasks.append(trio.lowlevel.current_task())
        await update(text_result("partial"))
        return text_result("ok")

    async def on_update(_partial: AgentToolResult) -> None:
        tasks.append(trio.lowlevel.current_task())

    await executor.execute(AgentTool(name="t", execute=run), "c", {}, on_update)
    assert tasks == [trio.lowlevel.current_task()] * 2


async def test_execute_exceptions_propagate_unwrapped(executor: ToolExecutorHandle) -> None:
    async def run(_call_id: str, _args: dict[str, Any], _update: Any) -> AgentToolResult:
        raise ValueError("bad input")

    async def on_update(_partial: AgentToolResult) -> None:
        raise AssertionError("not called")

    with pytest.raises(ValueError, match="bad input"):
        await executor.execute(AgentTool(name="t", execute=run), "c", {}, on_update)
    assert await names(executor) == ["a", "b"]


async def test_cancelling_the_callers_scope_cancels_the_tool(
    executor: ToolExecutorHandle, nursery: trio.Nursery
) -> None:
    started = trio.Event()
    outcome: list[str] = []

    async def run(_call_id: str, _args: dict[str, Any], _update: Any) -> AgentToolResult:
        started.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            outcome.append("cancelled")
            raise
        finally:
            outcome.append("finally")
        raise AssertionError("unreachable")

    async def on_update(_partial: AgentToolResult) -> None:
        pass

    caller_scope = trio.CancelScope()
    finished = trio.Event()

    async def caller() -> None:
        with caller_scope:
            await executor.execute(AgentTool(name="t", execute=run), "c", {}, on_update)
        outcome.append(f"caught={caller_scope.cancelled_caught}")
        finished.set()

    nursery.start_soon(caller)
    await started.wait()
    # While the tool runs, the executor keeps answering: the call is not inside the actor.
    assert await names(executor) == ["a", "b"]
    caller_scope.cancel()
    await finished.wait()
    assert outcome == ["cancelled", "finally", "caught=True"]


async def test_a_deadline_on_the_caller_bounds_the_tool(
    executor: ToolExecutorHandle, autojump_clock: trio.testing.MockClock
) -> None:
    async def run(_call_id: str, _args: dict[str, Any], _update: Any) -> AgentToolResult:
        await trio.sleep(3600)
        return text_result("too late")

    async def on_update(_partial: AgentToolResult) -> None:
        pass

    start = trio.current_time()
    with trio.move_on_after(5) as scope:
        await executor.execute(AgentTool(name="t", execute=run), "c", {}, on_update)
    assert scope.cancelled_caught
    assert trio.current_time() - start == pytest.approx(5)


async def test_handle_after_stop_raises(nursery: trio.Nursery) -> None:
    handle = ToolExecutorHandle(await nursery.start(ToolExecutor([tool("a")]).run))
    await handle.aclose()
    with pytest.raises(ActorStoppedError):
        await handle.active_tools()


# -- built-ins, filters, prompt entries, processes (issue 4) ---------------------------------


async def test_builtin_tools_default_active_set(nursery: trio.Nursery, tmp_path: Any) -> None:
    from pitrio.actors.tool_executor import BUILTIN_TOOL_NAMES

    actor = ToolExecutor(builtin=True, cwd=str(tmp_path))
    handle = ToolExecutorHandle(await nursery.start(actor.run))
    assert await names(handle) == ["read", "bash", "edit", "write"]
    assert [t.name for t in await handle.all_tools()] == list(BUILTIN_TOOL_NAMES)
    entries = {entry.name: entry for entry in await handle.prompt_entries()}
    assert entries["read"].snippet == "Read file contents"
    assert entries["read"].guidelines == ("Use read to examine files instead of cat or sed.",)
    assert entries["bash"].snippet == "Execute bash commands (ls, grep, find, etc.)"
    assert entries["bash"].guidelines == ()
    assert entries["write"].guidelines == ("Use write only for new files or complete rewrites.",)
    assert len(entries["edit"].guidelines) == 4
    await handle.aclose()


async def test_builtin_snippets_of_the_search_tools(nursery: trio.Nursery, tmp_path: Any) -> None:
    actor = ToolExecutor(builtin=True, cwd=str(tmp_path), active=["grep", "find", "ls", "nope"])
    handle = ToolExecutorHandle(await nursery.start(actor.run))
    assert [(e.name, e.snippet) for e in await handle.prompt_entries()] == [
        ("grep", "Search file contents for patterns (respects .gitignore)"),
        ("find", "Find files by glob pattern (respects .gitignore)"),
        ("ls", "List directory contents"),
    ]
    await handle.aclose()


async def test_custom_tools_join_the_defaults_and_override_builtins(
    nursery: trio.Nursery, tmp_path: Any
) -> None:
    actor = ToolExecutor([tool("mine"), tool("read", "my read")], builtin=True, cwd=str(tmp_path))
    handle = ToolExecutorHandle(await nursery.start(actor.run))
    active = await handle.active_tools()
    assert [t.name for t in active] == ["read", "bash", "edit", "write", "mine"]
    assert active[0].description == "my read"
    await handle.aclose()


async def test_allow_and_deny_lists(nursery: trio.Nursery, tmp_path: Any) -> None:
    actor = ToolExecutor(
        builtin=True, cwd=str(tmp_path), allow=["read", "grep", "f*"], deny=["find"]
    )
    handle = ToolExecutorHandle(await nursery.start(actor.run))
    assert await names(handle) == ["read", "grep"]
    assert await handle.register(tool("fancy"), tool("other")) == ("fancy",)
    assert await names(handle) == ["read", "grep", "fancy"]
    with pytest.raises(ToolNotFoundError, match="Unknown tool: bash"):
        await handle.set_active(["bash"])
    await handle.aclose()


async def test_register_refuses_invalid_definitions(executor: ToolExecutorHandle) -> None:
    from pitrio.errors import ToolRegistryError

    with pytest.raises(ToolRegistryError):
        await executor.register(AgentTool(name="x", parameters={"type": 3}, execute=_ok))
    assert await names(executor) == ["a", "b"]


async def test_stopping_the_executor_ends_leftover_process_groups(tmp_path: Any) -> None:
    from .tools.support import alive_with_marker, run_one, unique_marker

    marker = unique_marker()
    async with trio.open_nursery() as nursery:
        actor = ToolExecutor(builtin=True, cwd=str(tmp_path))
        handle = ToolExecutorHandle(await nursery.start(actor.run))
        bash = next(t for t in await handle.active_tools() if t.name == "bash")
        # The shell exits at once; its background child keeps the pipe for 100 ms only.
        result, _ = await run_one(bash, {"command": f"sleep {marker} & echo started"})
        assert result.content[0].text == "started\n"  # type: ignore[union-attr]
        assert alive_with_marker(marker)
        assert actor.processes.tracked()
        nursery.cancel_scope.cancel()  # the session ends
    assert not alive_with_marker(marker)
