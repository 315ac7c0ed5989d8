"""Direct reads and writes of non-blocking descriptors: no task switch unless they must wait."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import trio
import trio.testing

from pitrio.actors.direct_io import FAST_STREAK, DirectReader, receiver, write_all


class StepCounter(trio.abc.Instrument):
    """Counts the scheduling steps of one task (each resumption after a yield is one)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


@contextmanager
def counting_steps() -> Iterator[StepCounter]:
    """Count the current task's scheduling steps inside the block."""
    counter = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        yield counter
    finally:
        trio.lowlevel.remove_instrument(counter)


class Pipe:
    """A non-blocking pipe whose ends are closed at the test's end unless closed before."""

    def __init__(self) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        os.set_blocking(self.write_fd, False)
        self._open = {self.read_fd, self.write_fd}

    def close_write(self) -> None:
        """Close the write end: the reader sees the end of the data."""
        os.close(self.write_fd)
        self._open.discard(self.write_fd)

    def close(self) -> None:
        for fd in self._open:
            os.close(fd)
        self._open.clear()


@pytest.fixture
def pipe() -> Iterator[Pipe]:
    made = Pipe()
    yield made
    made.close()


async def test_waiting_bytes_are_read_without_a_task_switch_but_a_long_streak_yields(
    pipe: Pipe,
) -> None:
    # trio's FdStream yields before every read: a task step per read even when data waits.
    reader = DirectReader(pipe.read_fd, 1024)
    with counting_steps() as counter:
        for count in range(1, FAST_STREAK + 1):
            os.write(pipe.write_fd, b"line %d\n" % count)
            assert await reader.read() == b"line %d\n" % count
            # Only the streak's last read yields.
            assert counter.steps == (1 if count == FAST_STREAK else 0)
    pipe.close_write()
    assert await reader.read() == b""  # the end


async def test_a_read_waits_for_data_and_a_wait_restarts_the_streak(pipe: Pipe) -> None:
    reader = DirectReader(pipe.read_fd, 1024)
    async with trio.open_nursery() as nursery:

        async def later() -> None:
            await trio.testing.wait_all_tasks_blocked()
            os.write(pipe.write_fd, b"late")

        nursery.start_soon(later)
        assert await reader.read() == b"late"
    with counting_steps() as counter:
        for _ in range(FAST_STREAK - 1):  # the wait above reset the streak
            os.write(pipe.write_fd, b"x")
            assert await reader.read() == b"x"
    assert counter.steps == 0


async def test_a_read_past_its_deadline_raises_too_slow(
    pipe: Pipe, autojump_clock: trio.testing.MockClock
) -> None:
    with pytest.raises(trio.TooSlowError):
        await DirectReader(pipe.read_fd, 16).read(trio.current_time() + 30)
    assert trio.current_time() == pytest.approx(30)


async def test_cancellation_is_seen_before_reading_or_writing(pipe: Pipe) -> None:
    os.write(pipe.write_fd, b"waiting")
    with trio.CancelScope() as scope:
        scope.cancel()
        await DirectReader(pipe.read_fd, 16).read()
    assert scope.cancelled_caught
    with trio.CancelScope() as scope:
        scope.cancel()
        await write_all(pipe.write_fd, [b"never"])
    assert scope.cancelled_caught
    assert os.read(pipe.read_fd, 64) == b"waiting"  # nothing taken, nothing added


async def test_write_all_sends_every_piece_in_order_through_partial_writes(pipe: Pipe) -> None:
    # 4 MB in 2,049 pieces (more than one writev takes) through a 64 KB pipe: writes end
    # part-way through pieces and resume there while the reader drains.
    pieces = [bytes([index % 251]) * (index % 4000 + 1) for index in range(2049)]
    received = bytearray()
    async with trio.open_nursery() as nursery:

        async def drain() -> None:
            reader = DirectReader(pipe.read_fd, 65536)
            while data := await reader.read():
                received.extend(data)

        nursery.start_soon(drain)
        await write_all(pipe.write_fd, pieces)
        pipe.close_write()
    assert bytes(received) == b"".join(pieces)


async def test_a_write_nobody_takes_raises_too_slow_at_its_deadline(
    pipe: Pipe, autojump_clock: trio.testing.MockClock
) -> None:
    with pytest.raises(trio.TooSlowError):
        await write_all(pipe.write_fd, [b"x" * (1 << 20)] * 8, trio.current_time() + 30)
    assert trio.current_time() == pytest.approx(30)


async def test_a_receiver_reads_a_pipe_directly_and_any_other_stream_through_the_stream(
    pipe: Pipe,
) -> None:
    # Nothing else holds the stream: the receiver must (collected, it closes its descriptor).
    direct = receiver(trio.lowlevel.FdStream(os.dup(pipe.read_fd)), 1024)
    os.write(pipe.write_fd, b"waiting")
    with counting_steps() as counter:
        assert await direct() == b"waiting"
    assert counter.steps == 0  # FdStream.receive_some would have yielded first

    send, receive = trio.testing.memory_stream_pair()
    through = receiver(receive, 4)
    await send.send_all(b"abcdef")
    assert await through() == b"abcd"  # the size holds, and bytes come back, not a bytearray
    assert type(await through()) is bytes
