"""The stray-cancellation guard of the tests' harnesses (tests/stray_cancel.py).

Each stray case runs the same harness with and without the guard: without it the block must
end silently half-way (the hazard is real, so the check on the guarded run means something);
with it the test fails. Real cancellations around the harness behave exactly as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from tests.loopback_tcp import serving
from tests.stray_cancel import StrayCancelledError, no_stray_cancel


async def leak_a_cancelled() -> None:
    """Raise a real ``Cancelled``: a nursery's own, kept and re-raised after the nursery has
    exited (as trio-websocket 0.12's ``open_websocket`` could)."""
    leaked: trio.Cancelled | None = None
    async with trio.open_nursery() as nursery:
        nursery.cancel_scope.cancel()
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled as exc:
            leaked = exc
    assert leaked is not None
    raise leaked


async def leak_a_cancelled_in_a_group() -> None:
    """The stray ``Cancelled`` wrapped in a group of its own (as a library might). (Out of a
    nursery in the block it never comes: that nursery swallows it first, out of our reach.)"""
    try:
        await leak_a_cancelled()
    except trio.Cancelled as exc:
        raise BaseExceptionGroup("a library's group", [exc]) from None


@asynccontextmanager
async def harness(
    guarded: bool, background: Callable[[], Awaitable[object]] | None = None
) -> AsyncIterator[trio.Nursery]:
    """Yield inside a nursery with a task in it, as the tests' harnesses do."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(background or trio.sleep_forever)
        try:
            if guarded:
                with no_stray_cancel():
                    yield nursery
            else:
                yield nursery
        finally:
            nursery.cancel_scope.cancel()


@pytest.mark.parametrize("leak", [leak_a_cancelled, leak_a_cancelled_in_a_group])
async def test_a_stray_cancelled_is_swallowed_by_an_unguarded_harness(
    leak: Callable[[], Awaitable[None]],
) -> None:
    checks: list[str] = []
    async with harness(guarded=False):
        await leak()
        checks.append("the rest of the test")  # pragma: no cover (the hazard: never reached)
    assert checks == []


@pytest.mark.parametrize("leak", [leak_a_cancelled, leak_a_cancelled_in_a_group])
async def test_a_stray_cancelled_fails_a_guarded_harness(
    leak: Callable[[], Awaitable[None]],
) -> None:
    with pytest.RaisesGroup(StrayCancelledError, allow_unwrapped=True, flatten_subgroups=True):
        async with harness(guarded=True):
            await leak()


async def test_a_stray_cancelled_fails_a_real_harness() -> None:
    async def ignore(stream: trio.SocketStream) -> None:
        await stream.aclose()

    with pytest.RaisesGroup(StrayCancelledError, allow_unwrapped=True, flatten_subgroups=True):
        async with serving(ignore):
            await leak_a_cancelled()


async def test_move_on_after_around_a_guarded_harness_still_moves_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with trio.move_on_after(5) as scope:
        async with harness(guarded=True):
            await trio.sleep_forever()
    assert scope.cancelled_caught


async def test_fail_after_around_a_guarded_harness_still_fails(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(trio.TooSlowError):
        with trio.fail_after(5):
            async with harness(guarded=True):
                await trio.sleep_forever()


async def test_an_outer_cancel_around_a_guarded_harness_still_cancels() -> None:
    reached: list[str] = []
    with trio.CancelScope() as scope:
        async with harness(guarded=True):
            scope.cancel()
            await trio.lowlevel.checkpoint()
            reached.append("after the checkpoint")  # pragma: no cover
    assert scope.cancelled_caught
    assert reached == []


async def test_an_outer_cancel_reaching_a_nursery_in_the_block_still_cancels() -> None:
    """The block's ``Cancelled`` comes as a group from a nursery of its own."""
    with trio.CancelScope() as scope:
        async with harness(guarded=True), trio.open_nursery() as nursery:
            nursery.start_soon(trio.sleep_forever)
            nursery.start_soon(trio.sleep_forever)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught


async def test_the_harness_nursery_cancelled_on_purpose_still_ends_the_block_quietly() -> None:
    async def stop(nursery_of: list[trio.Nursery]) -> None:
        await trio.testing.wait_all_tasks_blocked()
        nursery_of[0].cancel_scope.cancel()

    nursery_of: list[trio.Nursery] = []
    async with harness(guarded=True, background=lambda: stop(nursery_of)) as nursery:
        nursery_of.append(nursery)
        await trio.sleep_forever()


async def test_a_background_failure_still_comes_out_as_itself() -> None:
    async def fail() -> None:
        await trio.testing.wait_all_tasks_blocked()
        raise ValueError("the harness's task failed")

    with pytest.RaisesGroup(pytest.RaisesExc(ValueError, match="task failed")):
        async with harness(guarded=True, background=fail):
            await trio.sleep_forever()


async def test_other_exceptions_and_a_normal_exit_pass_through() -> None:
    with pytest.RaisesGroup(KeyError):
        async with harness(guarded=True):
            raise KeyError("x")
    async with harness(guarded=True) as nursery:
        assert not nursery.cancel_scope.cancel_called
