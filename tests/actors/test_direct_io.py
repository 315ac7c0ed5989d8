"""Direct reads and writes of non-blocking descriptors: no task switch unless they must wait."""

from __future__ import annotations

import os

import pytest
import trio
import trio.testing

from pitrio.actors.direct_io import FAST_STREAK, DirectReader, write_all


class StepCounter(trio.abc.Instrument):
    """Counts the scheduling steps of one task (each resumption after a yield is one)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


def nonblocking_pipe() -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    return read_fd, write_fd


async def test_waiting_bytes_are_read_without_a_task_switch_but_a_long_streak_yields() -> None:
    # trio's FdStream yields before every read: a task step per read even when data waits.
    read_fd, write_fd = nonblocking_pipe()
    reader = DirectReader(read_fd, 1024)
    counter = StepCounter(trio.lowlevel.current_task())
    try:
        trio.lowlevel.add_instrument(counter)
        try:
            for count in range(1, FAST_STREAK + 1):
                os.write(write_fd, b"line %d\n" % count)
                assert await reader.read() == b"line %d\n" % count
                # Only the streak's last read yields.
                assert counter.steps == (1 if count == FAST_STREAK else 0)
        finally:
            trio.lowlevel.remove_instrument(counter)
        os.close(write_fd)
        write_fd = -1
        assert await reader.read() == b""  # the end
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


async def test_a_read_waits_for_data_and_a_wait_restarts_the_streak() -> None:
    read_fd, write_fd = nonblocking_pipe()
    reader = DirectReader(read_fd, 1024)
    try:
        async with trio.open_nursery() as nursery:

            async def later() -> None:
                await trio.testing.wait_all_tasks_blocked()
                os.write(write_fd, b"late")

            nursery.start_soon(later)
            assert await reader.read() == b"late"
        counter = StepCounter(trio.lowlevel.current_task())
        trio.lowlevel.add_instrument(counter)
        try:
            for _ in range(FAST_STREAK - 1):  # the wait above reset the streak
                os.write(write_fd, b"x")
                assert await reader.read() == b"x"
        finally:
            trio.lowlevel.remove_instrument(counter)
        assert counter.steps == 0
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_a_read_past_its_deadline_raises_too_slow(
    autojump_clock: trio.testing.MockClock,
) -> None:
    read_fd, write_fd = nonblocking_pipe()
    try:
        with pytest.raises(trio.TooSlowError):
            await DirectReader(read_fd, 16).read(trio.current_time() + 30)
        assert trio.current_time() == pytest.approx(30)
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_cancellation_is_seen_before_reading_or_writing() -> None:
    read_fd, write_fd = nonblocking_pipe()
    try:
        os.write(write_fd, b"waiting")
        with trio.CancelScope() as scope:
            scope.cancel()
            await DirectReader(read_fd, 16).read()
        assert scope.cancelled_caught
        with trio.CancelScope() as scope:
            scope.cancel()
            await write_all(write_fd, [b"never"])
        assert scope.cancelled_caught
        assert os.read(read_fd, 64) == b"waiting"  # nothing taken, nothing added
    finally:
        os.close(read_fd)
        os.close(write_fd)


async def test_write_all_sends_every_piece_in_order_through_partial_writes() -> None:
    # 4 MB in 2,049 pieces (more than one writev takes) through a 64 KB pipe: writes end
    # part-way through pieces and resume there while the reader drains.
    read_fd, write_fd = nonblocking_pipe()
    pieces = [bytes([index % 251]) * (index % 4000 + 1) for index in range(2049)]
    received = bytearray()
    try:
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                reader = DirectReader(read_fd, 65536)
                while data := await reader.read():
                    received.extend(data)

            nursery.start_soon(drain)
            await write_all(write_fd, pieces)
            os.close(write_fd)
            write_fd = -1
        assert bytes(received) == b"".join(pieces)
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


async def test_a_write_nobody_takes_raises_too_slow_at_its_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    read_fd, write_fd = nonblocking_pipe()
    try:
        with pytest.raises(trio.TooSlowError):
            await write_all(write_fd, [b"x" * (1 << 20)] * 8, trio.current_time() + 30)
        assert trio.current_time() == pytest.approx(30)
    finally:
        os.close(read_fd)
        os.close(write_fd)
