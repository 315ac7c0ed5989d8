"""``pitrio acp --connect``'s link to a daemon session after a drop (:class:`Relink`): it
connects again from the last ``seq`` seen, sends again the commands whose answer was lost
(the same id), keeps an ``inProgress`` answer from the bridge and asks again, and gives up
when the daemon refuses."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from trio_websocket import CloseReason, ConnectionClosed, ConnectionRejected

from pitrio.transports.acp.relink import Relink


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
