"""Tool batches (spec §2.9, §2.11, §3.15.2): order, validation, hooks, files, abort, nesting."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.tool_executor import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentTool,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolBatch,
    ToolExecutor,
    ToolExecutorHandle,
    UpdateFn,
    current_call,
    run_tool_batch,
    text_result,
)
from pitrio.actors.tool_executor.context import MAX_NESTING_DEPTH
from pitrio.actors.tool_executor.mutation import FileMutationQueue
from pitrio.actors.tool_executor.tools import create_builtin_tools
from pitrio.messages.agent import AgentToolResult, AssistantMessage, Cost, Usage
from pitrio.messages.content import TextContent, ToolCall, text_of
from pitrio.messages.events import (
    AgentEvent,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)

NUMBER_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "number"}},
    "required": ["n"],
}


def response(*calls: tuple[str, dict[str, Any]]) -> AssistantMessage:
    return AssistantMessage(
        content=tuple(
            ToolCall(id=f"call_{index}", name=name, arguments=args)
            for index, (name, args) in enumerate(calls, start=1)
        ),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=1,
    )


class Recorder:
    """Collects events; ``shape`` describes them compactly."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def __call__(self, event: AgentEvent) -> None:
        self.events.append(event)

    def shape(self) -> list[str]:
        out = []
        for event in self.events:
            match event:
                case ToolExecutionStart(tool_call_id=cid, parent_tool_call_id=parent):
                    out.append(f"start {cid}" + (f" in {parent}" if parent else ""))
                case ToolExecutionUpdate(tool_call_id=cid):
                    out.append(f"update {cid}")
                case ToolExecutionEnd(tool_call_id=cid, is_error=err, parent_tool_call_id=parent):
                    out.append(
                        f"end {cid}"
                        + (" error" if err else "")
                        + (f" in {parent}" if parent else "")
                    )
                case MessageEnd(message=message):
                    out.append(f"result {message.tool_call_id}")  # type: ignore[union-attr]
        return out


def logging_tool(
    name: str, log: list[str], gate: trio.Event | None = None, **kwargs: Any
) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        log.append(f"start {call_id}")
        if gate is not None:
            await gate.wait()
        await trio.lowlevel.checkpoint()
        log.append(f"end {call_id}")
        return text_result(f"{name} {args}")

    return AgentTool(name=name, execute=execute, **kwargs)


async def test_parallel_order_rules() -> None:
    gate_a, gate_b = trio.Event(), trio.Event()
    log: list[str] = []
    tools = (logging_tool("a", log, gate_a), logging_tool("b", log, gate_b))
    batch = ToolBatch(
        assistant_message=response(("a", {}), ("missing", {}), ("b", {})), tools=tools
    )
    recorder = Recorder()
    outcome: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            outcome.append(await run_tool_batch(batch, emit=recorder))

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(log) == ["start call_1", "start call_3"]  # both running
        gate_b.set()
        await trio.testing.wait_all_tasks_blocked()
        gate_a.set()
    assert recorder.shape() == [
        "start call_1",
        "start call_2",
        "end call_2 error",  # refused during preflight
        "start call_3",
        "end call_3",  # completion order
        "end call_1",
        "result call_1",  # results in source order
        "result call_2",
        "result call_3",
    ]
    result = outcome[0]
    assert [m.tool_call_id for m in result.messages] == ["call_1", "call_2", "call_3"]
    assert text_of(result.messages[1].content) == "Tool missing not found"
    assert result.messages[1].details == {}
    assert result.terminate is False


async def test_a_sequential_tool_serialises_the_batch() -> None:
    log: list[str] = []
    tools = (logging_tool("a", log, execution_mode="sequential"), logging_tool("b", log))
    recorder = Recorder()
    batch = ToolBatch(assistant_message=response(("b", {}), ("a", {})), tools=tools)
    await run_tool_batch(batch, emit=recorder)
    assert log == ["start call_1", "end call_1", "start call_2", "end call_2"]
    assert recorder.shape() == [
        "start call_1",
        "end call_1",
        "result call_1",
        "start call_2",
        "end call_2",
        "result call_2",
    ]


async def test_invalid_arguments_never_reach_the_tool() -> None:
    log: list[str] = []
    tool = logging_tool("num", log, parameters=NUMBER_SCHEMA)
    batch = ToolBatch(
        assistant_message=response(("num", {"n": "many"}), ("num", {"n": "7"})), tools=(tool,)
    )
    result = await run_tool_batch(batch, emit=Recorder())
    assert log == ["start call_2", "end call_2"]
    assert text_of(result.messages[0].content) == (
        'Validation failed for tool "num":\n  - n: expected number, got string\n\n'
        'Received arguments:\n{\n  "n": "many"\n}'
    )
    assert text_of(result.messages[1].content) == "num {'n': 7}"  # converted before the tool


async def test_prepare_then_schema_then_custom_validate() -> None:
    seen: list[dict[str, Any]] = []

    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        seen.append(args)
        return text_result("ok")

    def validate(args: dict[str, Any]) -> dict[str, Any]:
        if args["n"] > 10:
            raise ValueError("n is too big")
        return {**args, "checked": True}

    tool = AgentTool(
        name="t",
        parameters=NUMBER_SCHEMA,
        execute=execute,
        prepare_arguments=lambda args: {"n": args.get("count", args.get("n"))},
        validate=validate,
    )
    batch = ToolBatch(
        assistant_message=response(("t", {"count": "3"}), ("t", {"n": 11})), tools=(tool,)
    )
    result = await run_tool_batch(batch, emit=Recorder())
    assert seen == [{"n": 3, "checked": True}]
    assert text_of(result.messages[1].content) == "n is too big"


async def test_hooks_block_rewrite_and_fail() -> None:
    log: list[str] = []
    tools = tuple(logging_tool(name, log, parameters=NUMBER_SCHEMA) for name in "abcde")
    seen_args: list[dict[str, Any]] = []

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        seen_args.append(ctx.args)
        if ctx.tool_call.name == "a":
            return BeforeToolCallResult(block=True, reason="not a")
        if ctx.tool_call.name == "b":
            return BeforeToolCallResult(block=True)
        if ctx.tool_call.name == "c":
            raise RuntimeError("hook broke")
        return None

    async def after(ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        if ctx.tool_call.name == "d":
            return AfterToolCallResult(
                content=(TextContent(text="rewritten"),),
                details={"x": 1},
                is_error=True,
                terminate=True,
            )
        raise RuntimeError("after broke")

    batch = ToolBatch(
        assistant_message=response(*((name, {"n": "1"}) for name in "abcde")),
        tools=tools,
        before_tool_call=before,
        after_tool_call=after,
    )
    result = await run_tool_batch(batch, emit=Recorder())
    assert seen_args[0] == {"n": 1}  # the hook sees validated, converted arguments
    assert [(text_of(m.content), m.is_error) for m in result.messages] == [
        ("not a", True),
        ("Tool execution was blocked", True),
        ("hook broke", True),
        ("rewritten", True),
        ("after broke", True),
    ]
    assert result.messages[3].details == {"x": 1}
    assert sorted(log) == ["end call_4", "end call_5", "start call_4", "start call_5"]


async def test_terminate_only_when_every_result_asks() -> None:
    async def final(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return AgentToolResult(content=(TextContent(text="bye"),), terminate=True)

    tools = (AgentTool(name="final", execute=final), logging_tool("other", []))
    both = await run_tool_batch(
        ToolBatch(assistant_message=response(("final", {}), ("final", {})), tools=tools),
        emit=Recorder(),
    )
    mixed = await run_tool_batch(
        ToolBatch(assistant_message=response(("final", {}), ("other", {})), tools=tools),
        emit=Recorder(),
    )
    assert (both.terminate, mixed.terminate) == (True, False)


# -- files ----------------------------------------------------------------------------------


def make_symlink(target: str, link: str) -> None:
    Path(target).touch()
    Path(link).symlink_to(target)


def mutating_tool(log: list[str], gates: dict[str, trio.Event]) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        log.append(f"start {call_id}")
        await gates[call_id].wait()
        log.append(f"end {call_id}")
        return text_result("done")

    return AgentTool(name="mut", execute=execute, mutates=lambda args: args["path"])


async def test_same_file_calls_run_in_source_order_other_files_in_parallel(tmp_path: Path) -> None:
    same = str(tmp_path / "same.txt")
    other = str(tmp_path / "other.txt")
    link = str(tmp_path / "link.txt")
    make_symlink(same, link)
    for _ in range(10):  # trio starts sibling tasks in varying order: the order must not vary
        log: list[str] = []
        gates = {f"call_{i}": trio.Event() for i in range(1, 5)}
        tool = mutating_tool(log, gates)
        batch = ToolBatch(
            assistant_message=response(
                ("mut", {"path": same}),
                ("mut", {"path": other}),
                ("mut", {"path": link}),
                ("mut", {"path": same}),
            ),
            tools=(tool,),
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(run_tool_batch, batch, emit=Recorder()))
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(log) == ["start call_1", "start call_2"]  # other file: in parallel
            gates["call_1"].set()
            await trio.testing.wait_all_tasks_blocked()
            assert log[-2:] == ["end call_1", "start call_3"]  # the symlink is the same file
            gates["call_3"].set()
            await trio.testing.wait_all_tasks_blocked()
            assert log[-1] == "start call_4"
            gates["call_4"].set()
            gates["call_2"].set()


async def test_edits_of_one_file_in_one_batch_apply_in_source_order(tmp_path: Path) -> None:
    tools = create_builtin_tools(str(tmp_path))
    for _ in range(10):
        (tmp_path / "f.txt").write_text("v1\n")
        batch = ToolBatch(
            assistant_message=response(
                ("edit", {"path": "f.txt", "edits": [{"oldText": "v1", "newText": "v2"}]}),
                ("write", {"path": "g.txt", "content": "other"}),
                ("edit", {"path": "f.txt", "oldText": "v2", "newText": "v3"}),  # legacy form
            ),
            tools=tools,
        )
        result = await run_tool_batch(batch, emit=Recorder())
        assert [m.is_error for m in result.messages] == [False, False, False]
        assert (tmp_path / "f.txt").read_text() == "v3\n"


async def test_a_refused_ticket_holder_does_not_let_later_ones_jump_ahead() -> None:
    queue = FileMutationQueue()
    first, second, third = (queue.enqueue("/x/f") for _ in range(3))
    order: list[str] = []

    async def holder(name: str, ticket: Any) -> None:
        await ticket.wait()
        order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(holder, "third", third)
        await trio.testing.wait_all_tasks_blocked()
        second.release()  # refused before its turn
        await trio.testing.wait_all_tasks_blocked()
        assert order == [] and queue.busy() == {"/x/f"}
        first.release()
    assert order == ["third"]
    third.release()
    assert queue.busy() == frozenset()
    fresh = queue.enqueue("/x/f")
    await fresh.wait()  # nothing ahead
    fresh.release()


# -- abort ----------------------------------------------------------------------------------


async def test_abort_ends_running_and_queued_calls(autojump_clock: trio.testing.MockClock) -> None:
    abort = RunAbort()
    started = trio.Event()

    async def sleeper(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        await on_update(text_result("partial"))
        started.set()
        await trio.sleep(100)
        return text_result("never")

    def custom_abort(partial: AgentToolResult | None) -> AgentToolResult:
        return text_result(
            f"stopped after {text_of(partial.content) if partial else 'nothing'}", {}
        )

    tools = (
        AgentTool(name="sleep", execute=sleeper, mutates=lambda args: "/tmp/pitrio-test-file"),
        AgentTool(name="polite", execute=sleeper, aborted_result=custom_abort),
    )
    batch = ToolBatch(
        assistant_message=response(("sleep", {}), ("sleep", {}), ("polite", {})), tools=tools
    )
    recorder = Recorder()
    outcome: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            outcome.append(await run_tool_batch(batch, emit=recorder, abort=abort))

        nursery.start_soon(run)
        await started.wait()
        await trio.testing.wait_all_tasks_blocked()
        abort.abort()
    assert trio.current_time() < 100
    messages = outcome[0].messages
    assert [(text_of(m.content), m.is_error) for m in messages] == [
        ("Operation aborted", True),
        ("Operation aborted", True),  # was still waiting for the file
        ("stopped after partial", True),
    ]
    ends = [e for e in recorder.events if isinstance(e, ToolExecutionEnd)]
    assert len(ends) == 3


# -- nested calls -----------------------------------------------------------------------------


def outer_tool(script: list[tuple[str, dict[str, Any]]], seen: list[Any]) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        assert call is not None and call.tool_call_id == call_id
        for name, nested_args in script:
            seen.append(await call.execute_tool(name, nested_args))
        assert current_call() is call  # restored after each nested call
        return text_result("outer done", details={"mine": True})

    return AgentTool(name="outer", execute=execute)


async def test_nested_calls_share_the_pipeline_and_are_recorded(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("nested content")
    builtins = create_builtin_tools(str(tmp_path))
    seen: list[Any] = []
    script = [
        ("read", {"path": "n.txt"}),
        ("read", {}),
        ("ghost", {}),
        ("bash", {"command": "echo hi"}),
        ("write", {"path": "blocked.txt", "content": "x"}),
    ]
    hook_calls: list[str] = []

    async def before(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        hook_calls.append(ctx.tool_call.id)
        if ctx.tool_call.name == "write":
            return BeforeToolCallResult(block=True, reason="no writes from inside")
        return None

    batch = ToolBatch(
        assistant_message=response(("outer", {})),
        tools=(outer_tool(script, seen), *builtins),
        before_tool_call=before,
    )
    recorder = Recorder()
    result = await run_tool_batch(batch, emit=recorder)
    assert [(n.tool_call_id, n.is_error) for n in seen] == [
        ("call_1/1", False),
        ("call_1/2", True),
        ("call_1/3", True),
        ("call_1/4", False),
        ("call_1/5", True),
    ]
    assert text_of(seen[1].result.content).startswith('Validation failed for tool "read":')
    assert text_of(seen[2].result.content) == "Tool ghost not found"
    assert text_of(seen[4].result.content) == "no writes from inside"
    assert not (tmp_path / "blocked.txt").exists()
    assert hook_calls == ["call_1", "call_1/1", "call_1/4", "call_1/5"]  # invalid ones never ask
    shape = recorder.shape()
    assert shape[0] == "start call_1"
    assert shape[1:3] == ["start call_1/1 in call_1", "end call_1/1 in call_1"]
    assert "update call_1/4" in shape
    assert shape[-2:] == ["end call_1", "result call_1"]
    updates = [e for e in recorder.events if isinstance(e, ToolExecutionUpdate)]
    assert {u.parent_tool_call_id for u in updates} == {"call_1"}
    message = result.messages[0]
    assert message.details == {"mine": True}  # pi 1.6.0 records nested calls on the message
    nested = message.nested_calls
    assert nested is not None and nested.complete
    assert [(r.id, r.name, r.status) for r in nested.calls] == [
        ("call_1/1", "read", "ok"),
        ("call_1/2", "read", "error"),
        ("call_1/3", "ghost", "error"),
        ("call_1/4", "bash", "ok"),
        ("call_1/5", "write", "error"),
    ]
    assert nested.calls[0].arguments == {"path": "n.txt"}
    assert nested.calls[0].error is None and nested.calls[0].duration_ms is not None
    assert nested.calls[2].error == "Tool ghost not found"
    assert nested.calls[4].error == "no writes from inside"


def calling(script: list[tuple[str, dict[str, Any]]], result: AgentToolResult) -> Any:
    """A tool body that makes the nested calls of ``script`` in order, then returns ``result``."""

    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        assert call is not None
        for name, nested_args in script:
            await call.execute_tool(name, nested_args)
        return result

    return execute


async def test_nested_calls_of_nested_calls_are_recorded_on_the_model_issued_call() -> None:
    async def leaf(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return text_result("leaf")

    middle = calling([("leaf", {"big": "x" * 9000})], text_result("middle"))
    top = calling([("middle", {})], text_result("top"))
    tools = tuple(
        AgentTool(name=name, execute=body)
        for name, body in (("top", top), ("middle", middle), ("leaf", leaf))
    )
    batch = ToolBatch(assistant_message=response(("top", {})), tools=tools)
    result = await run_tool_batch(batch, emit=Recorder())
    nested = result.messages[0].nested_calls
    assert nested is not None
    assert [(r.id, r.name, r.status) for r in nested.calls] == [
        ("call_1/1", "middle", "ok"),
        ("call_1/1/1", "leaf", "ok"),
    ]
    # arguments over 8 KiB are left out with their size, and the record says it is incomplete
    assert nested.calls[1].arguments is None and nested.calls[1].arguments_bytes == 9010
    assert nested.complete is False


def _usage(tokens: int, cost: float) -> Usage:
    return Usage(input=tokens, output=1, total_tokens=tokens + 1, cost=Cost(input=cost, total=cost))


async def test_nested_results_usage_is_added_to_the_model_issued_calls_message() -> None:
    # pi 1.6.0: nested results are not stored, so their usage (deeper calls' too) is summed
    # onto the result message of the call the model issued, beside that tool's own usage.
    async def leaf(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return AgentToolResult(content=(), usage=_usage(100, 0.5))

    middle = calling([("leaf", {})], AgentToolResult(content=(), usage=_usage(20, 0.25)))
    top = calling(
        [("middle", {}), ("leaf", {})], AgentToolResult(content=(), usage=_usage(3, 0.125))
    )
    plain = calling([("leaf", {})], text_result("no usage of its own"))
    tools = tuple(
        AgentTool(name=name, execute=body)
        for name, body in (("top", top), ("middle", middle), ("leaf", leaf), ("plain", plain))
    )
    recorder = Recorder()
    batch = ToolBatch(assistant_message=response(("top", {}), ("plain", {})), tools=tools)
    result = await run_tool_batch(batch, emit=recorder)
    first, second = result.messages
    assert first.usage is not None and second.usage is not None
    assert (first.usage.input, first.usage.output, first.usage.total_tokens) == (223, 4, 227)
    assert first.usage.cost.total == 1.375  # 0.125 own + 0.25 middle + 2 x 0.5 leaf
    assert (second.usage.input, second.usage.cost.total) == (100, 0.5)
    # the events of the calls keep each result's own usage
    ends = {
        e.tool_call_id: e.result.usage for e in recorder.events if isinstance(e, ToolExecutionEnd)
    }
    assert ends["call_1"] is not None and ends["call_1"].input == 3
    assert ends["call_1/1"] is not None and ends["call_1/1"].input == 20


async def test_nested_calls_reach_callable_tools_that_are_not_declared() -> None:
    async def hidden(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return text_result("from a codemode tool")

    seen: list[Any] = []
    outer = outer_tool([("only_callable", {}), ("outer", {})], seen)
    outer = attrs.evolve(outer, exposure="model-only")
    callable_only = AgentTool(name="only_callable", execute=hidden, exposure="codemode")
    batch = ToolBatch(
        assistant_message=response(("outer", {}), ("only_callable", {})),
        tools=(outer,),
        callable_tools=(outer, callable_only),
    )
    result = await run_tool_batch(batch, emit=Recorder())
    assert [(n.tool_name, n.is_error) for n in seen] == [
        ("only_callable", False),
        ("outer", True),  # a model-only tool is not callable from other tools
    ]
    assert text_of(seen[1].result.content) == "Tool outer not found"
    # the model cannot call what is not declared to it
    assert text_of(result.messages[1].content) == "Tool only_callable not found"


async def test_nesting_depth_is_bounded() -> None:
    async def recurse(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        assert call is not None
        nested = await call.execute_tool("recurse", {})
        return text_result(f"depth {call.depth}: {text_of(nested.result.content)}")

    batch = ToolBatch(
        assistant_message=response(("recurse", {})),
        tools=(AgentTool(name="recurse", execute=recurse),),
    )
    result = await run_tool_batch(batch, emit=Recorder())
    innermost = text_of(result.messages[0].content)
    assert innermost.endswith(f"Nested tool calls are limited to {MAX_NESTING_DEPTH} levels")
    assert innermost.startswith("depth 0: depth 1:")


async def test_abort_inside_a_nested_call_ends_both(autojump_clock: trio.testing.MockClock) -> None:
    abort = RunAbort()
    started = trio.Event()

    async def slow(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        started.set()
        await trio.sleep(100)
        return text_result("never")

    async def outer(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        assert call is not None
        await call.execute_tool("slow", {})
        await trio.sleep(100)  # never reached: the run is aborted
        return text_result("never")

    tools = (AgentTool(name="outer", execute=outer), AgentTool(name="slow", execute=slow))
    recorder = Recorder()
    outcome: list[Any] = []
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            batch = ToolBatch(assistant_message=response(("outer", {})), tools=tools)
            outcome.append(await run_tool_batch(batch, emit=recorder, abort=abort))

        nursery.start_soon(run)
        await started.wait()
        abort.abort()
    assert recorder.shape() == [
        "start call_1",
        "start call_1/1 in call_1",
        "end call_1/1 error in call_1",
        "end call_1 error",
        "result call_1",
    ]
    message = outcome[0].messages[0]
    assert text_of(message.content) == "Operation aborted"
    nested = message.nested_calls
    assert nested is not None and not nested.complete  # the nested call never finished
    assert [(r.id, r.status) for r in nested.calls] == [("call_1/1", "unfinished")]


async def test_a_nested_edit_of_the_file_its_parent_holds_does_not_deadlock(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\n")
    builtins = create_builtin_tools(str(tmp_path))

    async def rewrite(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        assert call is not None
        nested = await call.execute_tool(
            "edit", {"path": "f.txt", "edits": [{"oldText": "one", "newText": "two"}]}
        )
        return nested.result

    tool = AgentTool(name="rewrite", execute=rewrite, mutates=lambda args: str(tmp_path / "f.txt"))
    batch = ToolBatch(assistant_message=response(("rewrite", {})), tools=(tool, *builtins))
    with trio.fail_after(5):
        result = await run_tool_batch(batch, emit=Recorder())
    assert not result.messages[0].is_error
    assert (tmp_path / "f.txt").read_text() == "two\n"


async def test_context_outside_a_batch_and_through_the_handle(tmp_path: Path) -> None:
    seen: list[Any] = []

    async def probe(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        call = current_call()
        seen.append((call_id, call.tool_call_id if call else None, call.model if call else None))
        return text_result("ok")

    tool = AgentTool(name="probe", execute=probe)
    await tool.execute("direct", {}, Recorder())  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        handle = ToolExecutorHandle(await nursery.start(ToolExecutor([tool]).run))
        batch = ToolBatch(
            assistant_message=response(("probe", {})), tools=await handle.active_tools()
        )
        result = await handle.run_batch(batch, emit=Recorder())
        await handle.aclose()
    assert seen == [("direct", None, None), ("call_1", "call_1", None)]
    assert text_of(result.messages[0].content) == "ok"


async def test_nested_call_needs_a_batch() -> None:
    from pitrio.actors.tool_executor.context import ToolCallContext

    with pytest.raises(RuntimeError, match="nested tool calls need a running batch"):
        await ToolCallContext(tool_call_id="c", tool_name="t").execute_tool("x")
