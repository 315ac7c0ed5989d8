"""The session's event outlet hands a backlog over in batches (issue 38): one wake-up of the
subscriber's feeder moves what the channel takes, every event, in order."""

from __future__ import annotations

import trio
import trio.testing

from pitrio.actors.session.emitter import EventOutlet
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
