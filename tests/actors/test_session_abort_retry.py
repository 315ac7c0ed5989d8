"""Issue 21 item 8 through the session handle: the agent's messages around a retry's
back-off and a detached abort, and the order held bash results are recorded in."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.session.commands import SessionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.actors.tool_executor import AgentTool, UpdateFn, text_result
from pitrio.messages.agent import AgentToolResult, AssistantMessage, BashExecutionMessage
from pitrio.messages.entries import MessageEntry
from pitrio.messages.events import AgentEnd, AutoRetryStart, MessageEnd, MessageUpdate
from tests.actors.session_harness import session

FAILED = "503 Service Unavailable (scripted)"


async def test_the_back_off_sees_the_context_without_the_failed_attempt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    settings = SessionSettings(retry=RetrySettings(max_retries=2, base_delay_ms=10_000))
    faux = FauxProvider([FauxReply(error=FAILED), "recovered"])
    async with session(faux, settings=settings) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "flaky")
            await fx.until("auto_retry_start")
            during = await fx.session.state()
            during_roles = [m.role for m in await fx.session.messages()]
        after_roles = [m.role for m in await fx.session.messages()]
        entries = await fx.store.entries()
    assert during.is_retrying and during.agent.message_count == 1
    assert during_roles == ["user"]
    assert after_roles == ["user", "assistant"]
    stops = [
        e.message.stop_reason
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, AssistantMessage)
    ]
    assert stops == ["error", "stop"]  # the file keeps the failed attempt


async def test_a_detached_abort_reports_and_records_nothing_more(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider([FauxReply(text="word " * 40, chunk_delay=1)])
    async with session(faux) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "hi")
            seen = []
            async for item in fx.events:
                seen.append(item.event)
                if isinstance(item.event, MessageUpdate):
                    break
            await fx.session.abort(detach=True)
        seen += await fx.drain()
        entries = await fx.store.entries()
    assert not any(isinstance(e, AgentEnd | AutoRetryStart) for e in seen)
    assert [e.message.role for e in seen if isinstance(e, MessageEnd)] == ["user"]
    assert seen[-1].type == "agent_settled"
    assert [e.message.role for e in entries if isinstance(e, MessageEntry)] == ["user"]


async def test_an_idle_command_records_a_held_result_first() -> None:
    """A result held during a run waits for the next prompt; a command that finishes while
    idle records it first, so the file keeps the order the commands ran in."""
    started, gate = trio.Event(), trio.Event()

    async def gated(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        started.set()
        await gate.wait()
        return text_result("opened")

    tool = AgentTool(name="gated", execute=gated)
    faux = FauxProvider([FauxReply(tool_calls=[FauxToolCall("gated", {})]), "done"])
    async with session(faux, tools=(tool,)) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "hi")
            await started.wait()
            await fx.session.bash("echo during")  # the run waits on the gate meanwhile
            gate.set()
        held = [m for m in await fx.session.messages() if isinstance(m, BashExecutionMessage)]
        await fx.session.bash("echo after")
        entries = await fx.store.entries()
    assert held == []  # not yet: it waits for the next prompt
    recorded = [
        e.message.command
        for e in entries
        if isinstance(e, MessageEntry) and isinstance(e.message, BashExecutionMessage)
    ]
    assert recorded == ["echo during", "echo after"]
