"""The daemon's websocket writes a batch of queued frames with one write, as the same bytes."""

from __future__ import annotations

import trio
import trio.testing
from trio_websocket import WebSocketConnection, wrap_client_stream

from pitrio.transports.daemon.websocket import DaemonWebSocket, wrap_server_stream


class CountingStream(trio.abc.Stream):
    """A stream that records every ``send_all`` it passes on."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner
        self.writes: list[bytes] = []

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def pair(
    nursery: trio.Nursery,
) -> tuple[DaemonWebSocket, WebSocketConnection, CountingStream]:
    client_stream, server_stream = trio.testing.memory_stream_pair()
    counting = CountingStream(server_stream)
    opened: list[WebSocketConnection] = []
    done = trio.Event()

    async def open_client() -> None:
        opened.append(await wrap_client_stream(nursery, client_stream, "127.0.0.1", "/"))
        done.set()

    nursery.start_soon(open_client)
    request = await wrap_server_stream(nursery, counting, max_message_size=1 << 20, close_timeout=1)
    server = await request.accept()
    await done.wait()
    assert isinstance(server, DaemonWebSocket)
    return server, opened[0], counting


async def test_a_batch_is_one_write_of_the_frames_one_send_each_would_write() -> None:
    messages = ['{"a":1}', '{"b":"é"}', "x" * 300]  # a 16-bit length and a non-ASCII frame
    async with trio.open_nursery() as nursery:
        server, client, counting = await pair(nursery)
        counting.writes.clear()
        await server.send_messages(messages)
        batched = counting.writes
        counting.writes = []
        assert len(batched) == 1
        for message in messages:
            await server.send_message(message)
        assert batched[0] == b"".join(counting.writes)  # the same bytes on the wire
        received = [await client.get_message() for _ in range(2 * len(messages))]
        assert received == messages + messages
        nursery.cancel_scope.cancel()


async def test_a_batch_of_one_is_a_plain_send() -> None:
    async with trio.open_nursery() as nursery:
        server, client, counting = await pair(nursery)
        counting.writes.clear()
        await server.send_messages(["only"])
        assert len(counting.writes) == 1
        assert await client.get_message() == "only"
        nursery.cancel_scope.cancel()
