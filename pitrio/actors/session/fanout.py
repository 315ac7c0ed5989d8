"""Per-subscriber event buffers: a slow client never slows the session or other clients.

The policy of ``DESIGN.md`` §2, as a pure state machine per subscriber. Each buffer holds at
most ``capacity`` events. When an event arrives at a full buffer, it is merged into the last
queued one if both are deltas of the same stream, else neighbours inside the queue are merged to
make room. Mergeable: consecutive ``text_delta`` / ``thinking_delta`` / ``toolcall_delta``
updates of one content block (deltas concatenated, latest partial kept) and
``tool_execution_update``s of one call (the latest accumulated result kept). If nothing can be
merged, the subscriber is cut off with a reason and its buffer is dropped.

The buffer is bounded by bytes too (issue 21): a ``message_update`` holds the whole partial
message as it was at that event, so 4,096 of them from a 1 MB reply are gigabytes. Each event
is weighed (:func:`event_weight`: the text its partial message or partial tool result holds,
plus a fixed overhead); once the queued weight passes ``max_bytes`` the queue is merged as
when it is full, which keeps one partial per merged run. Events that merge with nothing are
few per content block and are kept (the count bound still applies to them).
"""

from __future__ import annotations

from collections import deque
from enum import Enum

import attrs

from pitrio._direct_init import direct_init
from pitrio.messages.delta_run import DeltaRun
from pitrio.messages.events import AgentSessionEvent, MessageUpdate, ToolExecutionUpdate
from pitrio.messages.partial import PartialMessage, content_chars, message_chars
from pitrio.messages.stream import TextDelta, ThinkingDelta, ToolCallDelta

_DELTAS = (TextDelta, ThinkingDelta, ToolCallDelta)

EVENT_OVERHEAD = 256
"""Weight of any event: the bytes its object graph costs besides shared messages (a guess)."""
DEFAULT_MAX_BYTES = 8 << 20
"""Queued weight past which a subscriber's buffer is merged (see the module docstring)."""


def event_weight(event: AgentSessionEvent) -> int:
    """About how many bytes queueing ``event`` keeps alive that nothing else holds: the
    partial message of a ``message_update`` or the partial result of a
    ``tool_execution_update``; other events point at shared messages. A partial counts its
    whole text although it is a lazy snapshot sharing the builder's pieces (issue 38): any
    reader that materializes a queued one makes it a copy, and the weights, hence what a slow
    client's merges produce, stay what they were with eager snapshots."""
    if isinstance(event, MessageUpdate):
        # A lazy partial knows its size: weighing it never materializes it (issue 38).
        message = event.message
        chars = message.text_chars if type(message) is PartialMessage else message_chars(message)
        inner = event.assistant_message_event
        if type(inner) in _DELTAS:  # every streamed delta is weighed: no getattr for it
            return EVENT_OVERHEAD + len(inner.delta) + chars  # type: ignore[union-attr]
        return EVENT_OVERHEAD + _delta_chars(event) + chars
    if isinstance(event, ToolExecutionUpdate):
        return EVENT_OVERHEAD + content_chars(event.partial_result.content)
    return EVENT_OVERHEAD


def _delta_chars(event: AgentSessionEvent) -> int:
    """The length of a ``message_update``'s delta (0 for any other event)."""
    if isinstance(event, MessageUpdate):
        delta = getattr(event.assistant_message_event, "delta", None)
        if isinstance(delta, str):
            return len(delta)
    return 0


class Offer(Enum):
    """What happened to an offered event."""

    QUEUED = "queued"
    COALESCED = "coalesced"
    OVERFLOW = "overflow"  # the subscriber is now disconnected


@attrs.frozen
class Sequenced:
    """An event with its per-session sequence number (``seq``), for resuming clients."""

    seq: int
    event: AgentSessionEvent


@attrs.frozen
class SequencedRun(Sequenced):
    """A run of streamed deltas (:class:`~pitrio.messages.delta_run.DeltaRun`) as one item,
    for a subscriber that takes runs (the RPC server's forwarder, issue 38): ``seq`` is its
    last delta's, the first's is ``seq - len(run) + 1``. ``event`` is the run merged into one
    update (its deltas joined, the last partial): what a buffer merging it for a client that
    is behind keeps, and what it weighs; a subscriber taking it whole expands ``run``."""

    run: DeltaRun

    @property
    def first_seq(self) -> int:
        """The ``seq`` of the run's first delta."""
        return self.seq - len(self.run.deltas) + 1

    def expanded(self) -> list[Sequenced]:
        """The run's updates one by one, each with its own ``seq``."""
        return sequenced_updates(self.run, self.first_seq)


def sequenced_updates(run: DeltaRun, first_seq: int) -> list[Sequenced]:
    """``run``'s updates one by one, numbered from ``first_seq``: what
    :meth:`DeltaRun.updates` makes, with the objects set up directly (a subscriber that does
    not take runs, such as the daemon's relay, gets one per delta: issue 38)."""
    make = _text_delta if run.kind == "text_delta" else _thinking_delta
    index = run.content_index
    out: list[Sequenced] = []
    seq = first_seq
    for delta, partial in zip(run.deltas, run.partials(), strict=True):
        event = make(content_index=index, delta=delta, partial=partial)
        out.append(_sequenced(seq, _message_update(assistant_message_event=event, message=partial)))
        seq += 1
    return out


_sequenced = direct_init(Sequenced)
_text_delta = direct_init(TextDelta)
_thinking_delta = direct_init(ThinkingDelta)
_message_update = direct_init(MessageUpdate)


def merge(older: AgentSessionEvent, newer: AgentSessionEvent) -> AgentSessionEvent | None:
    """One event standing for ``older`` followed by ``newer``, or ``None`` if they cannot merge."""
    if isinstance(older, MessageUpdate) and isinstance(newer, MessageUpdate):
        a, b = older.assistant_message_event, newer.assistant_message_event
        if isinstance(a, _DELTAS) and type(a) is type(b) and a.content_index == b.content_index:
            return _merged_update(newer, a.delta + b.delta)
        return None
    if (
        isinstance(older, ToolExecutionUpdate)
        and isinstance(newer, ToolExecutionUpdate)
        and older.tool_call_id == newer.tool_call_id
    ):
        return newer  # partial results are accumulated, not deltas: the latest says it all
    return None


def _merged_update(newest: MessageUpdate, delta: str) -> MessageUpdate:
    """``newest`` standing for a run of deltas whose text joined is ``delta``."""
    last = newest.assistant_message_event
    assert isinstance(last, _DELTAS)
    # Built directly, not with attrs.evolve (several times slower): a client behind a long
    # stream merges thousands of these (issue 38).
    merged = type(last)(
        content_index=last.content_index, delta=delta, partial=last.partial, extra=last.extra
    )
    return MessageUpdate(assistant_message_event=merged, message=newest.message)


def _delta_run_key(event: AgentSessionEvent) -> tuple[type, int] | None:
    """What a delta update merges with (its kind and block), ``None`` for other events."""
    if type(event) is MessageUpdate:
        inner = event.assistant_message_event
        if type(inner) in _DELTAS:
            return type(inner), inner.content_index
    return None


class SubscriberBuffer:
    """The bounded queue of one subscriber.

    Deltas merged into the last queued one are kept as a *run* (their texts in a list, the
    newest update as it came) until the event is taken or another is queued behind it: a
    client behind a long stream merges thousands of deltas in a row, and building a merged
    update for each of them (a copy of the joined text, three objects) cost more than the
    merge saves (issue 38). What is taken is the same merged update either way.
    """

    def __init__(self, capacity: int, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self._queue: deque[Sequenced] = deque()
        self._weights: deque[int] = deque()  # event_weight of each queued item (merged)
        # The last queued item is a run of merged deltas when this holds their texts, oldest
        # first; the item is then the run's newest update as it came (see the docstring).
        self._run: list[str] | None = None
        self._run_chars = 0  # their length
        self.queued_bytes = 0
        self.closed_reason: str | None = None
        self.coalesced = 0

    def __len__(self) -> int:
        return len(self._queue)

    @property
    def _items(self) -> deque[Sequenced]:
        """The queued events as they will be taken (a run at the end made whole first)."""
        self._close_run()
        return self._queue

    def _close_run(self) -> None:
        run = self._run
        if run is not None:
            self._run = None
            newest = self._queue[-1]
            assert isinstance(newest.event, MessageUpdate)
            self._queue[-1] = Sequenced(newest.seq, _merged_update(newest.event, "".join(run)))

    def _append(self, item: Sequenced, weight: int | None = None) -> None:
        if weight is None:
            weight = event_weight(item.event)
        self._close_run()
        self._queue.append(item)
        self._weights.append(weight)
        self.queued_bytes += weight

    @property
    def closed(self) -> bool:
        """Whether the subscriber was cut off."""
        return self.closed_reason is not None

    def offer(self, item: Sequenced) -> Offer:
        """Queue ``item``; merge it into the last one or disconnect when the buffer is full."""
        if self.closed_reason is not None:  # ``closed``, without a property call per delta
            return Offer.OVERFLOW
        # Weighed once: every streamed delta comes through here (issue 38).
        weight = event_weight(item.event)
        heavy = self.queued_bytes + weight > self.max_bytes
        if len(self._queue) < self.capacity and not heavy:
            self._append(item, weight)
            return Offer.QUEUED
        if self._queue and self._merge_last(item, weight):
            self.coalesced += 1
            return Offer.COALESCED
        if self._compact() or len(self._queue) < self.capacity:
            # Room by count; by bytes as far as merging could make it (see the docstring).
            self._append(item, weight)
            return Offer.COALESCED
        self.clear()
        self.closed_reason = (
            f"subscriber too slow: {self.capacity} events queued and event {item.seq} "
            f"({item.event.type}) could not be merged"
        )
        return Offer.OVERFLOW

    def _merge_last(self, item: Sequenced, weight: int) -> bool:
        """Merge ``item`` into the last queued event if they merge; return whether it did.

        The merged event takes the newer seq: a client resuming after it has seen both. Its
        weight is the newer one's plus the older deltas it now carries (what event_weight
        gives it, without weighing it again: issue 38)."""
        last = self._queue[-1]
        key = _delta_run_key(item.event)
        if key is None or key != _delta_run_key(last.event):
            merged = merge(last.event, item.event)  # tool updates: the newer says it all
            if merged is None:
                return False
            self._close_run()
            older_chars = 0
            self._queue[-1] = Sequenced(item.seq, merged)
        else:
            delta = item.event.assistant_message_event.delta  # type: ignore[union-attr]
            run = self._run
            if run is None:
                older = last.event.assistant_message_event.delta  # type: ignore[union-attr]
                run = self._run = [older]
                self._run_chars = len(older)
            older_chars = self._run_chars
            run.append(delta)
            self._run_chars += len(delta)
            self._queue[-1] = item
        self.queued_bytes += weight + older_chars - self._weights[-1]
        self._weights[-1] = weight + older_chars
        return True

    def _compact(self) -> bool:
        """Merge every run of mergeable neighbours in the queue; return whether room was made."""
        self._close_run()
        before = len(self._queue)
        compacted: deque[Sequenced] = deque()
        for item in self._queue:
            if compacted:
                merged = merge(compacted[-1].event, item.event)
                if merged is not None:
                    compacted[-1] = Sequenced(item.seq, merged)
                    continue
            compacted.append(item)
        if len(compacted) == before:
            return False
        self._queue = compacted
        self._weights = deque(event_weight(item.event) for item in compacted)
        self.queued_bytes = sum(self._weights)
        self.coalesced += before - len(compacted)
        return True

    def clear(self) -> None:
        """Drop every queued event and its weight (the subscriber stays connected)."""
        self._queue.clear()
        self._weights.clear()
        self._run = None
        self._run_chars = 0
        self.queued_bytes = 0

    def take(self) -> Sequenced | None:
        """The oldest queued event, or ``None`` when empty."""
        queue = self._queue
        if not queue:
            return None
        if len(queue) == 1:
            self._close_run()
        self.queued_bytes -= self._weights.popleft()
        return queue.popleft()
