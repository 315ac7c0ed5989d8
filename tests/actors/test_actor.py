"""Tests of the actor conventions (pitrio/actors/_actor.py)."""

from __future__ import annotations

import attrs
import pytest
import trio
import trio.testing

from pitrio.actors._actor import Actor, Handle, Reply, buffered
from pitrio.errors import ActorStoppedError, ReplyTimeoutError


@attrs.frozen
class Add:
    amount: int
    reply: Reply[int]


@attrs.frozen
class Hang:
    reply: Reply[None]


@attrs.frozen
class Crash:
    reply: Reply[None]


Command = Add | Hang | Crash


class Counter(Actor[Command]):
    def __init__(self, capacity: int = 4) -> None:
        super().__init__(name="counter", capacity=capacity)
        self.total = 0
        self.gate = trio.Event()

    async def handle(self, command: Command) -> None:
        match command:
            case Add(amount=amount, reply=reply):
                self.total += amount
                reply.set(self.total)
            case Hang():
                pass  # never answered: the reply must fail when the actor stops
            case Crash():
                raise RuntimeError("boom")


class CounterHandle(Handle[Command]):
    async def add(self, amount: int) -> int:
        return await self.ask(lambda reply: Add(amount, reply))

    async def hang(self, within: float | None = None) -> None:
        await self.ask(Hang, within=within)

    async def crash(self) -> None:
        await self.ask(Crash)


async def test_ask_returns_the_reply_in_order() -> None:
    async with trio.open_nursery() as nursery:
        counter = CounterHandle(await nursery.start(Counter().run))
        assert await counter.add(2) == 2
        assert await counter.add(3) == 5
        await counter.aclose()


async def test_closing_the_inbox_stops_the_actor_and_fails_pending_replies() -> None:
    actor = Counter()
    results: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        counter = CounterHandle(await nursery.start(actor.run))

        async def waiter() -> None:
            try:
                await counter.hang()
            except ActorStoppedError as exc:
                results.append(exc)

        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        await counter.aclose()
    assert len(results) == 1
    with pytest.raises(ActorStoppedError):
        await counter.add(1)


async def test_reply_deadline_raises_timeout(autojump_clock: trio.testing.MockClock) -> None:
    async with trio.open_nursery() as nursery:
        counter = CounterHandle(await nursery.start(Counter().run))
        start = trio.current_time()
        with pytest.raises(ReplyTimeoutError):
            await counter.hang(within=5)
        assert trio.current_time() - start == pytest.approx(5)
        await counter.aclose()


async def test_crash_fails_waiters_and_propagates() -> None:
    failures: list[BaseException] = []
    with pytest.RaisesGroup(RuntimeError, flatten_subgroups=True):
        async with trio.open_nursery() as nursery:
            counter = CounterHandle(await nursery.start(Counter().run))

            async def caller() -> None:
                try:
                    await counter.crash()
                except ActorStoppedError as exc:
                    failures.append(exc)

            nursery.start_soon(caller)
    assert len(failures) == 1
    assert "boom" in str(failures[0])


async def test_full_inbox_blocks_the_sender_and_stats_count() -> None:
    actor = Counter(capacity=2)
    async with trio.open_nursery() as nursery:
        # Not started: nobody drains the inbox, so the third send must block.
        handle = CounterHandle(actor.address)
        for _ in range(2):
            await handle.tell(Add(1, Reply()))
        blocked = trio.Event()

        async def third() -> None:
            await handle.tell(Add(1, Reply()))
            blocked.set()

        nursery.start_soon(third)
        await trio.testing.wait_all_tasks_blocked()
        assert not blocked.is_set()
        stats = handle.stats()
        assert (stats.queued, stats.capacity, stats.senders_waiting) == (2, 2, 1)
        await nursery.start(actor.run)
        await blocked.wait()
        assert await handle.add(10) == 13
        stats = handle.stats()
        assert stats.received == 4
        assert stats.high_water >= 2
        await handle.aclose()


async def test_reply_is_one_shot() -> None:
    reply: Reply[int] = Reply()
    reply.set(1)
    reply.set(2)
    reply.fail(RuntimeError("late"))
    assert await reply.wait() == 1


async def test_answered_and_abandoned_replies_leave_the_link_bounded() -> None:
    actor = Counter()
    async with trio.open_nursery() as nursery:
        counter = CounterHandle(await nursery.start(actor.run))
        for _ in range(300):
            await counter.add(1)
        link = actor.address.link
        assert link.pending is None  # every answered reply taken out; the empty set dropped
        for _ in range(1000):
            Reply[int](link)  # created for a command never sent, then dropped unanswered
        assert len(link.pending) < 130  # dead references pruned as the set doubles
        await counter.aclose()


def test_an_actor_instance_dict_holds_only_its_subclass_fields() -> None:
    actor = Counter()
    assert actor.name == "counter"
    # The base's fields live in slots, so the dict stays small enough to share its keys.
    assert set(vars(actor)) == {"total", "gate"}


async def test_buffered_counts_what_statistics_counts_on_both_ends() -> None:
    send, receive = trio.open_memory_channel[int](3)
    waiting: list[int] = []

    def both() -> tuple[int, int]:
        stats = send.statistics().current_buffer_used
        assert receive.statistics().current_buffer_used == stats
        return buffered(send), buffered(receive)

    assert both() == (0, 0)
    for value in range(3):
        send.send_nowait(value)
        assert both() == (value + 1, value + 1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send.send, 3)  # waits: the buffer is full
        await trio.testing.wait_all_tasks_blocked()
        assert both() == (3, 3)
        waiting.append(receive.receive_nowait())  # the waiting value moves into the buffer
        assert both() == (3, 3)
    while buffered(receive):
        waiting.append(receive.receive_nowait())
    assert waiting == [0, 1, 2, 3]
    assert both() == (0, 0)


def test_buffered_asks_statistics_of_any_other_channel() -> None:
    class Other:
        def statistics(self) -> trio.MemoryChannelStatistics:
            return trio.MemoryChannelStatistics(
                current_buffer_used=7,
                max_buffer_size=8,
                open_send_channels=1,
                open_receive_channels=1,
                tasks_waiting_send=0,
                tasks_waiting_receive=0,
                peak_buffer_used=7,
            )

    assert buffered(Other()) == 7  # type: ignore[arg-type]
