"""The session's event outlet: the ``seq`` counter and the subscribers (``DESIGN.md`` §2).

Every event of a session goes out through :meth:`EventOutlet.emit`, a synchronous call that
numbers it and hands it to each subscriber: directly when the subscriber's channel takes it,
else into the subscriber's :class:`~pitrio.actors.session.fanout.SubscriberBuffer` (coalesce,
then disconnect), which a feeder task drains. A *sink* is the other kind of subscriber: a
synchronous call per event that never blocks (the host's relay, which only queues for its
clients), so it needs no buffer, channel or task (issue 38: an idle hosted session held all
three for it). The session actor owns the outlet; it lends ``emit`` to its supervisor as its
event port, so the supervisor's events take their place in the one ``seq`` order (a call,
never a wait).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import trio

from pitrio._direct_init import direct_init
from pitrio.actors.session.fanout import (
    Offer,
    Sequenced,
    SequencedRun,
    SubscriberBuffer,
    sequenced_updates,
)
from pitrio.messages.delta_run import DeltaRun
from pitrio.messages.events import AgentSessionEvent

_sequenced = direct_init(Sequenced)  # a batch numbers every streamed update (issue 38)


@attrs.define
class _Subscriber:
    buffer: SubscriberBuffer
    send: trio.MemorySendChannel[Sequenced]
    wake: trio.Event = attrs.field(factory=trio.Event)
    sending: bool = False  # the feeder holds an event it has not handed over yet
    runs: bool = False  # takes a run of deltas as one SequencedRun (else one item per delta)


@attrs.frozen
class Sink:
    """A subscriber called with each event as it is emitted (see the module docstring)."""

    deliver: Callable[[Sequenced], None]
    """Takes one event; must not block, await or emit on this outlet."""
    ended: Callable[[], None]
    """Called once when delivery ends (the session actor stopped)."""


class EventOutlet:
    """Numbers a session's events and delivers them to its subscribers."""

    def __init__(self) -> None:
        self.seq = 0
        """The ``seq`` of the last event emitted (0 before any)."""
        self._subscribers: list[_Subscriber] = []
        self._sinks: tuple[Sink, ...] = ()

    def subscribe(
        self, capacity: int, nursery: trio.Nursery
    ) -> trio.MemoryReceiveChannel[Sequenced]:
        """A new subscriber's channel (its feeder task runs in ``nursery``)."""
        # The channel itself is unbuffered: the per-subscriber buffer holds the backlog and
        # applies the coalesce-then-disconnect policy, and a feeder task drains it.
        send, receive = trio.open_memory_channel[Sequenced](0)
        self.add(capacity, send, nursery)
        return receive

    def add(
        self,
        capacity: int,
        send: trio.MemorySendChannel[Sequenced],
        nursery: trio.Nursery,
        *,
        runs: bool = False,
    ) -> None:
        """Deliver every event from now on into ``send`` (closed when delivery ends); with
        ``runs``, a run of streamed deltas as one :class:`SequencedRun` (the subscriber
        expands it), else each of its deltas as its own item."""
        subscriber = _Subscriber(buffer=SubscriberBuffer(capacity), send=send, runs=runs)
        self._subscribers.append(subscriber)
        nursery.start_soon(self._feed, subscriber)

    def add_sink(self, sink: Sink) -> None:
        """Call ``sink`` with every event from now on, until :meth:`close`."""
        self._sinks = (*self._sinks, sink)

    def close(self) -> None:
        """Delivery ends (the session actor stopped): each sink is told, once."""
        sinks, self._sinks = self._sinks, ()
        for sink in sinks:
            sink.ended()

    async def _feed(self, subscriber: _Subscriber) -> None:
        async with subscriber.send:
            item: Sequenced | None = None
            try:
                while True:
                    item = subscriber.buffer.take()
                    if item is None:
                        if subscriber.buffer.closed:
                            return
                        await subscriber.wake.wait()
                        subscriber.wake = trio.Event()
                        continue
                    subscriber.sending = True
                    try:
                        # A backlog goes over without a task switch per event while the
                        # channel takes it (a buffered one, or a receiver waiting): one wake-up
                        # of the feeder moves what is queued (issue 38). A full channel waits.
                        try:
                            subscriber.send.send_nowait(item)
                        except trio.WouldBlock:
                            await subscriber.send.send(item)
                        item = None
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        item = None
                        if subscriber in self._subscribers:
                            self._subscribers.remove(subscriber)
                        return
                    finally:
                        subscriber.sending = False
            finally:
                # The session is stopping: hand what is still buffered to a channel that has
                # room (a recorder's), without waiting, so events emitted before the end are
                # not lost on their way; the one being sent when cancelled goes first.
                if item is None:
                    item = subscriber.buffer.take()
                while item is not None:
                    try:
                        subscriber.send.send_nowait(item)
                    except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                    item = subscriber.buffer.take()

    def emit_all(self, events: Sequence[AgentSessionEvent | DeltaRun]) -> None:
        """:meth:`emit` each of ``events`` in order, walking the subscribers once for all of
        them (issue 38: the pump's batch of streamed updates). Each subscriber and sink gets
        the same items in the same order as from one :meth:`emit` per event. A run of
        deltas takes a ``seq`` per delta; it goes whole to a subscriber that takes runs,
        and one item per delta to the others and to the sinks."""
        items: list[Sequenced] = []
        seq = self.seq
        runs = False
        # Runs are kept whole only for a subscriber that takes them; else expanded at once.
        whole = any(subscriber.runs for subscriber in self._subscribers)
        for event in events:
            if type(event) is DeltaRun:
                if whole:
                    seq += len(event.deltas)
                    items.append(SequencedRun(seq, event.merged_update(), event))
                    runs = True
                else:
                    items += sequenced_updates(event, seq + 1)
                    seq += len(event.deltas)
            else:
                seq += 1
                items.append(_sequenced(seq, event))
        # One item per delta, made only if a sink or a subscriber wants them so.
        flat: list[Sequenced] | None = None if runs else items
        sinks = self._sinks
        if sinks:
            flat = flat or _expanded(items)
            for item in flat:
                self.seq = item.seq  # a sink sees the outlet where one emit per event left it
                for sink in sinks:
                    sink.deliver(item)
        self.seq = seq
        for subscriber in list(self._subscribers):
            if subscriber.runs:
                self._deliver_all(subscriber, items)
            else:
                flat = flat or _expanded(items)
                self._deliver_all(subscriber, flat)

    def _deliver_all(self, subscriber: _Subscriber, items: list[Sequenced]) -> None:
        """What :meth:`emit` does for one subscriber, for several items in order."""
        taken = 0
        if not subscriber.sending and not subscriber.buffer and not subscriber.buffer.closed:
            # As in emit: straight into the channel while nothing is queued before them and
            # it takes them; the rest to the buffer, behind them.
            send = subscriber.send.send_nowait
            try:
                for item in items:
                    send(item)
                    taken += 1
            except trio.WouldBlock:
                pass
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._drop_closed(subscriber)
                return
            if taken == len(items):
                return
        offer = subscriber.buffer.offer
        for index in range(taken, len(items)):
            if offer(items[index]) is Offer.OVERFLOW:
                self._subscribers.remove(subscriber)
                break
        subscriber.wake.set()

    def _drop_closed(self, subscriber: _Subscriber) -> None:
        """Forget a subscriber whose receiving end is gone; its feeder wakes to see why."""
        self._subscribers.remove(subscriber)
        subscriber.buffer.closed_reason = "subscriber closed its channel"
        subscriber.wake.set()

    def emit(self, event: AgentSessionEvent) -> None:
        """Give ``event`` the next ``seq`` and hand it to every subscriber (never blocks)."""
        self.seq += 1
        item = Sequenced(self.seq, event)
        for sink in self._sinks:
            sink.deliver(item)
        for subscriber in list(self._subscribers):
            if not subscriber.sending and not subscriber.buffer and not subscriber.buffer.closed:
                # Nothing queued before it and the channel takes it now (a receiver waits, or
                # buffer room): hand it over directly. The feeder task is only for a backlog;
                # waking it for every event cost a task switch per event per subscriber
                # (issue 7: streams and turns). Order and the coalesce policy are unchanged.
                try:
                    subscriber.send.send_nowait(item)
                    continue
                except trio.WouldBlock:
                    pass
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._drop_closed(subscriber)
                    continue
            if subscriber.buffer.offer(item) is Offer.OVERFLOW:
                self._subscribers.remove(subscriber)
            subscriber.wake.set()


def _expanded(items: list[Sequenced]) -> list[Sequenced]:
    """``items`` with every run expanded into one item per delta."""
    out: list[Sequenced] = []
    for item in items:
        if isinstance(item, SequencedRun):
            out += item.expanded()
        else:
            out.append(item)
    return out
