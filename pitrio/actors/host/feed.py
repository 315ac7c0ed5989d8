"""What one attached client is sent, in order: session events, responses, notices, replays.

Pure (no trio). A :class:`ClientFeed` merges four sources into the one order a client sees:

* **session events** (:class:`~pitrio.actors.session.fanout.Sequenced`), through the session
  layer's :class:`~pitrio.actors.session.fanout.SubscriberBuffer`: bounded, deltas coalesced
  when full, the client cut off when nothing more can be merged;
* **outgoing frames** that are not session events (command responses, host notices). Each
  carries ``after_seq``: it is sent once every event up to that seq has been sent, so a
  command's events precede its response as in pi (``pi-rpc.md`` §6.2);
* the **prompt gate**: pi answers a ``prompt`` before its run's ``agent_start``. While a
  prompt of this client waits for its answer, an ``agent_start`` that came after the prompt
  was sent is held back, and the prompt's response (marked with ``before_start_after``) goes
  out just before it;
* **replayed frames** of a ``resume``, already encoded, sent before anything else.

:meth:`ClientFeed.take` returns the next thing to send, or ``None`` when nothing may be sent
now. A feed closed for slowness (:attr:`closed_reason`) returns ``None`` forever.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import attrs

from pitrio._direct_init import direct_init
from pitrio.actors.session.fanout import Offer, Sequenced, SubscriberBuffer
from pitrio.messages.events import AgentStart

DEFAULT_CLIENT_CAPACITY = 512
"""Events a client may have queued before its updates are coalesced. Each queued update holds
its partial message, so this bounds a stalled client's memory too."""
DEFAULT_MAX_OUTGOING = 256
"""Responses and notices a client may have queued (it is closed beyond that)."""


@attrs.frozen(kw_only=True)
class Outgoing:
    """A frame that is not a session event: a JSON object to send as it is."""

    payload: dict[str, Any]
    after_seq: int
    before_start_after: int | None = None
    """A prompt's response: may also go just before the first ``agent_start`` whose seq is
    above this (the prompt's run starting)."""


@attrs.frozen
class FramedEvent(Sequenced):
    """A session event as the host relayed it, with the frame it was encoded to once (the
    replay buffer's), so a sender whose clients take that form need not encode it again. A
    coalesced update is a plain :class:`Sequenced`: it has no frame of its own yet."""

    frame: bytes


framed_event = direct_init(FramedEvent)
"""``FramedEvent(seq, event, frame)`` at half the cost: the relay makes one per event it
relays, every streamed delta (issue 38)."""


class EventBuffer(SubscriberBuffer):
    """A :class:`SubscriberBuffer` whose head can be looked at without taking it."""

    def peek(self) -> Sequenced | None:
        """The oldest queued event, left in place."""
        return self._items[0] if self._items else None


class ClientFeed:
    """The ordered outgoing queue of one client of one session."""

    def __init__(
        self,
        capacity: int = DEFAULT_CLIENT_CAPACITY,
        *,
        max_outgoing: int = DEFAULT_MAX_OUTGOING,
    ) -> None:
        self.events = EventBuffer(capacity)
        self.max_outgoing = max_outgoing
        self._outgoing: list[Outgoing] = []
        self._replay: deque[tuple[int, bytes]] = deque()
        self._gates: list[int] = []
        self._closed_reason: str | None = None
        self.sent_seq = 0
        """The seq of the last event taken."""
        self.attached_seq = 0
        """The seq of the last event before the client attached (set by the host)."""

    @property
    def closed_reason(self) -> str | None:
        """Why the client was cut off, if it was."""
        return self._closed_reason or self.events.closed_reason

    @property
    def coalesced(self) -> int:
        """How many events were merged into others for this client."""
        return self.events.coalesced

    def close(self, reason: str) -> None:
        """Cut the client off (nothing more will be taken)."""
        if self.closed_reason is None:
            self._closed_reason = reason
        self._outgoing.clear()
        self._replay.clear()

    def offer(self, item: Sequenced) -> Offer:
        """Queue a session event (coalescing, or cutting the client off, when full)."""
        if self.closed_reason is not None:
            return Offer.OVERFLOW
        result = self.events.offer(item)
        if result is Offer.OVERFLOW:
            self.close(self.events.closed_reason or "client too slow")
        return result

    def push(self, outgoing: Outgoing) -> bool:
        """Queue a response or notice; ``False`` (and the client cut off) when too many wait."""
        if self.closed_reason is not None:
            return False
        if len(self._outgoing) >= self.max_outgoing:
            self.close(f"client too slow: {self.max_outgoing} responses and notices queued")
            return False
        self._outgoing.append(outgoing)
        return True

    def open_gate(self, dispatch_seq: int) -> None:
        """A prompt was sent when the last event was ``dispatch_seq``: hold its run's
        ``agent_start`` until :meth:`close_gate`."""
        self._gates.append(dispatch_seq)

    def close_gate(self, dispatch_seq: int) -> None:
        """The prompt sent at ``dispatch_seq`` was answered (or gave up)."""
        if dispatch_seq in self._gates:
            self._gates.remove(dispatch_seq)

    def resume(self, frames: list[bytes], last_seq: int) -> int:
        """Replace the queued events by a replay: ``frames`` (the events up to ``last_seq``,
        already encoded, consecutive) go first, then live events after ``last_seq``. Frames
        this client already got on this connection are skipped; returns how many are queued.

        Every queued event must be at most ``last_seq`` (the replay covers them all): a merged
        update may hold deltas from both sides of any other boundary."""
        first = last_seq - len(frames) + 1
        delivered = range(self.attached_seq + 1, self.sent_seq + 1)
        self.events.clear()
        self._replay = deque(
            (seq, frame) for seq, frame in enumerate(frames, start=first) if seq not in delivered
        )
        self.sent_seq = max(self.sent_seq, last_seq)
        return len(self._replay)

    def _ready(self, outgoing: Outgoing, head: Sequenced | None) -> bool:
        if head is None or head.seq > outgoing.after_seq:
            return True
        return (
            outgoing.before_start_after is not None
            and isinstance(head.event, AgentStart)
            and head.seq > outgoing.before_start_after
        )

    def take(self) -> Sequenced | Outgoing | bytes | None:
        """The next frame to send: replayed bytes, a response or notice, or an event."""
        if self.closed_reason is not None:
            return None
        if self._replay:
            # Replayed frames are events too: what must precede them goes first.
            head_seq = self._replay[0][0]
            for index, outgoing in enumerate(self._outgoing):
                if outgoing.after_seq < head_seq:
                    return self._outgoing.pop(index)
            return self._replay.popleft()[1]
        head = self.events.peek()
        for index, outgoing in enumerate(self._outgoing):
            if self._ready(outgoing, head):
                return self._outgoing.pop(index)
        if head is None:
            return None
        if isinstance(head.event, AgentStart) and any(gate < head.seq for gate in self._gates):
            return None  # a prompt of this client is answered first
        self.events.take()
        self.sent_seq = head.seq
        return head

    def idle(self) -> bool:
        """Nothing queued or held back, and the client not cut off: an event relayed now may
        go to the client at once, ahead of nothing (the transport's direct send)."""
        return (
            not (self.events or self._outgoing or self._replay or self._gates)
            and self.closed_reason is None
        )

    def pending(self) -> int:
        """Frames waiting (events, responses, notices, replayed frames)."""
        return len(self.events) + len(self._outgoing) + len(self._replay)
