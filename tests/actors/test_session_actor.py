"""The session actor: run lifecycle, settle, retry, abort, queues, subscribers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.session.actor import SessionActor
from pitrio.actors.session.commands import SessionBusyError, SessionSettings
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session_store import SessionStoreHandle, create_store
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.messages.agent import AssistantMessage, UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.entries import ContextEditEntry, MessageEntry
from pitrio.messages.events import (
    AgentEnd,
    AgentSessionEvent,
    AutoRetryEnd,
    AutoRetryStart,
    EntryAppended,
    MessageStart,
    MessageUpdate,
    QueueUpdate,
)
from tests.stray_cancel import no_stray_cancel

from .conftest import FAUX_1

UNAVAILABLE = "503 Service Unavailable (scripted)"


@attrs.define
class SessionFixture:
    session: SessionHandle
    loop: AgentLoopHandle
    log: SessionStoreHandle
    faux: FauxProvider
    events: trio.MemoryReceiveChannel[Sequenced]
    seen: list[Sequenced] = attrs.field(factory=list)
    session_nursery_cancel: Callable[[], None] = lambda: None

    async def collect_until_settled(self) -> list[AgentSessionEvent]:
        """Receive events up to and including the next agent_settled."""
        out: list[AgentSessionEvent] = []
        async for item in self.events:
            self.seen.append(item)
            out.append(item.event)
            if item.event.type == "agent_settled":
                break
        return out


@asynccontextmanager
async def running_session(
    *replies: Any, settings: SessionSettings | None = None
) -> AsyncIterator[SessionFixture]:
    faux = FauxProvider(replies)
    async with trio.open_nursery() as nursery:
        log = await create_store(nursery, "/tmp/project", persist=False)
        loop = AgentLoopHandle(await nursery.start(AgentLoop(stream=faux.stream, model=FAUX_1).run))
        actor = SessionActor(loop=loop, store=log, stream=faux.stream, settings=settings)
        session = SessionHandle(await nursery.start(actor.run))
        events = await session.subscribe()
        fixture = SessionFixture(session=session, loop=loop, log=log, faux=faux, events=events)
        fixture.session_nursery_cancel = nursery.cancel_scope.cancel
        with no_stray_cancel():
            yield fixture
        nursery.cancel_scope.cancel()


def kinds(events: list[AgentSessionEvent]) -> list[str]:
    out: list[str] = []
    for event in events:
        if isinstance(event, MessageUpdate) and out and out[-1] == "message_update":
            continue
        out.append(event.type)
    return out


async def test_a_prompt_settles_once_after_agent_end() -> None:
    async with running_session("hello") as fx:
        await fx.session.prompt("hi")
        events = await fx.collect_until_settled()
    assert kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "entry_appended",
        "message_start",
        "message_update",
        "message_end",
        "entry_appended",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    acknowledged = [e.entry for e in events if isinstance(e, EntryAppended)]
    assert all(isinstance(entry, MessageEntry) for entry in acknowledged)
    roles = [entry.message.role for entry in acknowledged if isinstance(entry, MessageEntry)]
    assert roles == ["user", "assistant"]
    seqs = [item.seq for item in fx.seen]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    end = next(e for e in events if isinstance(e, AgentEnd))
    assert end.will_retry is False


async def test_a_plain_turn_never_asks_the_loop_for_its_run_facts() -> None:
    """Round trips per turn are latency (issue 7): the facts after a run come with its
    agent_end, the settle reads the session's own queues, and the check before the prompt
    reads the facts the loop publishes."""
    received: list[str] = []

    class Tracer:
        def on_send(self, actor: str, command: object, depth: int) -> None:
            pass

        def on_receive(self, actor: str, command: object, depth: int) -> None:
            received.append(type(command).__name__)

        def on_handled(self, actor: str, command: object) -> None:
            pass

    async with running_session("hello") as fx:
        fx.loop.trace(Tracer())
        await fx.session.prompt("hi")
        events = await fx.collect_until_settled()
    assert received.count("GetRunFacts") == 0
    assert received.count("Prompt") == 1
    assert [e.type for e in events][-1] == "agent_settled"


async def test_prompt_while_running_needs_a_streaming_behavior(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FauxReply(text="slow " * 20, chunk_delay=1)
    async with running_session(slow, "steered reply") as fx, trio.open_nursery() as nursery:
        nursery.start_soon(fx.session.prompt, "first")
        await trio.sleep(2)
        with pytest.raises(SessionBusyError, match="Specify streamingBehavior"):
            await fx.session.prompt("second")
        await fx.session.prompt("redirect", streaming_behavior="steer")
        state = await fx.session.state()
        assert state.steering == ("redirect",)
        await fx.session.wait_for_idle()
        events = await fx.collect_until_settled()
        assert (await fx.session.state()).steering == ()
    updates = [e for e in events if isinstance(e, QueueUpdate)]
    assert [(u.steering, u.follow_up) for u in updates] == [(("redirect",), ()), ((), ())]
    assert sum(e.type == "agent_settled" for e in events) == 1
    assert sum(e.type == "agent_end" for e in events) == 1


async def test_retry_then_success(autojump_clock: trio.testing.MockClock) -> None:
    settings = SessionSettings(retry=RetrySettings(max_retries=2, base_delay_ms=50))
    failing = FauxReply(error=UNAVAILABLE)
    async with running_session(failing, "recovered", settings=settings) as fx:
        start = trio.current_time()
        await fx.session.prompt("flaky")
        elapsed = trio.current_time() - start
        events = await fx.collect_until_settled()
        context = await fx.log.context_messages()
        entries = await fx.log.entries()
    assert elapsed == pytest.approx(0.05)
    ends = [e for e in events if isinstance(e, AgentEnd)]
    assert [e.will_retry for e in ends] == [True, False]
    starts = [e for e in events if isinstance(e, AutoRetryStart)]
    assert [(s.attempt, s.max_attempts, s.delay_ms, s.error_message) for s in starts] == [
        (1, 2, 50, UNAVAILABLE)
    ]
    retry_ends = [e for e in events if isinstance(e, AutoRetryEnd)]
    assert [(e.success, e.attempt) for e in retry_ends] == [(True, 1)]
    assert kinds(events)[-1] == "agent_settled"
    # The failed response stays in the file but leaves the projection through a context edit.
    edits = [e.entry for e in events if isinstance(e, EntryAppended)]
    omission = next(e for e in edits if isinstance(e, ContextEditEntry))
    target = next(e for e in entries if e.id == omission.target_id)
    assert isinstance(target, MessageEntry) and isinstance(target.message, AssistantMessage)
    assert target.message.stop_reason == "error"
    assert omission.replacement is None
    assert [m.role for m in context] == ["user", "assistant"]
    assert context[-1].stop_reason == "stop"  # type: ignore[union-attr]
    # The retried request did not include the failed response.
    assert [m.role for m in fx.faux.last_request.context.messages] == ["user"]


async def test_retries_exhausted(autojump_clock: trio.testing.MockClock) -> None:
    settings = SessionSettings(retry=RetrySettings(max_retries=2, base_delay_ms=100))
    failing = FauxReply(error=UNAVAILABLE)
    async with running_session(failing, failing, failing, settings=settings) as fx:
        start = trio.current_time()
        await fx.session.prompt("always")
        elapsed = trio.current_time() - start
        events = await fx.collect_until_settled()
        state = await fx.session.state()
    assert elapsed == pytest.approx(0.1 + 0.2)
    assert len(fx.faux.requests) == 3
    assert [s.attempt for s in events if isinstance(s, AutoRetryStart)] == [1, 2]
    retry_ends = [e for e in events if isinstance(e, AutoRetryEnd)]
    assert [(e.success, e.attempt, e.final_error) for e in retry_ends] == [(False, 2, UNAVAILABLE)]
    assert [e.will_retry for e in events if isinstance(e, AgentEnd)] == [True, True, False]
    assert not state.is_retrying and state.retry_attempt == 0


async def test_abort_during_retry_sleep(autojump_clock: trio.testing.MockClock) -> None:
    settings = SessionSettings(retry=RetrySettings(max_retries=3, base_delay_ms=10_000))
    async with running_session(FauxReply(error=UNAVAILABLE), settings=settings) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "flaky")
            await trio.sleep(1)
            assert (await fx.session.state()).is_retrying
            await fx.session.abort()
        assert trio.current_time() < 10
        events = await fx.collect_until_settled()
        state = await fx.session.state()
    retry_ends = [e for e in events if isinstance(e, AutoRetryEnd)]
    assert [(e.success, e.final_error) for e in retry_ends] == [(False, "Retry cancelled")]
    assert len(fx.faux.requests) == 1
    assert not state.is_running and not state.is_retrying
    assert kinds(events)[-1] == "agent_settled"


async def test_acknowledgements_keep_append_order_with_the_sessions_own_entries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An entry the session appends itself during a run (an extension's custom entry while
    the answer streams) is acknowledged in append order among the run's messages."""
    slow = FauxReply(text="word " * 5, chunk_delay=1)
    async with running_session(slow) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "hi")
            async for item in fx.events:  # the answer streams
                fx.seen.append(item)
                if isinstance(item.event, MessageUpdate):
                    break
            await fx.session.invoke(lambda actor: actor.append_custom_entry("note", {"n": 1}))
        events = [item.event for item in fx.seen] + await fx.collect_until_settled()
    acknowledged = [e.entry for e in events if isinstance(e, EntryAppended)]
    assert [entry.type for entry in acknowledged] == ["message", "custom", "message"]
    first, _, last = acknowledged
    assert isinstance(first, MessageEntry) and first.message.role == "user"
    assert isinstance(last, MessageEntry) and last.message.role == "assistant"
    # Appended in that order too: each entry's parent is the one before it.
    assert [entry.parent_id for entry in acknowledged[1:]] == [e.id for e in acknowledged[:2]]


async def test_abort_mid_stream_settles_after_agent_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FauxReply(text="word " * 50, chunk_delay=1)
    async with running_session(slow) as fx:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(fx.session.prompt, "long")
            await trio.sleep(3.5)
            await fx.session.abort()
        events = await fx.collect_until_settled()
    assert kinds(events)[-3:] == ["turn_end", "agent_end", "agent_settled"]
    end = next(e for e in events if isinstance(e, AgentEnd))
    last = end.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    assert end.will_retry is False


async def test_a_prompt_sent_on_agent_settled_is_not_lost() -> None:
    async with running_session("one", "two") as fx:
        await fx.session.prompt("first")
        events = await fx.collect_until_settled()
        assert events[-1].type == "agent_settled"
        await fx.session.prompt("second")
        again = await fx.collect_until_settled()
    assert [e.type for e in again].count("agent_settled") == 1
    assert len(fx.faux.requests) == 2


async def test_a_slow_subscriber_is_cut_off_without_slowing_the_session() -> None:
    async with running_session("x" * 600) as fx:
        slow = await fx.session.subscribe(capacity=3)  # never read until the end
        await fx.session.prompt("go")
        events = await fx.collect_until_settled()
        received = [item async for item in slow]  # the channel closes after the cut-off
    assert events[-1].type == "agent_settled"
    assert len(received) <= 3


async def test_a_queued_message_gets_a_delivery_receipt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    slow = FauxReply(text="slow " * 10, chunk_delay=1)
    async with running_session(slow, "after") as fx, trio.open_nursery() as nursery:
        nursery.start_soon(fx.session.prompt, "first")
        await trio.sleep(1.5)
        queue_id = await fx.session.follow_up("and then")
        events = await fx.collect_until_settled()
    delivered = [
        e for e in events if isinstance(e, MessageStart) and isinstance(e.message, UserMessage)
    ]
    assert [(text_of(e.message.content), e.queue_id) for e in delivered] == [
        ("first", None),
        ("and then", queue_id),
    ]


async def test_events_buffered_for_a_subscriber_reach_it_when_the_session_stops() -> None:
    """A recorder's channel that was full for a while holds the rest of the events in the
    session's per-subscriber buffer; when the session is cancelled, what fits is handed over
    instead of being dropped with the feeder task."""
    send, receive = trio.open_memory_channel[Any](2)
    async with running_session("a reply long enough for several deltas") as fx:
        await fx.session.subscribe_into(send, capacity=1000)
        await fx.session.prompt("go")
        await trio.testing.wait_all_tasks_blocked()
        first = [receive.receive_nowait(), receive.receive_nowait()]  # room for two more
        # Stop before the feeder task runs again (no checkpoint between these lines).
        fx.session_nursery_cancel()
    rest = []
    while True:
        try:
            rest.append(receive.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    seqs = [item.seq for item in first + rest]
    assert len(rest) == 2  # the one in flight and the next buffered one
    assert seqs == list(range(seqs[0], seqs[0] + 4))
