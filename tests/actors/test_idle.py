"""``until_idle``: returns when no other task can run, or at its limit; costs no start-up."""

from __future__ import annotations

import subprocess
import sys

import trio
import trio.testing

from pitrio.actors.idle import until_idle


async def test_returns_once_every_other_task_is_blocked() -> None:
    log: list[str] = []

    async def busy() -> None:
        for step in range(5):
            log.append(f"busy {step}")
            await trio.lowlevel.checkpoint()
        await trio.sleep_forever()  # blocked from here on

    async with trio.open_nursery() as nursery:
        nursery.start_soon(busy)
        await until_idle(10.0)
        log.append("idle")
        nursery.cancel_scope.cancel()
    assert log == [f"busy {step}" for step in range(5)] + ["idle"]


async def test_a_loop_that_never_idles_lets_it_return_at_the_limit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    steps = 0

    async def spin() -> None:
        nonlocal steps
        while True:  # always runnable; time passes only through the jumps
            steps += 1
            autojump_clock.jump(0.001)
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(spin)
        start = trio.current_time()
        await until_idle(0.01)
        assert 0.01 <= trio.current_time() - start < 0.02
        nursery.cancel_scope.cancel()
    assert 5 <= steps < 30


def test_importing_the_runtime_does_not_import_pytest() -> None:
    # trio.testing imports pytest (~80 ms of every start, the cold-start target of issue 7).
    code = (
        "import sys, pitrio.transports.cli, pitrio.transports.rpc.server, "
        "pitrio.actors.session_store.actor, pitrio.actors.idle\n"
        "print(sorted(m for m in ('pytest', 'trio.testing') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_it_is_trios_own_idle_wait() -> None:
    # Taken from trio's core: if trio moves it, this fails rather than a private copy drifting.
    from pitrio.actors import idle

    assert idle.wait_all_tasks_blocked is trio.testing.wait_all_tasks_blocked
