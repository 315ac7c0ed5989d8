"""The session's event outlet hands a backlog over in batches (issue 38): one wake-up of the
subscriber's feeder moves what the channel takes, every event, in order."""

from __future__ import annotations

import trio
import trio.testing

from pitrio.actors.session.emitter import EventOutlet, Sink
from pitrio.actors.session.fanout import Sequenced
from pitrio.messages.events import AgentStart


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
