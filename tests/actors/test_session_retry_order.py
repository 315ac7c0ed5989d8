"""The retry sequence's events and entries in pi 1.6.0's order (``pi160.retry.*``): the
failed response, ``agent_end {willRetry: true}``, ``auto_retry_start``, the ``context_edit``
omission's ``entry_appended``, the new attempt, ``auto_retry_end`` right after its
``message_end``, ``agent_end {willRetry: false}``, ``agent_settled``."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.session.commands import SessionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.errors import PitrioError
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import ContextEditEntry, MessageEntry
from pitrio.messages.events import (
    AgentEnd,
    AgentSessionEvent,
    CompactionEnd,
    EntryAppended,
    SummarizationRetryAttemptStart,
    SummarizationRetryScheduled,
)
from tests.actors.session_harness import session
from tests.actors.test_session_actor import UNAVAILABLE, kinds, running_session


def wire_kinds(events: list[AgentSessionEvent]) -> list[str]:
    """The kinds pi 1.6.0 writes: message entries are not announced with entry_appended."""
    return kinds(
        [
            e
            for e in events
            if not (isinstance(e, EntryAppended) and isinstance(e.entry, MessageEntry))
        ]
    )


async def test_one_transient_failure_then_success_in_pi_1_6_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    settings = SessionSettings(retry=RetrySettings(max_retries=3, base_delay_ms=100))
    async with running_session(FauxReply(error=UNAVAILABLE), "recovered", settings=settings) as fx:
        await fx.session.prompt("flaky")
        events = await fx.collect_until_settled()
        entries = await fx.log.entries()
    assert wire_kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
        "auto_retry_start",
        "entry_appended",
        "agent_start",
        "turn_start",
        "message_start",
        "message_update",
        "message_end",
        "auto_retry_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert [e.will_retry for e in events if isinstance(e, AgentEnd)] == [True, False]
    # The file: the failed response, its omission (a child of it), then the new attempt as a
    # child of the omission - the entries pi 1.6.0 writes.
    messages = [e for e in entries if isinstance(e, MessageEntry)]
    edits = [e for e in entries if isinstance(e, ContextEditEntry)]
    failed_entry = messages[1]
    assert isinstance(failed_entry.message, AssistantMessage)
    assert failed_entry.message.stop_reason == "error"
    (edit,) = edits
    assert (edit.target_id, edit.parent_id, edit.replacement) == (
        failed_entry.id,
        failed_entry.id,
        None,
    )
    assert messages[2].parent_id == edit.id
    announced = [e.entry for e in events if isinstance(e, EntryAppended)]
    assert edit in announced


async def test_the_omission_is_in_place_when_auto_retry_start_is_seen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A client that asks on ``auto_retry_start`` sees the context without the attempt,
    although its ``entry_appended`` comes after the event (pi omits synchronously)."""
    settings = SessionSettings(retry=RetrySettings(max_retries=3, base_delay_ms=10_000))
    failing = FauxReply(error=UNAVAILABLE)
    async with (
        running_session(failing, "recovered", settings=settings) as fx,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(fx.session.prompt, "flaky")
        async for item in fx.events:
            if item.event.type == "auto_retry_start":
                break
        context = await fx.log.context_messages()
        edits = [e for e in await fx.log.entries() if isinstance(e, ContextEditEntry)]
        await fx.session.abort()
    assert [m.role for m in context] == ["user"]
    assert len(edits) == 1


async def test_a_compaction_summary_is_retried_with_summarization_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """pi 1.6.0 retries a summary request that failed transiently, with the session's retry
    budget and back-off, and says so with the ``summarization_retry_*`` events."""
    faux = FauxProvider(["one", "two"])
    async with session(faux=faux) as fx:  # retries: 2, base delay 50 ms
        await fx.session.prompt("hello")
        await fx.session.prompt("again " * 100)  # past the 60 kept tokens
        await fx.drain()
        faux.push(FauxReply(error="503 Service Unavailable"), "The summary.")
        started = trio.current_time()
        result = await fx.session.compact()
        elapsed = trio.current_time() - started
        events = await fx.drain()
    assert [e.type for e in events] == [
        "compaction_start",
        "summarization_retry_scheduled",
        "summarization_retry_attempt_start",
        "summarization_retry_finished",
        "compaction_end",
    ]
    scheduled = events[1]
    assert isinstance(scheduled, SummarizationRetryScheduled)
    assert (scheduled.attempt, scheduled.max_attempts, scheduled.delay_ms) == (1, 2, 50)
    assert scheduled.error_message == "503 Service Unavailable"
    assert events[2] == SummarizationRetryAttemptStart(source="compaction", reason="manual")
    assert elapsed == pytest.approx(0.05)
    assert result.summary.startswith("The summary.")


async def test_a_summary_failing_for_good_ends_the_retries_and_the_compaction(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider(["one", "two"])
    async with session(faux=faux) as fx:
        await fx.session.prompt("hello")
        await fx.session.prompt("again " * 100)
        await fx.drain()
        faux.push(*(FauxReply(error="503 Service Unavailable") for _ in range(3)))
        with pytest.raises(PitrioError):
            await fx.session.compact()
        events = await fx.drain()
    kinds = [e.type for e in events]
    assert kinds.count("summarization_retry_scheduled") == 2  # the budget: two retries
    assert kinds.count("summarization_retry_attempt_start") == 2
    assert kinds[-2:] == ["summarization_retry_finished", "compaction_end"]
    end = events[-1]
    assert isinstance(end, CompactionEnd) and end.result is None
    assert end.error_message is not None and "503 Service Unavailable" in end.error_message
