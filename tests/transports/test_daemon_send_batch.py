"""The daemon's send path: a batch of queued frames in one write (the same bytes), and the
relay's encoded frames reused only for the clients that take that form."""

from __future__ import annotations

import socket
from pathlib import Path

import trio
import trio.testing
from trio_websocket import WebSocketConnection, wrap_client_stream

from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.transports.daemon.websocket import DaemonWebSocket, wrap_server_stream
from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    settled,
    text_of_deltas,
    until,
)


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


async def test_delta_and_full_clients_of_one_session_each_get_their_form(tmp_path: Path) -> None:
    """The relay's encoded frame is reused for delta clients only: a ``full`` client of the
    same session still gets pi 1.6.0's ``message_update`` (with the usage so far)."""
    faux = FauxProvider([FauxReply(text="abcdefghijklmnopqrstuvwxyz", chunk_size=3)])
    async with running_daemon(tmp_path / "agent", faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as delta, connect(daemon, path) as full:
            await receive(delta)  # attached
            await receive(full)
            await send(full, {"id": "f", "type": "set_event_format", "updates": "full"})
            await until(full, is_response("f"))
            await send(full, {"id": "e", "type": "set_event_format", "entries": "pi"})
            [*_, refused] = await until(full, is_response("e"))
            await send(delta, {"id": "p", "type": "prompt", "message": "go"})
            delta_frames = await until(delta, settled)
            full_frames = await until(full, settled)
    updates = [f for f in delta_frames if f["type"] == "message_update"]
    full_updates = [f for f in full_frames if f["type"] == "message_update"]
    assert len(updates) == len(full_updates) > 0
    assert all("message" not in f and "usage" not in f for f in updates)
    # pi 1.6.0's full form: the usage so far and the event without its partial message.
    assert all(
        "message" not in f and "usage" in f and "partial" not in f["assistantMessageEvent"]
        for f in full_updates
    )
    assert refused["success"] is False
    assert refused["error"].startswith('The daemon announces every entry (entries "all")')
    assert (
        text_of_deltas(delta_frames) == text_of_deltas(full_frames) == "abcdefghijklmnopqrstuvwxyz"
    )
    assert [f["seq"] for f in updates] == [f["seq"] for f in full_updates]


async def socket_pair(
    nursery: trio.Nursery, *, send_buffer: int | None = None
) -> tuple[DaemonWebSocket, WebSocketConnection, socket.socket]:
    """A daemon websocket on a real (Unix) socket, as ``write_now`` needs, and its client."""
    server_sock, client_sock = socket.socketpair()
    if send_buffer is not None:
        server_sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    server_stream = trio.SocketStream(trio.socket.from_stdlib_socket(server_sock))
    client_stream = trio.SocketStream(trio.socket.from_stdlib_socket(client_sock))
    opened: list[WebSocketConnection] = []
    done = trio.Event()

    async def open_client() -> None:
        opened.append(await wrap_client_stream(nursery, client_stream, "127.0.0.1", "/"))
        done.set()

    nursery.start_soon(open_client)
    request = await wrap_server_stream(
        nursery, server_stream, max_message_size=1 << 24, close_timeout=1
    )
    server = await request.accept()
    await done.wait()
    assert isinstance(server, DaemonWebSocket)
    return server, opened[0], client_sock


async def test_a_lone_frame_is_written_at_once() -> None:
    """``send_frame_now`` writes in the call, with no checkpoint: the peer's socket holds the
    frame before the caller yields (a lone delta waits for nothing)."""
    async with trio.open_nursery() as nursery:
        server, client, client_sock = await socket_pair(nursery)
        await trio.testing.wait_all_tasks_blocked()  # the client's reader waits on the socket
        before = trio.lowlevel.current_statistics().tasks_runnable
        assert server.send_frame_now(b'{"delta":"x"}')
        assert not server.unsent
        assert trio.lowlevel.current_statistics().tasks_runnable == before  # nothing ran
        waiting = client_sock.recv(64, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        assert waiting == b"\x81\x0d" + b'{"delta":"x"}'  # on the wire already, one frame
        assert await client.get_message() == '{"delta":"x"}'
        nursery.cancel_scope.cancel()


async def test_no_frame_is_written_now_while_another_write_holds_the_stream() -> None:
    async with trio.open_nursery() as nursery:
        server, client, _ = await socket_pair(nursery)
        release = trio.Event()

        async def hold() -> None:  # another writer, e.g. the reader answering a ping
            async with server._stream_lock:
                await release.wait()

        nursery.start_soon(hold)
        await trio.testing.wait_all_tasks_blocked()
        assert not server.send_frame_now(b'{"a":1}')
        release.set()
        await server.send_frames([b'{"b":2}'])
        assert await client.get_message() == '{"b":2}'  # nothing else went out
        nursery.cancel_scope.cancel()


async def test_the_unsent_end_of_a_frame_goes_before_anything_else() -> None:
    """A frame bigger than the socket takes is written in part; its end goes before the next
    frames and before a ping (trio-websocket's own writes), so the peer reads each whole."""
    big = b'"' + b"x" * 600_000 + b'"'
    async with trio.open_nursery() as nursery:
        server, client, _ = await socket_pair(nursery, send_buffer=16_384)
        assert server.send_frame_now(big)
        assert server.unsent  # the socket took the start only
        received: list[str] = []
        both = trio.Event()

        async def read() -> None:
            received.extend([await client.get_message() for _ in range(2)])
            both.set()

        nursery.start_soon(server.ping, b"p")  # takes the stream first, waits for room
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(read)
        await server.send_frames([b'"next"'])
        await both.wait()
        assert received == [big.decode(), '"next"']
        assert not server.unsent
        nursery.cancel_scope.cancel()


async def test_flush_writes_the_unsent_end() -> None:
    big = b'"' + b"y" * 600_000 + b'"'
    async with trio.open_nursery() as nursery:
        server, client, _ = await socket_pair(nursery, send_buffer=16_384)
        assert server.send_frame_now(big)
        assert server.unsent
        assert not server.send_frame_now(b'"later"')  # never after an unsent end
        nursery.start_soon(server.flush)
        assert await client.get_message() == big.decode()
        nursery.cancel_scope.cancel()
