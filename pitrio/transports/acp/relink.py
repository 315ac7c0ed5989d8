"""A daemon session's link that comes back after a drop (``pitrio acp --connect``).

:class:`Relink` is a :class:`~pitrio.transports.acp.bridge.Link` over the daemon's session
websocket. When the connection drops (not closed by us) it connects again with
``?since=<last seq>&stream=<epoch>``, as ``pitrio attach`` does: the daemon replays the events
after the last one seen, so the bridge (and the editor) see each event once and in order.
Commands whose response went down with the old connection are sent again with the same id;
the daemon applies an id once, so a command that had arrived is answered, not run again. A
repeat that the daemon is still applying is answered ``inProgress``; that answer is not the
command's, so it is kept from the bridge and the command asked again a moment later.

A link that cannot come back (the daemon refuses, or :data:`RECONNECTS` tries fail) ends as a
closed connection would: the bridge fails what waits and the ACP session ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import orjson
import trio
from trio_websocket import CloseReason, ConnectionClosed, ConnectionRejected, HandshakeError

RECONNECTS = 5
"""Tries to connect again after a drop, before the session is given up."""
BACKOFF = 0.2
"""Seconds before the n-th try: ``n * BACKOFF``."""
RETRY_IN_PROGRESS = 0.2
"""Seconds before asking again for a command the daemon was still applying."""
INBOX = 64
"""Frames read and not yet taken by the bridge (the reader waits when full: backpressure
reaches the daemon, which handles slow clients)."""


class Socket(Protocol):
    """What :class:`Relink` uses of a websocket."""

    async def send_message(self, message: str) -> None:
        """Send a text frame."""

    async def get_message(self) -> str | bytes:
        """The next frame (``ConnectionClosed`` at the end)."""

    async def aclose(self) -> None:
        """Close."""


Connect = Callable[[str], AbstractAsyncContextManager[Socket]]
"""Opens the session websocket with a query string (``""`` or ``?since=..&stream=..``)."""


def _ended() -> ConnectionClosed:
    return ConnectionClosed(CloseReason(1000, "the link to the daemon has ended"))


class Relink:
    """The session websocket, connected again after drops (run :meth:`run` in a nursery)."""

    def __init__(self, connect: Connect) -> None:
        self._connect = connect
        self._socket: Socket | None = None
        self._scope: trio.CancelScope | None = None
        """The current connection's serving (or the wait before the next try): cancelled by
        :meth:`aclose`, so :meth:`run` leaves the connection's block normally and the
        connection closes itself, close handshake included."""
        self._running = False
        self._ended = trio.Event()
        """Set when :meth:`run` has returned (its connection closed, the inbox too)."""
        self._send_inbox, self._inbox = trio.open_memory_channel[str | bytes](INBOX)
        self._unanswered: dict[str, str] = {}
        """Commands sent, by id, whose response has not come: sent again after a drop."""
        self._later: list[str] = []
        """Lines without a response (dialog answers) that found no connection."""
        self._closing = False
        self.last_seq = 0
        self.stream: str | None = None
        self.reconnects = 0
        """Connections made again after a drop (for tests and logs)."""

    def _stoppable(self) -> trio.CancelScope:
        """A scope :meth:`aclose` cancels (cancelled already when the link is closing)."""
        scope = self._scope = trio.CancelScope()
        if self._closing:
            scope.cancel()
        return scope

    # -- the Link side (the bridge) -----------------------------------------------------------

    async def send_message(self, message: str) -> None:
        """Send a line; one that needs a response is kept until it comes (and sent again on
        the next connection if this one drops first)."""
        command = orjson.loads(message)
        request_id = command.get("id") if command.get("type") != "extension_ui_response" else None
        if isinstance(request_id, str):
            self._unanswered[request_id] = message
        if self._closing:
            raise _ended()
        socket = self._socket
        try:
            if socket is None:
                raise _ended()
            await socket.send_message(message)
        except ConnectionClosed:
            if self._closing:
                raise
            if not isinstance(request_id, str):
                self._later.append(message)  # the next connection sends it

    async def get_message(self) -> str | bytes:
        """The next frame of the session (``ConnectionClosed`` once the link has ended)."""
        try:
            return await self._inbox.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise _ended() from None

    async def aclose(self) -> None:
        """End the link (no reconnect); returns once :meth:`run` has closed the connection.

        The connection is closed by the task that opened it, by leaving its block: closing
        the socket from here instead raced that task, which then left the block with
        ``ConnectionClosed``, cancelling the socket's reader before the daemon's answer to
        the close frame arrived, and this close waited for that answer for ever (the ACP
        process's exit waited out the shutdown bound, 15 s)."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        if self._running:
            await self._ended.wait()

    # -- the connections -----------------------------------------------------------------------

    def _query(self) -> str:
        return f"?since={self.last_seq}&stream={self.stream}" if self.stream else ""

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect (the first connection's failure is raised), then keep the link up until
        :meth:`aclose` or the tries run out."""
        self._running = True
        try:
            async with self._send_inbox, trio.open_nursery() as helpers:
                try:
                    await self._keep_up(helpers, task_status)
                finally:
                    helpers.cancel_scope.cancel()  # a command asked again: no link to ask on
        finally:
            self._ended.set()

    async def _keep_up(self, helpers: trio.Nursery, task_status: trio.TaskStatus[None]) -> None:
        failures, first = 0, True
        while not self._closing:
            try:
                async with self._connect("" if first else self._query()) as socket:
                    # Cancelled by aclose: the block ends normally and the connection's own
                    # exit sends the close frame and waits for the daemon's answer.
                    with self._stoppable():
                        attached = await socket.get_message()
                        if first:  # where this client starts; a resume's replay follows
                            self._take(attached, helpers)
                            await self._send_inbox.send(attached)
                            task_status.started()
                        else:
                            self.reconnects += 1
                            self._restarted(attached)
                        first, failures = False, 0
                        await self._serve(socket, helpers)
            except ConnectionRejected:
                if first:
                    raise
                return  # the session is gone or the token refused: no coming back
            except (ConnectionClosed, HandshakeError, OSError):
                if first:
                    raise
            finally:
                self._socket = None
            if self._closing:
                return
            failures += 1
            if failures > RECONNECTS:
                return
            with self._stoppable():
                await trio.sleep(BACKOFF * failures)

    async def _serve(self, socket: Socket, helpers: trio.Nursery) -> None:
        """Send what waits, then read frames into the inbox until the connection ends."""
        self._socket = socket
        for line in [*self._unanswered.values(), *self._later]:
            await socket.send_message(line)
        self._later.clear()
        while True:
            frame = await socket.get_message()
            if self._take(frame, helpers):
                await self._send_inbox.send(frame)

    def _take(self, frame: str | bytes, helpers: trio.Nursery) -> bool:
        """Note a frame's ``seq`` and answered id; ``False``: keep it from the bridge."""
        try:
            parsed: Any = orjson.loads(frame)
        except orjson.JSONDecodeError:
            return True
        if not isinstance(parsed, dict):
            return True
        kind, seq = parsed.get("type"), parsed.get("seq")
        if kind == "attached":
            if isinstance(parsed.get("stream"), str):
                self.stream = parsed["stream"]
            if isinstance(seq, int):
                self.last_seq = max(self.last_seq, seq)
            return True
        if kind != "response":
            if isinstance(seq, int):
                self.last_seq = max(self.last_seq, seq)
            return True
        request_id = parsed.get("id")
        if not isinstance(request_id, str):
            return True
        if parsed.get("inProgress") and request_id in self._unanswered:
            helpers.start_soon(self._ask_again, request_id)
            return False
        self._unanswered.pop(request_id, None)
        return True

    def _restarted(self, attached: str | bytes) -> None:
        """A resumed connection's ``attached``: a new stream (the daemon restarted) numbers
        its events afresh, from the frame's ``seq``."""
        with contextlib.suppress(orjson.JSONDecodeError):
            parsed = orjson.loads(attached)
            if isinstance(parsed, dict) and parsed.get("stream") not in (None, self.stream):
                self.stream = str(parsed["stream"])
                seq = parsed.get("seq")
                self.last_seq = seq if isinstance(seq, int) else 0

    async def _ask_again(self, request_id: str) -> None:
        await trio.sleep(RETRY_IN_PROGRESS)
        line = self._unanswered.get(request_id)
        socket = self._socket
        if line is not None and socket is not None:
            with contextlib.suppress(ConnectionClosed):
                await socket.send_message(line)
