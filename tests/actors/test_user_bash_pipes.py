"""The user's ``bash`` reads stdout and stderr on pipes of their own, as pi 1.6.0 (issue 33).

Orders are forced, never slept for: what is written to a pipe before the reader looks is
waiting there (a kernel fact), and a write made only after the reader handed over the previous
chunk (received on a channel) is separated in time from it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from pitrio.actors.session.user_bash import PipeTexts, read_pipes, run_user_bash

Chunk = tuple[int, bytes]


@contextmanager
def two_pipes() -> Iterator[tuple[list[int], list[int]]]:
    """Two pipes: their non-blocking read ends (stdout, stderr) and their write ends."""
    pairs = [os.pipe() for _ in range(2)]
    reads = [r for r, _ in pairs]
    writes = [w for _, w in pairs]
    for fd in reads:
        os.set_blocking(fd, False)
    try:
        yield reads, writes
    finally:
        for fd in reads + writes:
            with contextlib.suppress(OSError):  # a write end the test closed already
                os.close(fd)


async def _collect(reads: list[int], send: trio.MemorySendChannel[Chunk]) -> None:
    async with send:

        async def on_data(index: int, data: bytes) -> None:
            await send.send((index, data))

        await read_pipes(reads, on_data)


async def test_output_waiting_on_both_pipes_is_taken_stdout_first() -> None:
    with two_pipes() as (reads, writes):
        # stderr written first, but both are waiting when the reader first looks: one round
        # takes stdout's chunk, then stderr's (pi's readers see them in that order too).
        os.write(writes[1], b"oops\n")
        os.write(writes[0], b"hello\n")
        for fd in writes:
            os.close(fd)
        send, receive = trio.open_memory_channel[Chunk](10)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, reads, send)
            got = [chunk async for chunk in receive]
    assert got == [(0, b"hello\n"), (1, b"oops\n")]


async def test_writes_separated_in_time_keep_the_order_they_were_made() -> None:
    with two_pipes() as (reads, writes):
        send, receive = trio.open_memory_channel[Chunk](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_collect, reads, send)
            # stderr, stdout, stderr again: each written only once the previous chunk was
            # handed over, so the reader is waiting on both pipes each time.
            os.write(writes[1], b"first\n")
            assert await receive.receive() == (1, b"first\n")
            os.write(writes[0], b"second\n")
            assert await receive.receive() == (0, b"second\n")
            os.write(writes[1], b"third\n")
            assert await receive.receive() == (1, b"third\n")
            os.close(writes[0])  # one pipe ends; the other is still read
            os.write(writes[1], b"last\n")
            assert await receive.receive() == (1, b"last\n")
            os.close(writes[1])
            assert [chunk async for chunk in receive] == []  # both ended: the reader returns


async def test_a_cancelled_reader_stops_waiting() -> None:
    with two_pipes() as (reads, _writes):
        with trio.move_on_after(0) as scope:  # nothing is ever written
            await read_pipes(reads, _never)
    assert scope.cancelled_caught


async def _never(index: int, data: bytes) -> None:
    raise AssertionError(f"no data was written, got {index}: {data!r}")


def test_each_pipe_has_its_own_decoder() -> None:
    # "é" is 0xC3 0xA9: split between two reads of stdout, with stderr's output in between.
    # One decoder shared by both pipes would give U+FFFD and lose the character.
    texts = PipeTexts(2)
    assert texts.decode(0, b"caf\xc3") == "caf"
    assert texts.decode(1, b"warn\xe2\x82") == "warn"  # half a euro sign on stderr
    assert texts.decode(0, b"\xa9\n") == "é\n"
    assert texts.decode(1, b"\xac\n") == "€\n"
    assert texts.decode(0, b"\xf0\x9f") == ""
    assert texts.finish() == ["\ufffd", ""]  # stdout's cut-off character, then stderr's


async def test_user_bash_streams_stdout_and_stderr_chunks_in_the_commands_order(
    tmp_path: Path,
) -> None:
    # hello is written before oops: when oops is waiting, hello is waiting or already taken,
    # so the reader gives hello first, each as a chunk of its own (pi 1.6.0's two updates).
    chunks: list[str] = []

    async def on_chunk(text: str) -> None:
        chunks.append(text)

    result = await run_user_bash("echo hello; echo oops >&2", str(tmp_path), on_chunk=on_chunk)
    assert chunks == ["hello\n", "oops\n"]
    assert (result.output, result.exit_code, result.cancelled) == ("hello\noops\n", 0, False)
