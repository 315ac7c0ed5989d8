"""The session's event pump: the agent loop's events, translated, recorded and fanned out.

Owned by the session actor and run as one task in its nursery (the same task as before it had a
module of its own: no hop is added on a turn's path). It takes the loop's events in emission
order, updates the display queues, lets the extension host see each event first, decides at
each ``agent_end`` what follows (the supervisor's decision, which seeds ``willRetry``), hands
the events to subscribers through the outlet and persists messages at ``message_end``. Its
state is its own: the entry ids of the messages it recorded, the facts the loop sent before an
``agent_end``, the low-level runs it has processed, the turn index and the barriers waiting for
it to catch up. The run driver takes its decisions from a channel, by low-level run number.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio.actors._actor import buffered
from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.actors.agent_loop.actor import RunEndFacts, RunFacts
from pitrio.actors.agent_loop.commands import LoopFeed, UpdateBatch
from pitrio.actors.model_router.diagnostics import retry_after_ms
from pitrio.actors.session.commands import PumpBarrier, PumpState
from pitrio.actors.session.log import SessionLog
from pitrio.actors.session.queues import DisplayQueues
from pitrio.actors.session.run import Run
from pitrio.actors.session_store.command_stamp import CommandStamp, stamping
from pitrio.actors.supervisor.actor.shell import SupervisorHandle
from pitrio.actors.supervisor.compaction import is_same_model
from pitrio.actors.supervisor.decisions import (
    BeforeSettle,
    End,
    PostRunAction,
    PostRunDecision,
    RunEnded,
)
from pitrio.actors.supervisor.decisions import (
    Compact as CompactAction,
)
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import AgentMessage, AssistantMessage, CustomMessage, UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.delta_run import DeltaRun, UpdateItem, expand_updates
from pitrio.messages.entries import SessionEntry
from pitrio.messages.events import (
    AgentEnd,
    AgentEvent,
    AgentSessionEvent,
    AgentStart,
    EntryRecorded,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnStart,
)

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle

LOOP_EVENTS = 256
"""Items of the agent loop's channel to the pump (a full one blocks the loop: back-pressure).
An item is an event, run-end facts or a batch of at most
:data:`~pitrio.actors.agent_loop.run.UPDATE_BATCH` (32) streamed updates, so at most ~8,000
updates wait for a pump held up by the store or an extension (each a few hundred bytes: the
partial message it holds is a lazy view of the builder's text)."""

DECISION_CAPACITY = 16
"""Post-run decisions the pump has made and the run has not taken yet. One per low-level run,
and the loop starts the next low-level run only after the run took the last decision, so at
most one waits; when full the pump would wait (back-pressure), which cannot happen."""

_STAMPS_HELD = 256
"""Stamped user messages waiting to be recorded before the oldest is forgotten."""

Decided = tuple[int, PostRunDecision]
"""A post-run decision and the number of the low-level run it is for."""


def _only_settles(action: PostRunAction) -> bool:
    """Whether the run has no turn left after ``action``: it settles, maybe after a compaction
    that does not continue the run (a continuation for messages queued meanwhile clears it)."""
    if isinstance(action, CompactAction):
        return not action.will_retry
    return isinstance(action, End | BeforeSettle)


class EventPump:
    """Translates, records and fans out the agent loop's events (see the module docstring)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_agent_ends", "_barriers", "_busy", "_current_run", "_decided",
        "_emit", "_emit_all", "_end_facts", "_entry_ids", "_events", "_host", "_log",
        "_loop", "_queues", "_read_only", "_sent", "_stamps", "_store", "_supervisor",
        "_turn_index", "gate",
    )
    # fmt: on

    def __init__(
        self,
        *,
        feed: LoopFeed,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        log: SessionLog,
        supervisor: SupervisorHandle,
        host: ExtensionHostHandle | None,
        queues: DisplayQueues,
        emit: Callable[[AgentSessionEvent], None],
        emit_all: Callable[[Sequence[AgentSessionEvent | DeltaRun]], None] | None = None,
        current_run: Callable[[], Run | None],
        read_only: Callable[[ReadOnlySessionError], None],
        decided: trio.MemorySendChannel[Decided],
    ) -> None:
        self._events = feed.events
        self._sent = feed.sent  # the loop's count of what it sent (see loop_events)
        self._loop = loop
        self._store = store
        self._log = log
        self._supervisor = supervisor
        self._host = host
        self._queues = queues
        self._emit = emit
        self._emit_all = emit_all or self._emit_each
        self._current_run = current_run  # the driver's run, read (and its closing flag set)
        self._read_only = read_only
        self._decided = decided
        self._agent_ends = 0  # low-level runs whose agent_end the pump has processed
        self._entry_ids: dict[int, tuple[AgentMessage, str]] = {}
        # Stamped messages not recorded yet; a cleared queue's never are, so the oldest go
        # past _STAMPS_HELD (a queue that long is not waiting for its stamps).
        self._stamps: dict[int, tuple[AgentMessage, CommandStamp]] = {}
        self._end_facts: RunFacts | None = None  # sent by the loop before each agent_end
        self._barriers: list[PumpBarrier] = []
        self._busy = False
        self._turn_index = -1  # counted for the extension host only
        self.gate: Callable[[], Awaitable[None]] | None = None
        """Awaited before each event the pump emits, when set: a trace replay holds the pump
        there so that an input's own events keep their recorded place (``None``: never)."""

    async def run(self) -> None:
        """The pump's task: every event of the loop, until its channel closes."""
        events = self._events
        async with events:
            async for item in events:
                self._busy = True
                if not self._passed(item):
                    await self._on_item(item)
                # Take what else is queued without a task switch per item (issue 7), and
                # without a WouldBlock raised and caught after each lone delta (issue 38):
                # the channel has room (LOOP_EVENTS), so the loop never waits to send while
                # nothing is buffered; anything else is the next receive's.
                while buffered(events):
                    item = events.receive_nowait()
                    if not self._passed(item):
                        await self._on_item(item)
                self._busy = False
                self._release_barriers()

    def _passed(self, item: AgentEvent | RunEndFacts | UpdateBatch) -> bool:
        """Streamed updates emitted at once when nothing else is to be done with them
        (:meth:`_passed_on_all`, :meth:`_passed_on`), without a coroutine per item (issue
        38); whether they were. :meth:`_on_item` takes what this did not."""
        if isinstance(item, UpdateBatch):
            return self._passed_on_all(item.events)
        return self._passed_on(item)

    async def _on_item(self, item: AgentEvent | RunEndFacts | UpdateBatch) -> None:
        if isinstance(item, UpdateBatch):
            # One by one here (an extension host sees each delta, a replay's gate is awaited
            # before each): a run of deltas is expanded.
            for event in expand_updates(item.events):
                await self._on_agent_event(event)
        else:
            await self._on_agent_event(item)

    def loop_events(self) -> int:
        """How far the agent loop has got: the items it has sent the pump (events, counting
        each of a batch, and run-end facts), taken or still queued. A trace places its inputs
        by this count, which the pump's own lag (it waits for the store at each
        ``message_end``) does not hold back."""
        return self._sent.value

    def entry_id_of(self, message: AgentMessage | None) -> str | None:
        """The id of the entry ``message`` was recorded as in this process, if it was."""
        known = None if message is None else self._entry_ids.get(id(message))
        return None if known is None else known[1]

    def barrier(self, command: PumpBarrier) -> None:
        """Answer ``command`` once the pump has processed every event sent before it."""
        self._barriers.append(command)
        self._release_barriers()

    def stamp(self, message: AgentMessage, stamp: CommandStamp) -> None:
        """``message``'s entry will carry ``stamp`` (a client's command id) when recorded."""
        self._stamps[id(message)] = (message, stamp)
        if len(self._stamps) > _STAMPS_HELD:
            del self._stamps[next(iter(self._stamps))]

    async def persist(self, message: AgentMessage) -> None:
        """Record ``message`` (custom messages as their own entry kind) and announce it."""
        entry: SessionEntry
        if isinstance(message, CustomMessage):
            entry = await self._store.append_custom_message_entry(
                message.custom_type, message.content, message.display, message.details
            )
            if self.gate is not None:
                await self.gate()
            self._emit(EntryRecorded(entry=entry))
            return
        if message.role not in ("user", "assistant", "toolResult", "system"):
            return  # bash messages are recorded by their own path, summaries are derived
        stamped = self._stamps.pop(id(message), None)
        with stamping(None if stamped is None else stamped[1]):
            entry = await self._log.append_message(message)
        self._entry_ids[id(message)] = (message, entry.id)
        if self.gate is not None:
            await self.gate()
        self._emit(EntryRecorded(entry=entry))

    def _passed_on_all(self, updates: tuple[UpdateItem, ...]) -> bool:
        """:meth:`_passed_on` for a batch of streamed updates at once: each emitted in order
        if nothing else is to be done with them, a run of deltas whole (the outlet expands
        it for a subscriber that does not take runs); whether they were (issue 38)."""
        if self._host is not None or self.gate is not None:
            return False
        run = self._current_run()
        if run is not None and run.detached:
            return False
        self._emit_all(updates)  # never awaits: the run cannot change meanwhile
        return True

    def _emit_each(self, events: Sequence[AgentSessionEvent | DeltaRun]) -> None:
        for event in events:
            if isinstance(event, DeltaRun):
                for update in event.updates():
                    self._emit(update)
            else:
                self._emit(event)

    def _passed_on(self, event: AgentEvent | RunEndFacts) -> bool:
        """Emit a streamed update at once if nothing else is to be done with it (no
        extension host to show it to, its run not detached); whether it was. What
        :meth:`_on_agent_event` does with it, without a coroutine per delta (issue 38)."""
        if type(event) is not MessageUpdate or self._host is not None or self.gate is not None:
            return False  # a replay's gate is awaited before each event: the coroutine path
        run = self._current_run()
        if run is not None and run.detached:
            return False
        self._emit(event)
        return True

    async def _on_agent_event(self, event: AgentEvent | RunEndFacts) -> None:
        if isinstance(event, RunEndFacts):
            self._end_facts = event.facts  # for the agent_end that follows
            return
        run = self._current_run()
        if run is not None and run.detached:
            await self._on_detached_event(event)
            return
        if isinstance(event, MessageStart) and isinstance(event.message, UserMessage):
            await self._supervisor.user_message_started()
            if self.gate is not None:  # taking a queued text announces the queues
                await self.gate()
            queue_id = self._queues.take(text_of(event.message.content))
            if queue_id is not None:
                event = attrs.evolve(event, queue_id=queue_id)
        if self._host is not None:
            if isinstance(event, AgentStart):
                self._turn_index = -1
            elif isinstance(event, TurnStart):
                self._turn_index += 1
            event = await self._host.agent_event(event)  # extensions first, then subscribers
        decision: PostRunDecision | None = None
        if isinstance(event, AgentEnd):
            # Decide now, so agent_end can say whether a retry follows (seed willRetry).
            decision = await self._decide(event)
            event = attrs.evolve(event, will_retry=decision.will_retry)
            run = self._current_run()
            if run is not None:
                run.closing = _only_settles(decision.action)
        elif isinstance(event, AgentStart):
            run = self._current_run()
            if run is not None:
                run.closing = False
        if self.gate is not None:
            await self.gate()
        self._emit(event)
        if isinstance(event, MessageEnd):
            try:
                await self.persist(event.message)
            except ReadOnlySessionError as exc:
                self._read_only(exc)  # the pump goes on; the run stops, the session stays up
            if isinstance(event.message, AssistantMessage):
                succeeded = await self._supervisor.assistant_message_ended(event.message)
                if succeeded is not None:
                    if self.gate is not None:
                        await self.gate()
                    self._emit(succeeded)
        elif decision is not None:
            for follow in decision.events:
                if self.gate is not None:
                    await self.gate()
                self._emit(follow)
            await self._send_decision(decision)

    async def _on_detached_event(self, event: AgentEvent) -> None:
        """An event of a run a replacing command aborted: not reported, not recorded, not
        shown to extensions; its ``agent_end`` still goes through the decision channel the
        run's finaliser drains."""
        if isinstance(event, AgentEnd):
            await self._send_decision(await self._decide(event))

    async def _send_decision(self, decision: PostRunDecision) -> None:
        self._agent_ends += 1
        try:  # without a task switch (there is room: see DECISION_CAPACITY)
            self._decided.send_nowait((self._agent_ends, decision))
        except trio.WouldBlock:
            await self._decided.send((self._agent_ends, decision))

    async def _decide(self, event: AgentEnd) -> PostRunDecision:
        # The loop sent its facts right before this agent_end: no round trip before it goes
        # out (issue 7). Asked only if they did not come.
        facts, self._end_facts = self._end_facts, None
        if facts is None:
            facts = await self._loop.run_facts()
        last = _last_assistant(event.messages)
        run = self._current_run()
        settings = self._supervisor.view().settings
        ended = RunEnded(
            retry_settings=settings.retry,
            compaction_settings=settings.compaction,
            last_assistant=last,
            abort_requested=run is None or run.scope.cancel_called,
            has_queued_messages=facts.has_queued,
            context_window=facts.model.context_window,
            model_ref=facts.model.ref,
            max_tokens=facts.model.max_tokens,
            same_model=last is not None and is_same_model(last, facts.model),
            retry_after_ms=retry_after_ms(last) if last is not None else None,
        )
        return await self._supervisor.decide(ended)

    def _caught_up(self) -> bool:
        return not self._busy and buffered(self._events) == 0

    def _release_barriers(self) -> None:
        if self._barriers and self._caught_up():
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                ids = tuple(self.entry_id_of(message) for message in barrier.messages)
                barrier.reply.set(PumpState(self._turn_index, ids))


def _last_assistant(messages: Sequence[AgentMessage]) -> AssistantMessage | None:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message
    return None
