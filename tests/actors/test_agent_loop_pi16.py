"""pi 1.6.0's fields on what the agent loop emits: a partial assistant message says
``stopReason: "pending"``; the final one carries ``durationMs`` (time since the request began)
and ``thinkingLevel`` (the level the request was made at); a tool result and its
``tool_execution_end`` carry the tool's ``durationMs``, absent for a call refused before it ran.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from pitrio.actors.agent_loop.run import finished_response
from pitrio.actors.model_router import FauxReply, FauxToolCall
from pitrio.actors.tool_executor import AgentTool, UpdateFn, text_result
from pitrio.messages.agent import AgentToolResult, AssistantMessage, ToolResultMessage, Usage
from pitrio.messages.codec import to_json
from pitrio.messages.content import TextContent
from pitrio.messages.events import MessageEnd, MessageStart, ToolExecutionEnd

from .conftest import running_loop


def slow_tool(seconds: float) -> AgentTool:
    async def execute(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        await trio.sleep(seconds)
        return text_result("slept")

    return AgentTool(name="slow", execute=execute)


async def test_final_answer_carries_duration_and_thinking_level(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # three chunks, each 0.25 s after the last: the response takes 750 ms of the loop's clock
    reply = FauxReply(text="abcdefghijkl", chunk_delay=0.25, chunk_size=4)
    async with running_loop(reply) as fx:
        await fx.loop.configure(thinking_level="low")
        await fx.loop.prompt("hi")
        events = fx.drain()
    starts = [e for e in events if isinstance(e, MessageStart) and e.message.role == "assistant"]
    (start,) = starts
    assert isinstance(start.message, AssistantMessage)
    assert start.message.stop_reason == "pending"
    assert start.message.duration_ms is None and start.message.thinking_level is None
    (end,) = [e for e in events if isinstance(e, MessageEnd) and e.message.role == "assistant"]
    final = end.message
    assert isinstance(final, AssistantMessage)
    assert final.stop_reason == "stop"
    assert final.duration_ms == 750
    assert final.thinking_level == "low"
    keys = list(to_json(final))
    assert keys[-2:] == ["durationMs", "thinkingLevel"]  # pi's order: added last, in this order


async def test_a_failed_and_an_aborted_answer_are_timed_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with running_loop(FauxReply(error="boom")) as fx:
        await fx.loop.prompt("hi")
        state = await fx.loop.state()
    failed = state.messages[-1]
    assert isinstance(failed, AssistantMessage) and failed.stop_reason == "error"
    assert failed.duration_ms == 0 and failed.thinking_level == "off"
    keys = list(to_json(failed))
    assert keys.index("timestamp") < keys.index("errorMessage") < keys.index("durationMs")

    async with running_loop(FauxReply(text="x" * 40, chunk_delay=1.0, chunk_size=1)) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.loop.prompt, "hi")
            await trio.sleep(2.5)
            await fx.loop.abort()
        state = await fx.loop.state()
    aborted = state.messages[-1]
    assert isinstance(aborted, AssistantMessage) and aborted.stop_reason == "aborted"
    assert aborted.duration_ms == 2500


async def test_tool_results_carry_the_tool_duration(
    autojump_clock: trio.testing.MockClock,
) -> None:
    replies = [
        FauxReply(
            tool_calls=[
                FauxToolCall("slow", {}, id="c1"),
                FauxToolCall("missing", {}, id="c2"),
            ]
        ),
        "done",
    ]
    async with running_loop(*replies, tools=[slow_tool(1.5)]) as fx:
        await fx.loop.prompt("go")
        events = fx.drain()
        state = await fx.loop.state()
    ends = {e.tool_call_id: e for e in events if isinstance(e, ToolExecutionEnd)}
    assert ends["c1"].duration_ms == 1500 and not ends["c1"].is_error
    assert ends["c2"].duration_ms is None and ends["c2"].is_error  # refused: never ran
    assert list(to_json(ends["c1"]))[-1] == "durationMs"
    assert "durationMs" not in to_json(ends["c2"])
    results = {m.tool_call_id: m for m in state.messages if isinstance(m, ToolResultMessage)}
    assert results["c1"].duration_ms == 1500
    assert results["c2"].duration_ms is None
    keys = list(to_json(results["c1"]))
    assert keys[-3:] == ["isError", "durationMs", "timestamp"]  # pi's key order


def test_finished_response_keeps_a_provider_duration() -> None:
    message = AssistantMessage(
        content=(TextContent(text="x"),),
        api="a",
        provider="p",
        model="m",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1,
    )
    timed = finished_response(message, 10.0, 10.0126, "high")
    assert (timed.duration_ms, timed.thinking_level) == (13, "high")
    again = finished_response(timed, 0.0, 99.0, "off")
    assert (again.duration_ms, again.thinking_level) == (13, "off")
    assert finished_response(message, 5.0, 4.0, "off").duration_ms == 0  # never negative
