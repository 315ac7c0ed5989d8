"""The core agent loop actor: scenarios S1-S21, S27-S30 of pi's suites, event order, abort."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    LoopHooks,
    LoopOptions,
)
from pitrio.actors.agent_loop.actor import PLACEHOLDER_MODEL, LoopFacts, RunEndFacts
from pitrio.actors.agent_loop.decisions import aborted_text
from pitrio.actors.model_router import FauxReply, FauxToolCall
from pitrio.actors.tool_executor import AgentTool, UpdateFn, text_result
from pitrio.errors import AgentBusyError, ContinueError
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    CustomMessage,
    LlmMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
    user_message,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import TextContent, ToolCall, text_of
from pitrio.messages.convert import convert_to_llm
from pitrio.messages.events import (
    AgentEnd,
    MessageEnd,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
)
from pitrio.messages.model import LlmContext
from pitrio.messages.snapshot import Snapshot

from .conftest import FAUX_1, running_loop, shape

BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or followUp() to queue messages, "
    "or wait for completion."
)


def echo_tool(name: str = "echo") -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return text_result(f"echoed: {args.get('value')}", details={"value": args.get("value")})

    return AgentTool(name=name, description="echo a value", execute=execute)


def gated_tool(name: str, gate: trio.Event, log: list[str]) -> AgentTool:
    """A tool that records when it starts and finishes, and waits for ``gate`` in between."""

    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        log.append(f"start {name}")
        await gate.wait()
        log.append(f"end {name}")
        return text_result(f"{name} done")

    return AgentTool(name=name, execute=execute)


def assistant(text: str) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1,
    )


def user_texts(messages: list[LlmMessage] | tuple[LlmMessage, ...]) -> list[str]:
    return [text_of(m.content) for m in messages if isinstance(m, UserMessage)]


# -- S1-S7: state and idle behaviour -------------------------------------------------------


async def test_s1_default_state() -> None:
    async with running_loop() as fx:
        state = await fx.loop.state()
    assert state.system_prompt == ""
    assert state.model.id == "faux-1"
    assert state.thinking_level == "off"
    assert state.messages == ()
    assert state.tools == ()
    assert not state.is_streaming
    assert state.streaming_message is None
    assert state.pending_tool_calls == frozenset()
    assert state.error_message is None
    assert PLACEHOLDER_MODEL.id == "unknown" and PLACEHOLDER_MODEL.context_window == 0


async def test_s2_s3_s4_state_mutators_emit_nothing() -> None:
    async with running_loop() as fx:
        await fx.loop.configure(system_prompt="be brief", thinking_level="low")
        state = await fx.loop.state()
        assert (state.system_prompt, state.thinking_level) == ("be brief", "low")
        originals = [user_message("a"), user_message("b")]
        await fx.loop.set_messages(originals)
        originals.append(user_message("c"))  # the agent holds a copy
        assert len((await fx.loop.state()).messages) == 2
        extra = user_message("d")
        await fx.loop.append_message(extra)
        assert (await fx.loop.state()).messages[-1] is extra
        await fx.loop.set_messages([])
        assert (await fx.loop.state()).messages == ()
        assert fx.drain() == []


async def test_s5_s6_s7_idle_queue_and_abort() -> None:
    async with running_loop() as fx:
        await fx.loop.steer("steer me")
        await fx.loop.follow_up("later")
        await fx.loop.abort()  # idle: nothing happens, nothing raises
        state = await fx.loop.state()
        assert state.messages == ()
        assert [text_of(m.content) for m in state.steering] == ["steer me"]  # type: ignore[union-attr]
        assert [text_of(m.content) for m in state.follow_up] == ["later"]  # type: ignore[union-attr]
        assert fx.drain() == []


# -- S8, S9: busy refusals -----------------------------------------------------------------


async def test_s8_s9_second_prompt_and_continue_refused_while_streaming(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FauxReply(text="x" * 120, chunk_delay=1000)  # ends only by abort, in practice
    async with running_loop(slow) as fx, trio.open_nursery() as nursery:
        nursery.start_soon(fx.loop.prompt, "first")
        await trio.sleep(1)
        assert (await fx.loop.state()).is_streaming
        with pytest.raises(AgentBusyError) as busy:
            await fx.loop.prompt("second")
        assert str(busy.value) == BUSY_PROMPT
        with pytest.raises(AgentBusyError) as busy:
            await fx.loop.continue_()
        assert (
            str(busy.value) == "Agent is already processing. Wait for completion before continuing."
        )
        await fx.loop.abort()
        state = await fx.loop.state()
        assert not state.is_streaming
        last = state.messages[-1]
        assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"


# -- S10, S11, S27, S28, S29, S30: continue ------------------------------------------------


async def test_s10_continue_delivers_queued_follow_up() -> None:
    history = [user_message("hi"), assistant("hello")]
    async with running_loop("reply to follow-up", messages=history) as fx:
        await fx.loop.follow_up("and then?")
        new = await fx.loop.continue_()
        state = await fx.loop.state()
    assert [m.role for m in new] == ["user", "assistant"]
    assert isinstance(state.messages[-1], AssistantMessage)
    assert text_of(state.messages[-1].content) == "reply to follow-up"
    assert user_texts(fx.faux.last_request.context.messages)[-1] == "and then?"


async def test_s11_continue_with_two_steering_messages_one_at_a_time() -> None:
    history = [user_message("hi"), assistant("hello")]
    async with running_loop("r1", "r2", messages=history) as fx:
        await fx.loop.steer("s1")
        await fx.loop.steer("s2")
        await fx.loop.continue_()
        state = await fx.loop.state()
    tail = state.messages[-4:]
    assert [m.role for m in tail] == ["user", "assistant", "user", "assistant"]
    assert [text_of(m.content) for m in tail] == ["s1", "r1", "s2", "r2"]  # type: ignore[union-attr]
    assert len(fx.faux.requests) == 2


async def test_s27_s28_continue_errors() -> None:
    async with running_loop() as fx:
        with pytest.raises(ContinueError, match=r"^No messages to continue from$"):
            await fx.loop.continue_()
        await fx.loop.set_messages([user_message("hi"), assistant("hello")])
        with pytest.raises(ContinueError, match=r"^Cannot continue from message role: assistant$"):
            await fx.loop.continue_()
        assert fx.drain() == []


async def test_s29_continue_from_a_user_message() -> None:
    async with running_loop("answer", messages=[user_message("question")]) as fx:
        new = await fx.loop.continue_()
        state = await fx.loop.state()
    assert len(state.messages) == 2
    assert [m.role for m in new] == ["assistant"]


async def test_s30_continue_after_a_tool_result_uses_it() -> None:
    call = ToolCall(id="call_9", name="calc", arguments={"a": 6, "b": 7})
    history: list[AgentMessage] = [
        user_message("multiply"),
        AssistantMessage(
            content=(call,),
            api="faux-api",
            provider="faux",
            model="faux-1",
            usage=assistant("x").usage,
            stop_reason="toolUse",
            timestamp=1,
        ),
        ToolResultMessage(
            tool_call_id="call_9",
            tool_name="calc",
            content=(TextContent(text="42"),),
            is_error=False,
            timestamp=2,
        ),
    ]

    def uses_result(context: LlmContext) -> str:
        result = context.messages[-1]
        assert isinstance(result, ToolResultMessage)
        return f"The product is {text_of(result.content)}."

    async with running_loop(uses_result, messages=history) as fx:
        await fx.loop.continue_()
        state = await fx.loop.state()
    assert len(state.messages) == 4
    assert text_of(state.messages[-1].content) == "The product is 42."  # type: ignore[union-attr]


# -- S12: session id --------------------------------------------------------------------------


async def test_s12_session_id_reaches_the_provider() -> None:
    async with running_loop("a", "b", options=LoopOptions(session_id="sess-1")) as fx:
        await fx.loop.prompt("one")
        assert fx.faux.last_request.options.session_id == "sess-1"
        await fx.loop.configure(options=LoopOptions(session_id="sess-2"))
        await fx.loop.prompt("two")
        assert fx.faux.last_request.options.session_id == "sess-2"


# -- S13-S16: the loop ------------------------------------------------------------------------


async def test_s13_plain_prompt_events_and_result() -> None:
    async with running_loop("hello there") as fx:
        new = await fx.loop.prompt("hi")
        events = fx.drain()
    assert shape(events) == [
        "agent_start",
        "turn_start",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_update",
        "message_end assistant",
        "turn_end",
        "agent_end",
    ]
    assert [m.role for m in new] == ["user", "assistant"]
    end = events[-1]
    assert isinstance(end, AgentEnd) and end.messages == new


async def test_a_facts_subscriber_gets_the_run_facts_right_before_each_agent_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What the session decides a run's end from comes with the run's end, not by asking
    (plain subscribers see only events)."""
    slow = FauxReply(text="word " * 20, chunk_delay=1)
    async with running_loop("first", slow) as fx:
        with_facts = await fx.loop.subscribe_with_facts(capacity=1000)
        await fx.loop.prompt("hi")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "again")
            await trio.sleep(2.5)  # streaming
            await fx.loop.follow_up("later")
            await fx.loop.abort()  # the aborted run ends with the follow-up still queued
        items = []
        while True:
            try:
                items.append(with_facts.receive_nowait())
            except trio.WouldBlock:
                break
        plain = fx.drain()
        now = await fx.loop.run_facts()
    notes = [i for i, item in enumerate(items) if isinstance(item, RunEndFacts)]
    assert len(notes) == 2
    assert all(isinstance(items[i + 1], AgentEnd) for i in notes)
    assert [item for item in items if not isinstance(item, RunEndFacts)] == plain
    first, second = (items[i] for i in notes)
    assert isinstance(first, RunEndFacts) and isinstance(second, RunEndFacts)
    assert first.facts.model == FAUX_1 and not first.facts.has_queued
    assert first.facts.last_assistant is not None
    assert text_of(first.facts.last_assistant.content) == "first"
    assert second.facts.has_queued
    assert second.facts.last_assistant is not None
    assert second.facts.last_assistant.stop_reason == "aborted"
    assert second.facts == now


async def test_published_facts_follow_every_change_without_a_round_trip() -> None:
    """The model and last assistant message the loop publishes (the session's check before
    each prompt reads them): current after a run, a model switch, a transcript replacement,
    a message replacement and a reset, as soon as the caller awaited the change."""
    earlier = assistant("earlier")
    async with running_loop("answer", messages=[user_message("q"), earlier]) as fx:
        received = fx.loop.stats().received
        assert fx.loop.facts().last_assistant is earlier
        assert fx.loop.facts().model == FAUX_1
        assert fx.loop.stats().received == received  # reading sends the loop nothing
        await fx.loop.prompt("hi")
        answer = fx.loop.facts().last_assistant
        assert answer is not None and text_of(answer.content) == "answer"
        other = FAUX_1.__class__(**{**attrs.asdict(FAUX_1, recurse=False), "id": "faux-2"})
        await fx.loop.configure(model=other)
        assert fx.loop.facts().model is other
        replacement = assistant("replaced")
        assert await fx.loop.replace_message(answer, replacement)
        assert fx.loop.facts().last_assistant is replacement
        await fx.loop.set_messages([user_message("only a question")])
        assert fx.loop.facts().last_assistant is None
        await fx.loop.append_message(earlier)
        assert fx.loop.facts().last_assistant is earlier
        await fx.loop.reset()
        assert fx.loop.facts() == LoopFacts(other, None)
        assert fx.loop.facts() == LoopFacts(
            (await fx.loop.run_facts()).model, (await fx.loop.run_facts()).last_assistant
        )


async def test_s14_custom_messages_are_dropped_by_the_default_converter() -> None:
    custom = CustomMessage(custom_type="note", content="private", display=True, timestamp=1)
    async with running_loop("ok", messages=[custom]) as fx:
        await fx.loop.prompt("visible")
    sent = fx.faux.last_request.context.messages
    assert [m.role for m in sent] == ["user"]
    assert user_texts(sent) == ["visible"]


async def test_request_snapshots_say_what_they_extend_and_never_lie() -> None:
    """Issue 10: each request's transcript is a snapshot made from the previous request's
    when nothing of that one was replaced since (across tool turns and runs), so the
    converter and the provider resume without comparing; any other change breaks the chain.
    Whenever a snapshot says it follows the previous one, it does: the same objects first."""
    seen: list[Any] = []

    async def record(messages: Any) -> list[LlmMessage]:
        seen.append(messages)
        return convert_to_llm(messages)

    def linked() -> bool:
        current, previous = seen[-1], seen[-2]
        follows = isinstance(current, Snapshot) and current.follows(previous)
        if follows:  # never claimed falsely
            assert all(a is b for a, b in zip(current, previous, strict=False))
        return follows

    call = FauxToolCall("echo", {"value": 1})
    replies = [FauxReply(tool_calls=[call]), "after tool", "second", "third", "4", "5", "6"]
    hooks = LoopHooks(convert_to_llm=record)
    async with running_loop(*replies, tools=[echo_tool()], hooks=hooks) as fx:
        await fx.loop.prompt("one")  # a tool turn: two requests
        assert len(seen) == 2 and linked()
        await fx.loop.prompt("two")  # a new run goes on from the last request
        assert linked()
        await fx.loop.append_message(user_message("appended while idle"))
        await fx.loop.prompt("three")
        assert linked()
        earlier = seen[-1][1]  # the answer of the tool turn, long before the end
        assert await fx.loop.replace_message(earlier, assistant("replaced"))
        await fx.loop.prompt("four")
        assert not linked()
        await fx.loop.prompt("five")
        assert linked()  # a new chain from there
        await fx.loop.set_messages(list(seen[-1]))
        await fx.loop.prompt("six")
        assert not linked()
    assert [type(m) for m in fx.faux.last_request.context.messages][-1] is UserMessage


def test_run_context_shares_its_start_and_unlinks_after_an_edit_inside_it() -> None:
    from pitrio.actors.agent_loop.context import RunContext

    a, b, c, d = (user_message(text) for text in "abcd")
    start = Snapshot([a, b])
    context = RunContext(start, [c])
    assert list(context) == [a, b, c] and len(context) == 3 and context.last() is c
    first = context.snapshot()
    assert first.follows(start) and list(first) == [a, b, c]
    context.append(d)
    context.set_last(a)  # the streamed message replaced: only the part after the snapshot
    second = context.snapshot()
    assert second.follows(first) and list(second) == [a, b, c, a]
    assert context.replace_last(d, b) is False  # not there any more
    assert context.replace_last(b, d)  # the last b sits inside the shared part
    third = context.snapshot()
    assert list(third) == [a, d, c, a] and not third.follows(second)
    assert list(second) == [a, b, c, a]  # a snapshot handed out never changes


async def test_s15_transform_runs_before_convert() -> None:
    calls: list[str] = []
    seen_by_convert: list[int] = []

    async def keep_last_two(messages: list[AgentMessage]) -> list[AgentMessage]:
        calls.append("transform")
        return messages[-2:]

    async def convert(messages: Any) -> list[LlmMessage]:
        calls.append("convert")
        seen_by_convert.append(len(messages))
        return convert_to_llm(messages)

    old = [user_message("1"), assistant("2"), user_message("3"), assistant("4")]
    hooks = LoopHooks(transform_context=keep_last_two, convert_to_llm=convert)
    async with running_loop("5", messages=old, hooks=hooks) as fx:
        await fx.loop.prompt("new")
    assert calls == ["transform", "convert"]
    assert seen_by_convert == [2]
    assert user_texts(fx.faux.last_request.context.messages) == ["new"]


async def test_s16_tool_call_then_answer() -> None:
    replies = [
        FauxReply(tool_calls=[FauxToolCall("echo", {"value": "hello"})]),
        "done",
    ]
    async with running_loop(*replies, tools=[echo_tool()]) as fx:
        new = await fx.loop.prompt("use echo")
        events = fx.drain()
    starts = [e for e in events if isinstance(e, ToolExecutionStart)]
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [(s.tool_name, s.args) for s in starts] == [("echo", {"value": "hello"})]
    assert [e.is_error for e in ends] == [False]
    assert text_of(ends[0].result.content) == "echoed: hello"
    # pi 1.6.0: the run first declares the tools it can run (a system message).
    assert [m.role for m in new] == ["system", "user", "assistant", "toolResult", "assistant"]


# -- S17, S18 and §2.11: tool batches ----------------------------------------------------------

TWO_CALLS = FauxReply(
    text="two tools",
    tool_calls=[FauxToolCall("tool_a", {"n": 1}), FauxToolCall("tool_b", {"n": 2})],
)


async def test_s17_parallel_calls_run_concurrently_results_in_source_order() -> None:
    gate_a, gate_b = trio.Event(), trio.Event()
    log: list[str] = []
    tools = [gated_tool("tool_a", gate_a, log), gated_tool("tool_b", gate_b, log)]
    async with running_loop(TWO_CALLS, "after", tools=tools) as fx, trio.open_nursery() as n:
        n.start_soon(fx.loop.prompt, "go")
        await trio.testing.wait_all_tasks_blocked()
        # Both run at once (trio picks which task starts first): B runs while A is pending.
        assert sorted(log) == ["start tool_a", "start tool_b"]
        gate_b.set()
        await trio.testing.wait_all_tasks_blocked()
        assert log[-1] == "end tool_b"
        gate_a.set()
        await fx.loop.wait_for_idle()
        events = fx.drain()
    results = [
        e.message.tool_call_id
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.message, ToolResultMessage)
    ]
    assert results == ["call_1", "call_2"]
    # §2.11 in parallel mode: both starts, ends in completion order, then the results in
    # source order, then turn_end; the next turn answers.
    assert shape(events) == [
        "agent_start",
        "turn_start",
        "message_start system",
        "message_end system",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_update",
        "message_end assistant",
        "tool_execution_start tool_a",
        "tool_execution_start tool_b",
        "tool_execution_end tool_b",
        "tool_execution_end tool_a",
        "message_start toolResult",
        "message_end toolResult",
        "message_start toolResult",
        "message_end toolResult",
        "turn_end",
        "turn_start",
        "message_start assistant",
        "message_update",
        "message_end assistant",
        "turn_end",
        "agent_end",
    ]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert [m.role for m in end.messages] == [
        "system",
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    turn_end = next(e for e in events if isinstance(e, TurnEnd))
    assert [r.tool_call_id for r in turn_end.tool_results] == ["call_1", "call_2"]


async def test_sequential_mode_order() -> None:
    gate = trio.Event()
    gate.set()
    log: list[str] = []
    tools = [gated_tool("tool_a", gate, log), gated_tool("tool_b", gate, log)]
    options = LoopOptions(tool_execution="sequential")
    async with running_loop(TWO_CALLS, "after", tools=tools, options=options) as fx:
        await fx.loop.prompt("go")
        events = fx.drain()
    assert shape(events)[9:19] == [  # after the tools' declaration, the prompt, the answer
        "tool_execution_start tool_a",
        "tool_execution_end tool_a",
        "message_start toolResult",
        "message_end toolResult",
        "tool_execution_start tool_b",
        "tool_execution_end tool_b",
        "message_start toolResult",
        "message_end toolResult",
        "turn_end",
        "turn_start",
    ]
    assert log == ["start tool_a", "end tool_a", "start tool_b", "end tool_b"]


async def test_a_sequential_tool_forces_the_whole_batch_sequential() -> None:
    log: list[str] = []
    gate = trio.Event()
    gate.set()
    tool_a = gated_tool("tool_a", gate, log)
    tool_b = gated_tool("tool_b", gate, log)
    tools = [
        AgentTool(name="tool_a", execute=tool_a.execute, execution_mode="sequential"),
        tool_b,
    ]
    async with running_loop(TWO_CALLS, "after", tools=tools) as fx:
        await fx.loop.prompt("go")
    assert log == ["start tool_a", "end tool_a", "start tool_b", "end tool_b"]


async def test_s18_steering_waits_for_the_batch_then_is_injected() -> None:
    """0.73.1: a steer queued during a sequential batch skips nothing; it comes next turn."""
    gate_a = trio.Event()
    log: list[str] = []
    gate_b = trio.Event()
    gate_b.set()
    tools = [gated_tool("tool_a", gate_a, log), gated_tool("tool_b", gate_b, log)]
    options = LoopOptions(tool_execution="sequential")
    async with running_loop(TWO_CALLS, "after steer", tools=tools, options=options) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "go")
            await trio.testing.wait_all_tasks_blocked()
            await fx.loop.steer("change of plan")
            gate_a.set()
        events = fx.drain()
    assert log == ["start tool_a", "end tool_a", "start tool_b", "end tool_b"]
    ends = [e for e in events if isinstance(e, ToolExecutionEnd)]
    assert [e.is_error for e in ends] == [False, False]
    kinds = shape(events)
    second_turn = kinds.index("turn_start", 2)
    assert kinds[second_turn : second_turn + 3] == [
        "turn_start",
        "message_start user",
        "message_end user",
    ]
    assert user_texts(fx.faux.last_request.context.messages)[-1] == "change of plan"


# -- S19-S21: low-level continuation -----------------------------------------------------------


async def test_s19_low_level_continue_without_messages() -> None:
    from pitrio.actors.agent_loop.abort import RunAbort
    from pitrio.actors.agent_loop.context import RunContext
    from pitrio.actors.agent_loop.run import LoopRun, RunConfig

    async def no_stream(*args: Any) -> None:
        raise AssertionError("must not be called")

    async def no_emit(event: Any) -> None:
        raise AssertionError("must not emit")

    config = RunConfig(
        model=FAUX_1,
        system_prompt="",
        thinking_level="off",
        tools=(),
        tool_execution="parallel",
        session_id=None,
        api_key=None,
        hooks=LoopHooks(),
    )
    run = LoopRun(
        config,
        RunContext(),
        emit=no_emit,
        stream=no_stream,
        execute=no_stream,
        poll_steering=list,
        poll_follow_up=list,
        abort=RunAbort(),
    )
    with pytest.raises(ContinueError, match=r"^Cannot continue: no messages in context$"):
        await run.run_continuation()


async def test_s20_continue_emits_only_the_assistant() -> None:
    async with running_loop("reply", messages=[user_message("q")]) as fx:
        new = await fx.loop.continue_()
        events = fx.drain()
    assert [e for e in shape(events) if e.startswith("message_start")] == [
        "message_start assistant"
    ]
    assert [e.message.role for e in events if isinstance(e, MessageEnd)] == ["assistant"]
    assert [m.role for m in new] == ["assistant"]


async def test_s21_continue_from_a_custom_message_converted_to_user() -> None:
    custom = CustomMessage(custom_type="info", content="context", display=False, timestamp=1)

    async def convert(messages: Any) -> list[LlmMessage]:
        return convert_to_llm(messages)

    hooks = LoopHooks(convert_to_llm=convert)
    async with running_loop("fine", messages=[custom], hooks=hooks) as fx:
        new = await fx.loop.continue_()
    assert [m.role for m in new] == ["assistant"]
    assert user_texts(fx.faux.last_request.context.messages) == ["context"]


# -- queues -------------------------------------------------------------------------------------


async def test_follow_up_queue_modes() -> None:
    for mode, expected_requests in (("one-at-a-time", 3), ("all", 2)):
        options = LoopOptions(follow_up_mode=mode)  # type: ignore[arg-type]
        async with running_loop(
            FauxReply(text="slow", chunk_delay=0.5), "x", "y", options=options
        ) as fx:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fx.loop.prompt, "start")
                await trio.testing.wait_all_tasks_blocked()
                await fx.loop.follow_up("f1")
                await fx.loop.follow_up("f2")
            assert len(fx.faux.requests) == expected_requests, mode
            state = await fx.loop.state()
            assert state.follow_up == ()


async def test_queued_messages_stay_queued_when_the_run_errors() -> None:
    failing = FauxReply(error="503 Service Unavailable", chunk_delay=1)
    async with running_loop(failing) as fx, trio.open_nursery() as nursery:
        nursery.start_soon(fx.loop.prompt, "go")
        await trio.testing.wait_all_tasks_blocked()
        await fx.loop.follow_up("later")
        await fx.loop.wait_for_idle()
        state = await fx.loop.state()
        assert [text_of(m.content) for m in state.follow_up] == ["later"]  # type: ignore[union-attr]
        assert state.error_message == "503 Service Unavailable"
        assert shape(fx.drain())[-2:] == ["turn_end", "agent_end"]


# -- hooks and tool failures ---------------------------------------------------------------------


async def test_tool_failures_become_error_results() -> None:
    async def boom(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        raise RuntimeError("disk on fire")

    def strict(args: dict[str, Any]) -> dict[str, Any]:
        if "value" not in args:
            raise ValueError('Validation failed for tool "checked":\n  - value: required')
        return args

    async def blocker(ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        if ctx.tool_call.name == "guarded":
            return BeforeToolCallResult(block=True, reason="not today")
        return None

    tools = [
        AgentTool(name="boom", execute=boom),
        AgentTool(name="checked", execute=echo_tool().execute, validate=strict),
        AgentTool(name="guarded", execute=echo_tool().execute),
    ]
    calls = FauxReply(
        tool_calls=[
            FauxToolCall("missing", {}),
            FauxToolCall("boom", {}),
            FauxToolCall("checked", {}),
            FauxToolCall("guarded", {"value": 1}),
        ]
    )
    hooks = LoopHooks(before_tool_call=blocker)
    async with running_loop(calls, "after", tools=tools, hooks=hooks) as fx:
        new = await fx.loop.prompt("go")
    results = [m for m in new if isinstance(m, ToolResultMessage)]
    assert [(r.tool_name, r.is_error, text_of(r.content)) for r in results] == [
        ("missing", True, "Tool missing not found"),
        ("boom", True, "disk on fire"),
        ("checked", True, 'Validation failed for tool "checked":\n  - value: required'),
        ("guarded", True, "not today"),
    ]
    assert isinstance(new[-1], AssistantMessage) and new[-1].stop_reason == "stop"


async def test_preflight_failures_end_during_preflight_in_parallel_mode() -> None:
    gate = trio.Event()
    gate.set()
    log: list[str] = []
    calls = FauxReply(tool_calls=[FauxToolCall("tool_a", {}), FauxToolCall("nope", {})])
    async with running_loop(calls, "after", tools=[gated_tool("tool_a", gate, log)]) as fx:
        await fx.loop.prompt("go")
        kinds = shape(fx.drain())
    start = kinds.index("tool_execution_start tool_a")
    assert kinds[start : start + 4] == [
        "tool_execution_start tool_a",
        "tool_execution_start nope",
        "tool_execution_end nope error",
        "tool_execution_end tool_a",
    ]


async def test_after_tool_call_overrides_and_updates_stream() -> None:
    async def progress(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        await on_update(text_result("half"))
        await on_update(text_result("half and more"))
        return text_result("all")

    async def rewrite(ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        assert text_of(ctx.result.content) == "all"
        return AfterToolCallResult(content=(TextContent(text="rewritten"),), is_error=True)

    hooks = LoopHooks(after_tool_call=rewrite)
    calls = FauxReply(tool_calls=[FauxToolCall("progress", {"x": 1})])
    tools = [AgentTool(name="progress", execute=progress)]
    async with running_loop(calls, "after", tools=tools, hooks=hooks) as fx:
        new = await fx.loop.prompt("go")
        events = fx.drain()
    updates = [e for e in events if isinstance(e, ToolExecutionUpdate)]
    assert [text_of(u.partial_result.content) for u in updates] == ["half", "half and more"]
    assert all(u.args == {"x": 1} for u in updates)
    result = next(m for m in new if isinstance(m, ToolResultMessage))
    assert (text_of(result.content), result.is_error) == ("rewritten", True)


async def test_terminating_batch_stops_without_another_model_call() -> None:
    async def final(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        return AgentToolResult(content=(TextContent(text="bye"),), terminate=True)

    calls = FauxReply(tool_calls=[FauxToolCall("final", {})])
    async with running_loop(calls, tools=[AgentTool(name="final", execute=final)]) as fx:
        new = await fx.loop.prompt("go")
    assert [m.role for m in new] == ["system", "user", "assistant", "toolResult"]
    assert len(fx.faux.requests) == 1


async def test_a_failing_hook_fails_the_run_with_a_failure_message() -> None:
    async def broken(messages: list[AgentMessage]) -> list[AgentMessage]:
        raise RuntimeError("transform exploded")

    async with running_loop("never", hooks=LoopHooks(transform_context=broken)) as fx:
        await fx.loop.prompt("go")
        events = fx.drain()
        state = await fx.loop.state()
    end = events[-1]
    assert isinstance(end, AgentEnd) and len(end.messages) == 1
    failure = end.messages[0]
    assert isinstance(failure, AssistantMessage)
    assert failure.stop_reason == "error"
    assert failure.error_message == "transform exploded"
    assert failure.content == (TextContent(text=""),)
    assert state.messages[-1] == failure
    assert state.error_message == "transform exploded"
    assert not state.is_streaming


# -- abort (§2.12) -------------------------------------------------------------------------------


async def test_abort_before_the_first_chunk(autojump_clock: trio.testing.MockClock) -> None:
    async def stall(messages: list[AgentMessage]) -> list[AgentMessage]:
        await trio.sleep_forever()
        raise AssertionError

    async with running_loop("never", hooks=LoopHooks(transform_context=stall)) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "go")
            await trio.sleep(1)
            await fx.loop.abort()
        events = fx.drain()
    assert fx.faux.requests == []
    assert shape(events) == [
        "agent_start",
        "turn_start",
        "message_start user",
        "message_end user",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
    ]
    final = events[-3]
    assert isinstance(final, MessageEnd) and isinstance(final.message, AssistantMessage)
    # pi 1.6.0 (0.73.1: "Request was aborted"): the request's setup fails with the abort, and
    # its message has the error before the time.
    assert final.message.stop_reason == "aborted"
    assert final.message.error_message == "This operation was aborted"
    assert final.message.content == ()
    keys = list(to_json(final.message))
    assert keys.index("errorMessage") == keys.index("timestamp") - 1
    assert keys[: keys.index("errorMessage")] == [
        "role",
        "content",
        "api",
        "provider",
        "model",
        "usage",
        "stopReason",
    ]


@pytest.mark.parametrize(
    ("api", "text"),
    [
        ("openai-completions", "This operation was aborted"),
        ("anthropic-messages", "This operation was aborted"),
        ("bedrock-converse-stream", "This operation was aborted"),
    ],
)
async def test_abort_before_the_request_is_sent_is_the_setups_abort_for_every_api(
    autojump_clock: trio.testing.MockClock, api: str, text: str
) -> None:
    """pi 1.6.0: a request aborted before it is sent fails in its setup (the model runtime's,
    the same for every API) with the abort's own text. (pi 0.73.1 sent it and reported the
    vendor SDK's sentence; an abort while a sent request waits for its answer still does,
    see :func:`aborted_text`.)"""

    async def stall(messages: list[AgentMessage]) -> list[AgentMessage]:
        await trio.sleep_forever()
        raise AssertionError

    model = attrs.evolve(FAUX_1, api=api)
    async with running_loop("never", model=model, hooks=LoopHooks(transform_context=stall)) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "go")
            await trio.sleep(1)
            await fx.loop.abort()
        events = fx.drain()
    final = events[-3]
    assert isinstance(final, MessageEnd) and isinstance(final.message, AssistantMessage)
    assert (final.message.stop_reason, final.message.error_message) == ("aborted", text)


def test_aborted_text_by_api_and_progress() -> None:
    assert aborted_text("openai-responses", responded=False) == "Request was aborted."
    assert aborted_text("openai-responses", responded=True) == "Request was aborted"
    assert aborted_text("bedrock-converse-stream", responded=False) == "Request aborted"
    assert aborted_text("bedrock-converse-stream", responded=True) == "Request was aborted"
    assert aborted_text("faux-api", responded=False) == "Request was aborted"


async def test_abort_mid_stream_keeps_the_partial(autojump_clock: trio.testing.MockClock) -> None:
    slow = FauxReply(
        text="Slow answer: " + " ".join(f"word{i}" for i in range(150)), chunk_delay=0.015
    )
    async with running_loop(slow) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "SLOW")
            deltas = 0
            async for event in fx.events:
                fx.seen.append(event)
                if (
                    isinstance(event, MessageUpdate)
                    and event.assistant_message_event.type == "text_delta"
                ):
                    deltas += 1
                    if deltas == 3:
                        break
            await fx.loop.abort()
        events = fx.seen + fx.drain()
        state = await fx.loop.state()
    final = next(e for e in events if isinstance(e, MessageEnd) and e.message.role == "assistant")
    assert isinstance(final.message, AssistantMessage)
    assert final.message.stop_reason == "aborted"
    text = text_of(final.message.content)
    assert text.startswith("Slow answer: ") and len(text) < 60
    assert shape(events)[-3:] == ["message_end assistant", "turn_end", "agent_end"]
    assert state.error_message == "Request was aborted"
    assert state.messages[-1] == final.message


async def test_abort_during_a_tool(autojump_clock: trio.testing.MockClock) -> None:
    started = trio.Event()

    async def sleeper(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        started.set()
        await trio.sleep(5)
        return text_result("done")

    calls = FauxReply(text="Step 1/1: bash.", tool_calls=[FauxToolCall("sleeper", {})])
    async with running_loop(
        calls, "never", tools=[AgentTool(name="sleeper", execute=sleeper)]
    ) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "go")
            await started.wait()
            await fx.loop.abort()
        events = fx.drain()
    assert len(fx.faux.requests) == 1  # the aborted second request never reaches the model
    kinds = shape(events)
    tool_end = kinds.index("tool_execution_end sleeper error")
    assert kinds[tool_end:] == [
        "tool_execution_end sleeper error",
        "message_start toolResult",
        "message_end toolResult",
        "turn_end",
        "turn_start",
        "message_start assistant",
        "message_end assistant",
        "turn_end",
        "agent_end",
    ]
    result = next(
        e.message for e in events if isinstance(e, MessageEnd) and e.message.role == "toolResult"
    )
    assert isinstance(result, ToolResultMessage)
    assert (text_of(result.content), result.is_error) == ("Operation aborted", True)
    last = events[-3]
    assert isinstance(last, MessageEnd) and isinstance(last.message, AssistantMessage)
    assert (last.message.stop_reason, last.message.content) == ("aborted", ())
    assert trio.current_time() < 5  # the tool's sleep was cut short


async def test_a_new_prompt_runs_normally_after_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FauxReply(text="z" * 100, chunk_delay=1)
    async with running_loop(slow, "fresh") as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "one")
            await trio.sleep(2.5)
            await fx.loop.abort()
        new = await fx.loop.prompt("two")
    assert isinstance(new[-1], AssistantMessage)
    assert new[-1].stop_reason == "stop" and text_of(new[-1].content) == "fresh"
