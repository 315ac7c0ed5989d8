"""``pitrio acp --connect``'s link to a daemon session after a drop (:class:`Relink`): it
connects again from the last ``seq`` seen, sends again the commands whose answer was lost
(the same id), keeps an ``inProgress`` answer from the bridge and asks again, gives up
when the daemon refuses, and closes with the websocket close handshake completed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio.testing import (
    MemoryReceiveStream,
    MemorySendStream,
    memory_stream_one_way_pair,
    memory_stream_pump,
)
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    ConnectionRejected,
    WebSocketConnection,
    wrap_client_stream,
    wrap_server_stream,
)

from pitrio.transports.acp.relink import Relink
from tests.stray_cancel import no_stray_cancel


class FakeSocket:
    """One websocket connection, fed by the test; :meth:`drop` ends it as a network loss."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self._feed, self._frames = trio.open_memory_channel[str](100)
        self.dead = False

    async def send_message(self, message: str) -> None:
        if self.dead:
            raise ConnectionClosed(CloseReason(1006, "lost"))
        self.sent.append(json.loads(message))

    async def get_message(self) -> str:
        try:
            return await self._frames.receive()
        except trio.EndOfChannel:
            raise ConnectionClosed(CloseReason(1006, "lost")) from None

    async def aclose(self) -> None:
        self.drop()

    def feed(self, **frame: Any) -> None:
        self._feed.send_nowait(json.dumps(frame))

    def drop(self) -> None:
        self.dead = True
        self._feed.close()


class Daemon:
    """Hands out the sockets in order and records each connection's query."""

    def __init__(self, *sockets: FakeSocket | None) -> None:
        self.sockets = list(sockets)
        self.queries: list[str] = []
        self.connected = trio.Event()

    @asynccontextmanager
    async def connect(self, query: str) -> AsyncIterator[FakeSocket]:
        self.queries.append(query)
        socket = self.sockets.pop(0)
        if socket is None:
            raise ConnectionRejected(404, (), b"no such session")
        self.connected.set()
        self.connected = trio.Event()
        yield socket


async def _frame(link: Relink) -> dict[str, Any]:
    with trio.fail_after(5):
        frame: dict[str, Any] = json.loads(await link.get_message())
        return frame


async def test_a_dropped_link_resumes_from_the_last_seq_and_resends_unanswered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    one, two = FakeSocket(), FakeSocket()
    daemon = Daemon(one, two)
    link = Relink(daemon.connect)
    async with trio.open_nursery() as nursery:
        one.feed(type="attached", seq=3, stream="s1")
        await nursery.start(link.run)
        assert (await _frame(link))["type"] == "attached"
        await link.send_message(json.dumps({"type": "prompt", "id": "p", "message": "hi"}))
        await link.send_message(json.dumps({"type": "get_state", "id": "g"}))
        one.feed(type="response", id="g", success=True)
        one.feed(type="agent_start", seq=4)
        assert (await _frame(link))["id"] == "g"
        assert (await _frame(link))["seq"] == 4
        one.drop()  # the prompt's answer went down with it
        await link.send_message(  # a dialog's answer during the gap: sent on the next one
            json.dumps({"type": "extension_ui_response", "id": "d", "value": "x"})
        )
        two.feed(type="attached", seq=9, stream="s1")
        two.feed(type="message_start", seq=5)
        # The daemon was still applying the resent prompt: that answer is not the prompt's.
        two.feed(type="response", id="p", success=False, inProgress=True)
        assert (await _frame(link))["seq"] == 5  # the replay; the second attached is kept back
        await trio.sleep(1)
        two.feed(type="response", id="p", success=True)
        answer = await _frame(link)
        assert (answer["id"], answer["success"]) == ("p", True)
        assert link.reconnects == 1
        await link.aclose()
    assert daemon.queries == ["", "?since=4&stream=s1"]
    assert [m["type"] for m in one.sent] == ["prompt", "get_state"]
    assert [(m["type"], m["id"]) for m in two.sent] == [
        ("prompt", "p"),
        ("extension_ui_response", "d"),
        ("prompt", "p"),  # asked again after the inProgress answer
    ]


async def _lost_for_good(link: Relink, socket: FakeSocket, seq: int) -> None:
    """Attach, drop the connection: the link must end (``ConnectionClosed`` to the bridge)."""
    async with trio.open_nursery() as nursery:
        socket.feed(type="attached", seq=seq, stream="s")
        await nursery.start(link.run)
        await _frame(link)
        socket.drop()
        with pytest.raises(ConnectionClosed):
            await _frame(link)


async def test_a_refused_reconnect_ends_the_link(autojump_clock: trio.testing.MockClock) -> None:
    one = FakeSocket()
    daemon = Daemon(one, None)
    await _lost_for_good(Relink(daemon.connect), one, 0)
    assert daemon.queries == ["", "?since=0&stream=s"]  # refused: not tried again


async def test_a_daemon_gone_for_good_ends_the_link_after_the_tries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    one = FakeSocket()
    tries: list[str] = []

    @asynccontextmanager
    async def connect(query: str) -> AsyncIterator[FakeSocket]:
        tries.append(query)
        if len(tries) > 1:
            raise OSError("connection refused")
        yield one

    await _lost_for_good(Relink(connect), one, 2)
    assert tries == ["", *["?since=2&stream=s"] * 5]


class WireDaemon:
    """A daemon's session endpoint speaking real websocket frames (trio-websocket at both
    ends) over in-memory streams, whose bytes to the client the test can hold in transit."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self.nursery = nursery
        self.close_codes: list[int] = []
        self._down: tuple[MemorySendStream, MemoryReceiveStream] | None = None
        self._hooks: tuple[Any, Any] = (None, None)

    @asynccontextmanager
    async def connect(self, query: str) -> AsyncIterator[WebSocketConnection]:
        """As ``open_websocket_url``: the connection's reader runs in the block's nursery (a
        block left with an exception cancels it), leaving the block closes the socket, and
        the block's exception comes out alone."""
        up, from_client = memory_stream_one_way_pair()
        to_client, down = self._down = memory_stream_one_way_pair()
        self.nursery.start_soon(self._serve, trio.StapledStream(to_client, from_client))
        try:
            async with trio.open_nursery() as nursery:
                ws = await wrap_client_stream(
                    nursery, trio.StapledStream(up, down), "daemon", f"/v1/sessions/s{query}"
                )
                try:
                    with no_stray_cancel():
                        yield ws
                finally:
                    await ws.aclose()
        except BaseExceptionGroup as group:  # the library raises the block's own exception
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    async def _serve(self, stream: trio.StapledStream[Any, Any]) -> None:
        async with trio.open_nursery() as nursery:
            ws = await (await wrap_server_stream(nursery, stream)).accept()
            await ws.send_message(json.dumps({"type": "attached", "seq": 0, "stream": "s"}))
            try:
                while True:
                    await ws.get_message()
            except ConnectionClosed as exc:
                self.close_codes.append(exc.reason.code)

    def hold(self) -> None:
        """From now on the daemon's bytes (and the end of its stream) stay in transit."""
        assert self._down is not None
        sent = self._down[0]
        self._hooks = (sent.send_all_hook, sent.close_hook)
        sent.send_all_hook = sent.close_hook = None

    def release(self) -> None:
        """Deliver what was held (the bytes, then the end), and let the bytes flow again."""
        assert self._down is not None
        sent, received = self._down
        sent.send_all_hook, sent.close_hook = self._hooks
        memory_stream_pump(sent, received)
        memory_stream_pump(sent, received)  # the end, once the daemon has closed


async def test_closing_waits_for_the_daemons_answer_to_the_close_frame(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with trio.open_nursery() as nursery:
        daemon = WireDaemon(nursery)
        link = Relink(daemon.connect)
        await nursery.start(link.run)
        assert (await _frame(link))["type"] == "attached"
        daemon.hold()  # the daemon's answer to the close frame takes a while to arrive
        closed = trio.Event()

        async def close() -> None:
            await link.aclose()
            closed.set()

        nursery.start_soon(close)
        await trio.testing.wait_all_tasks_blocked()
        daemon.release()
        # The answer arrived: the close ends (before, the socket's reader had been cancelled
        # by then and the close waited for ever; the autojump clock makes that fail at once).
        with trio.fail_after(5):
            await closed.wait()
        with pytest.raises(ConnectionClosed):
            await link.get_message()
    assert daemon.close_codes == [1000]
