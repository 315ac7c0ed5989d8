"""The daemon's send path: a batch of queued frames in one write (the same bytes), and the
relay's encoded frames reused only for the clients that take that form."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio
import trio.testing
from trio_websocket import ConnectionClosed, WebSocketConnection, wrap_client_stream
from wsproto.events import TextMessage

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
    same session still gets pi's whole ``message_update`` (partial message included)."""
    faux = FauxProvider([FauxReply(text="abcdefghijklmnopqrstuvwxyz", chunk_size=3)])
    async with running_daemon(tmp_path / "agent", faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as delta, connect(daemon, path) as full:
            await receive(delta)  # attached
            await receive(full)
            await send(full, {"id": "f", "type": "set_event_format", "updates": "full"})
            await until(full, is_response("f"))
            await send(delta, {"id": "p", "type": "prompt", "message": "go"})
            delta_frames = await until(delta, settled)
            full_frames = await until(full, settled)
    updates = [f for f in delta_frames if f["type"] == "message_update"]
    full_updates = [f for f in full_frames if f["type"] == "message_update"]
    assert len(updates) == len(full_updates) > 0
    assert all("message" not in f for f in updates)
    assert all("message" in f and "partial" in f["assistantMessageEvent"] for f in full_updates)
    assert (
        text_of_deltas(delta_frames) == text_of_deltas(full_frames) == "abcdefghijklmnopqrstuvwxyz"
    )
    assert [f["seq"] for f in updates] == [f["seq"] for f in full_updates]


class StepCounter(trio.abc.Instrument):
    """Counts the steps one task runs (a step begins at each of its schedule points)."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


async def steps_of(send: Callable[[], Awaitable[None]]) -> int:
    """How many times the current task is rescheduled while ``send`` runs."""
    counter = StepCounter(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(counter)
    try:
        await send()
    finally:
        trio.lowlevel.remove_instrument(counter)
    return counter.steps


async def test_a_send_on_a_free_connection_takes_one_schedule_point_less() -> None:
    """The stream lock, when free, is taken without a schedule point (issue 27): a frame costs
    the stream's own checkpoint only, where the library's send took one more for its lock."""
    async with trio.open_nursery() as nursery:
        server, client, _counting = await pair(nursery)
        await trio.testing.wait_all_tasks_blocked()
        ours = await steps_of(lambda: server.send_message("a"))
        await steps_of(lambda: server.send_messages(["b"]))
        # The library's way, with its own lock handling (the base class's ``_send``).
        original = WebSocketConnection._send

        async def library_send() -> None:
            await original(server, TextMessage(data="c"))

        library = await steps_of(library_send)
        assert ours == library - 1
        assert [await client.get_message() for _ in range(3)] == ["a", "b", "c"]
        nursery.cancel_scope.cancel()


async def test_a_held_lock_is_still_waited_for_in_order() -> None:
    """Sends racing for the stream go out whole and in the order they asked for the lock."""
    async with trio.open_nursery() as nursery:
        server, client, counting = await pair(nursery)
        await server._stream_lock.acquire()  # another writer holds the stream
        for text in ("one", "two", "three"):
            nursery.start_soon(server.send_messages, [text, text + "!"])
            await trio.testing.wait_all_tasks_blocked()
        counting.writes.clear()
        server._stream_lock.release()
        received = [await client.get_message() for _ in range(6)]
        assert received == ["one", "one!", "two", "two!", "three", "three!"]
        assert len(counting.writes) == 3
        nursery.cancel_scope.cancel()


async def test_a_broken_stream_still_reports_connection_closed() -> None:
    async with trio.open_nursery() as nursery:
        server, _client, counting = await pair(nursery)
        await counting.inner.aclose()
        with pytest.raises(ConnectionClosed):
            await server.send_message("lost")
        assert not server._stream_lock.locked()
        nursery.cancel_scope.cancel()
