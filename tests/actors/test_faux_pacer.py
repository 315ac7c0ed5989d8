"""The load faux model's pacer: many tasks' sleeps on one timer, each woken at its time."""

from __future__ import annotations

import trio
import trio.testing

from pitrio.actors.model_router.providers.faux_pacer import Pacer


def run(main: object) -> None:
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))  # type: ignore[arg-type]


def test_a_lone_sleeper_wakes_at_its_deadline() -> None:
    async def main() -> None:
        pacer = Pacer()
        start = trio.current_time()
        await pacer.sleep_until(start + 0.5)
        assert trio.current_time() == start + 0.5
        await pacer.sleep_until(start)  # already past: returns (a checkpoint)
        assert trio.current_time() == start + 0.5

    run(main)


def test_every_sleeper_wakes_at_its_own_deadline_whatever_the_order() -> None:
    """Deadlines before and after the keeper's own, and ones added while it sleeps."""
    woke: dict[str, float] = {}

    async def main() -> None:
        pacer = Pacer()
        start = trio.current_time()

        async def sleeper(name: str, delay: float, deadline: float) -> None:
            await trio.sleep(delay)
            await pacer.sleep_until(start + deadline)
            woke[name] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper, "keeper", 0, 3.0)
            nursery.start_soon(sleeper, "before", 0, 1.0)
            nursery.start_soon(sleeper, "after", 0, 5.0)
            nursery.start_soon(sleeper, "late-joiner-earliest", 0.5, 0.75)
            nursery.start_soon(sleeper, "joins-after-keeper-left", 4.0, 4.5)
            for index in range(20):
                nursery.start_soon(sleeper, f"same-{index}", 0, 2.0)

    run(main)
    assert woke.pop("keeper") == 3.0
    assert woke.pop("before") == 1.0
    assert woke.pop("after") == 5.0
    assert woke.pop("late-joiner-earliest") == 0.75
    assert woke.pop("joins-after-keeper-left") == 4.5
    assert set(woke.values()) == {2.0} and len(woke) == 20


def test_due_sleepers_wake_together_on_one_timer() -> None:
    """A clock jump past several deadlines wakes them all in one pass (one batch)."""

    async def main() -> None:
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock)
        pacer = Pacer()
        start = trio.current_time()
        woke: list[int] = []

        async def sleeper(index: int) -> None:
            await pacer.sleep_until(start + 0.01 * (index + 1))
            woke.append(index)

        async with trio.open_nursery() as nursery:
            for index in range(10):
                nursery.start_soon(sleeper, index)
            await trio.testing.wait_all_tasks_blocked()
            clock.jump(0.055)  # five due
            await trio.testing.wait_all_tasks_blocked()
            assert sorted(woke) == [0, 1, 2, 3, 4]
            clock.jump(1)

    trio.run(main, clock=trio.testing.MockClock())


def test_cancelled_sleepers_leave_the_others_on_time() -> None:
    """The keeper cancelled hands the timer on; a cancelled waiter is skipped."""
    woke: dict[str, float] = {}

    async def main() -> None:
        pacer = Pacer()
        start = trio.current_time()

        async def sleeper(name: str, deadline: float, cancel_at: float | None = None) -> None:
            with trio.CancelScope(deadline=start + (cancel_at or 100)):
                await pacer.sleep_until(start + deadline)
                woke[name] = trio.current_time() - start
                return
            woke[name + " cancelled"] = trio.current_time() - start

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper, "keeper", 1.0, 0.2)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(sleeper, "waiter", 2.0, 0.3)
            nursery.start_soon(sleeper, "a", 1.5)
            nursery.start_soon(sleeper, "b", 2.5)

    run(main)
    assert woke == {"keeper cancelled": 0.2, "waiter cancelled": 0.3, "a": 1.5, "b": 2.5}
