"""The session's event outlet hands a backlog over in batches (issue 38): one wake-up of the
subscriber's feeder moves what the channel takes, every event, in order; a batch emitted at
once (the pump's) gives every subscriber what one emit per event gives."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.session.emitter import EventOutlet, Sink
from pitrio.actors.session.fanout import Sequenced
from pitrio.messages.events import AgentSessionEvent, AgentStart, TurnStart
from tests.actors.test_session_fanout import text_delta, tool_update


class StepCounter(trio.abc.Instrument):
    """Counts the steps of the tasks whose name ends with ``suffix``."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task.name.endswith(self.suffix):
            self.steps += 1


async def test_a_backlog_moves_in_one_wake_up_of_the_feeder_in_order() -> None:
    outlet = EventOutlet()
    send, receive = trio.open_memory_channel[Sequenced](16)
    counter = StepCounter("._feed")
    async with trio.open_nursery() as nursery:
        outlet.add(1000, send, nursery)
        await trio.testing.wait_all_tasks_blocked()
        for _ in range(40):  # 16 go straight into the channel, 24 into the backlog
            outlet.emit(AgentStart())
        trio.lowlevel.add_instrument(counter)
        seen: list[int] = []
        while len(seen) < 40:
            await trio.testing.wait_all_tasks_blocked()
            while True:  # the reader takes everything queued, as the relays do
                try:
                    seen.append(receive.receive_nowait().seq)
                except trio.WouldBlock:
                    break
        trio.lowlevel.remove_instrument(counter)
        assert seen == list(range(1, 41))
        # 24 events of backlog, 16 a batch: a few wake-ups, not one per event.
        assert counter.steps <= 6
        nursery.cancel_scope.cancel()


async def test_a_sink_gets_every_event_as_it_is_emitted_in_order_without_a_task() -> None:
    outlet = EventOutlet()
    got: list[int] = []
    ends: list[str] = []
    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel[Sequenced](100)
        outlet.add(100, send, nursery)  # a channel subscriber beside it is unaffected
        outlet.add_sink(Sink(lambda item: got.append(item.seq), lambda: ends.append("ended")))
        await trio.testing.wait_all_tasks_blocked()
        tasks = len(nursery.child_tasks)
        for expected in range(1, 6):
            outlet.emit(AgentStart())
            assert got == list(range(1, expected + 1))  # in the emitting call itself
        assert len(nursery.child_tasks) == tasks  # no task of its own
        outlet.close()
        outlet.close()
        assert ends == ["ended"]  # told once
        outlet.emit(AgentStart())
        assert got == [1, 2, 3, 4, 5]  # nothing after the end
        await trio.testing.wait_all_tasks_blocked()
        assert [receive.receive_nowait().seq for _ in range(6)] == [1, 2, 3, 4, 5, 6]
        nursery.cancel_scope.cancel()


def _drained(receive: trio.MemoryReceiveChannel[Sequenced]) -> tuple[list[Sequenced], bool]:
    """What is queued on ``receive`` now, and whether its sender closed it."""
    items: list[Sequenced] = []
    while True:
        try:
            items.append(receive.receive_nowait())
        except trio.WouldBlock:
            return items, False
        except trio.EndOfChannel:
            return items, True


async def _delivered(
    events: list[AgentSessionEvent],
    chunks: list[tuple[int, int]],
    channel: int,
    capacity: int,
    batched: bool,
) -> tuple[list[Sequenced], bool, list[int]]:
    """What one subscriber (``channel`` slots, a buffer of ``capacity``) and a sink get when
    ``events`` are emitted one by one, or in chunks through ``emit_all``; after each chunk
    the reader takes up to so many items (the feeder does not run: no checkpoint)."""
    outlet = EventOutlet()
    sunk: list[int] = []
    got: list[Sequenced] = []
    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel[Sequenced](channel)
        outlet.add(capacity, send, nursery)
        outlet.add_sink(Sink(lambda item: sunk.append(item.seq), lambda: None))
        await trio.testing.wait_all_tasks_blocked()
        start = 0
        for size, reads in chunks:  # no checkpoint in here: the feeder runs afterwards
            chunk = events[start : start + size]
            start += size
            if batched:
                outlet.emit_all(chunk)
            else:
                for event in chunk:
                    outlet.emit(event)
            for _ in range(reads):
                try:
                    got.append(receive.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
        closed = False
        while not closed:
            await trio.testing.wait_all_tasks_blocked()
            items, closed = _drained(receive)
            got.extend(items)
            if not items:
                break
        nursery.cancel_scope.cancel()
    return got, closed, sunk


_EVENTS = st.lists(
    st.sampled_from(["a0", "b0", "c1", "tool", "turn"]), min_size=1, max_size=40
).map(
    lambda kinds: [
        TurnStart()
        if kind == "turn"
        else tool_update("t", str(n))
        if kind == "tool"
        else text_delta("x" * n, kind[0], int(kind[1]))
        for n, kind in enumerate(kinds)
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    events=_EVENTS,
    cuts=st.lists(
        st.tuples(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=40,
    ),
    channel=st.integers(min_value=0, max_value=4),
    capacity=st.integers(min_value=1, max_value=6),
)
def test_emit_all_delivers_what_one_emit_per_event_does(
    events: list[AgentSessionEvent], cuts: list[tuple[int, int]], channel: int, capacity: int
) -> None:
    """The pump's batches (issue 38) reach each subscriber and sink as the same items, in the
    same order, merged and cut off alike, as when each event was emitted alone."""
    chunks: list[tuple[int, int]] = []
    left = len(events)
    for cut, reads in cuts:
        if left <= 0:
            break
        chunks.append((min(cut, left), reads))
        left -= chunks[-1][0]
    if left > 0:
        chunks.append((left, 0))
    one_by_one = trio.run(_delivered, events, chunks, channel, capacity, False)
    batched = trio.run(_delivered, events, chunks, channel, capacity, True)
    assert batched == one_by_one
    assert batched[2] == list(range(1, len(events) + 1))
