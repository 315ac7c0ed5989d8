"""The RPC writer (:mod:`pitrio.transports.rpc.output`): streamed lines are made as written."""

from __future__ import annotations

from collections.abc import Iterator

import trio

from pitrio.transports.rpc.output import RpcOutput
from pitrio.transports.rpc.protocol import StreamedPieces


class Recorder(trio.abc.SendStream):
    """A send stream recording each write, and what the line's producer had made by then."""

    def __init__(self, made: list[bytes]) -> None:
        self.made = made
        self.writes: list[tuple[bytes, int]] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint()
        self.writes.append((bytes(data), len(self.made)))

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()


async def test_a_streamed_line_is_made_piece_by_piece_as_it_is_written() -> None:
    # get_messages of a long session (issue 38): holding the whole 17 MB reply was the peak
    # of a resume's memory. Each piece must be written before the next one is made.
    made: list[bytes] = []

    def pieces() -> Iterator[bytes]:
        for piece in (b"[", b"1", b",2", b"]\n"):
            made.append(piece)
            yield piece

    stream = Recorder(made)
    output = RpcOutput(stream)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(output.run)
        await output.send(b"before\n")
        await output.send(StreamedPieces(pieces()))
        await output.send(b"after\n")
        await output.close()
    assert b"".join(data for data, _ in stream.writes) == b"before\n[1,2]\nafter\n"
    streamed = [(data, count) for data, count in stream.writes if data in (b"[", b"1", b",2")]
    assert streamed == [(b"[", 1), (b"1", 2), (b",2", 3)]


async def test_a_streamed_line_is_dropped_unmade_once_the_output_is_broken() -> None:
    made: list[bytes] = []

    def pieces() -> Iterator[bytes]:
        made.append(b"x")
        yield b"x\n"

    class Broken(Recorder):
        async def send_all(self, data: bytes | bytearray | memoryview) -> None:
            await trio.lowlevel.checkpoint()
            raise trio.BrokenResourceError

    output = RpcOutput(Broken(made))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(output.run)
        await output.send(b"first\n")
        await output.broken.wait()
        await output.send(StreamedPieces(pieces()))
        await output.close()
    assert made == []
