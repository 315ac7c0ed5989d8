"""Per-subscriber event buffers: a slow client never slows the session or other clients.

The policy of ``DESIGN.md`` §2, as a pure state machine per subscriber. Each buffer holds at
most ``capacity`` events. When an event arrives at a full buffer, it is merged into the last
queued one if both are deltas of the same stream, else neighbours inside the queue are merged to
make room. Mergeable: consecutive ``text_delta`` / ``thinking_delta`` / ``toolcall_delta``
updates of one content block (deltas concatenated, latest partial kept) and
``tool_execution_update``s of one call (the latest accumulated result kept). If nothing can be
merged, the subscriber is cut off with a reason and its buffer is dropped.
"""

from __future__ import annotations

from collections import deque
from enum import Enum

import attrs

from pitrio.messages.events import AgentSessionEvent, MessageUpdate, ToolExecutionUpdate
from pitrio.messages.stream import TextDelta, ThinkingDelta, ToolCallDelta

_DELTAS = (TextDelta, ThinkingDelta, ToolCallDelta)


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


def merge(older: AgentSessionEvent, newer: AgentSessionEvent) -> AgentSessionEvent | None:
    """One event standing for ``older`` followed by ``newer``, or ``None`` if they cannot merge."""
    if isinstance(older, MessageUpdate) and isinstance(newer, MessageUpdate):
        a, b = older.assistant_message_event, newer.assistant_message_event
        if isinstance(a, _DELTAS) and type(a) is type(b) and a.content_index == b.content_index:
            merged = attrs.evolve(b, delta=a.delta + b.delta)
            return MessageUpdate(assistant_message_event=merged, message=newer.message)
        return None
    if (
        isinstance(older, ToolExecutionUpdate)
        and isinstance(newer, ToolExecutionUpdate)
        and older.tool_call_id == newer.tool_call_id
    ):
        return newer  # partial results are accumulated, not deltas: the latest says it all
    return None


class SubscriberBuffer:
    """The bounded queue of one subscriber."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._items: deque[Sequenced] = deque()
        self.closed_reason: str | None = None
        self.coalesced = 0

    def __len__(self) -> int:
        return len(self._items)

    @property
    def closed(self) -> bool:
        """Whether the subscriber was cut off."""
        return self.closed_reason is not None

    def offer(self, item: Sequenced) -> Offer:
        """Queue ``item``; merge it into the last one or disconnect when the buffer is full."""
        if self.closed:
            return Offer.OVERFLOW
        if len(self._items) < self.capacity:
            self._items.append(item)
            return Offer.QUEUED
        last = self._items[-1]
        merged = merge(last.event, item.event)
        if merged is not None:
            # The merged event takes the newer seq: a client resuming after it has seen both.
            self._items[-1] = Sequenced(item.seq, merged)
            self.coalesced += 1
            return Offer.COALESCED
        if self._compact():
            self._items.append(item)
            return Offer.COALESCED
        self._items.clear()
        self.closed_reason = (
            f"subscriber too slow: {self.capacity} events queued and event {item.seq} "
            f"({item.event.type}) could not be merged"
        )
        return Offer.OVERFLOW

    def _compact(self) -> bool:
        """Merge every run of mergeable neighbours in the queue; return whether room was made."""
        before = len(self._items)
        compacted: deque[Sequenced] = deque()
        for item in self._items:
            if compacted:
                merged = merge(compacted[-1].event, item.event)
                if merged is not None:
                    compacted[-1] = Sequenced(item.seq, merged)
                    continue
            compacted.append(item)
        self._items = compacted
        self.coalesced += before - len(compacted)
        return len(compacted) < before

    def take(self) -> Sequenced | None:
        """The oldest queued event, or ``None`` when empty."""
        return self._items.popleft() if self._items else None
