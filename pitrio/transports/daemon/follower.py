"""A client of a session that another daemon runs (a shared ``--store``): told, then fed.

Decision (``DESIGN-NOTES.md``, "PostgreSQL store"): a daemon does not proxy commands to the
session's owner; it tells the client which daemon owns the session (``owner``, ``url``) and,
while the client stays, forwards the session's entries as the owner commits them
(``entry_appended`` with the entry's sequence number ``entrySeq``), read from the database
by sequence number. Commands are answered with an error naming the owner. A client that
wants to drive the session connects to ``url``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from typing import Any, Protocol

import orjson
import trio
from trio_websocket import WebSocketConnection

from pitrio.errors import PitrioError
from pitrio.sdk.host import HostedSession, SessionOwnedElsewhereError
from pitrio.transports.daemon.frames import safe_json_frame
from pitrio.transports.rpc.protocol import MISSING, Request

log = logging.getLogger("pitrio.daemon")

OUTGOING = 256


class FollowingSocket(Protocol):
    """What the follower needs of a connection (a ``sockets`` endpoint is one)."""

    ws: WebSocketConnection
    scope: trio.CancelScope
    """Cancelled when the connection ends."""

    async def close(self, code: int, reason: str) -> None:
        """Close the websocket with ``code`` and ``reason``."""
        ...

    async def next_request(self, push: Callable[[dict[str, Any]], None]) -> Request | None:
        """The next well-formed command, or ``None`` once the socket closed."""
        ...


def entry_frame(session_id: str, seq: int, raw: bytes) -> str:
    """An ``entry_appended`` frame around the entry's stored JSON (not re-encoded)."""
    head = orjson.dumps({"type": "entry_appended", "sessionId": session_id, "entrySeq": seq})
    return (head[:-1] + b',"entry":' + raw + b"}").decode("utf-8")


async def follow_elsewhere(
    socket: FollowingSocket, hosted: HostedSession, moved: SessionOwnedElsewhereError
) -> None:
    """Serve ``socket`` as a follower of ``hosted`` (see the module doc) until it closes."""
    store = hosted.store
    if store is None:  # only a shared store has other owners
        await socket.close(1011, str(moved))
        return
    try:
        last = await store.last_seq(hosted.id)
    except PitrioError as exc:
        await socket.close(1011, str(exc))
        return
    send, receive = trio.open_memory_channel[str](OUTGOING)
    notice = {
        "type": "session_owned_elsewhere",
        "sessionId": hosted.id,
        "owner": moved.owner,
        "url": moved.url,
        "reason": str(moved),
        "entrySeq": last,
    }
    send.send_nowait(orjson.dumps(notice).decode())

    async def writer() -> None:
        async for text in receive:
            await socket.ws.send_message(text)

    async def entries() -> None:
        async with store.watch(hosted.id, last) as watched:
            async for entry in watched:
                await send.send(entry_frame(hosted.id, entry.seq, entry.raw))

    async def commands() -> None:
        def push(payload: dict[str, object]) -> None:
            # A client that does not read loses its own answers, nothing else.
            with contextlib.suppress(trio.WouldBlock):
                send.send_nowait(safe_json_frame(payload).decode())

        while (request := await socket.next_request(push)) is not None:
            push(
                {
                    "type": "response",
                    **({} if request.id is MISSING else {"id": request.id}),
                    "command": request.type,
                    "success": False,
                    "error": f"{moved}: connect there to send commands",
                }
            )

    try:
        with socket.scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(writer)
                nursery.start_soon(entries)
                await commands()
                nursery.cancel_scope.cancel()
    except Exception as exc:  # the socket broke under us: nothing left to tell the client
        log.info("follower of %s ended: %s", hosted.id, exc)
    finally:
        with trio.CancelScope(shield=True):
            await socket.close(1000, "")
