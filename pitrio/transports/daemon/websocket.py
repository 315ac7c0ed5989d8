"""The daemon's websocket connection: trio-websocket's, failing a connection as RFC 6455 says.

wsproto reports a frame it cannot accept (invalid UTF-8 in a text message or a close reason,
an unmasked client frame, a reserved opcode, RSV bits without an extension, a control frame
over 125 bytes or fragmented, a continuation with no message to continue, a bad close code)
as a ``CloseConnection`` event carrying the close code (1002 or 1007) and its reason, as if
the peer had sent it. trio-websocket 0.12 takes that event for the peer's close and drops the
TCP connection without a close frame, so the client learns nothing (issue 21, item 17).

:class:`DaemonWebSocket` tells the two apart by wsproto's state (a real close frame from the
peer moves it to ``REMOTE_CLOSING``; a parse failure leaves it ``OPEN``) and, for a parse
failure, sends the close frame with that code and reason before closing the connection
(RFC 6455 §7.1.7, "Fail the WebSocket Connection").
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any

import trio
from trio_websocket import (
    CloseReason,
    ConnectionClosed,
    WebSocketConnection,
    WebSocketRequest,
)
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage

log = logging.getLogger("pitrio.daemon")

MERGE_PARTS = 256
"""Fragments of one incoming message kept apart before they are joined into one piece."""


def text_frame_header(size: int) -> bytes:
    """The header of a server's (unmasked) final text frame of ``size`` payload bytes
    (RFC 6455 §5.2: a 7-bit length, or 126 and 16 bits, or 127 and 64 bits)."""
    if size < 126:
        return bytes((0x81, size))
    if size < 1 << 16:
        return b"\x81\x7e" + size.to_bytes(2, "big")
    return b"\x81\x7f" + size.to_bytes(8, "big")


def write_now(stream: trio.abc.Stream, data: bytes) -> int:
    """Write what ``stream``'s socket takes of ``data`` without waiting: the bytes written
    (0 when the socket's buffer is full, or for a stream that is not a socket's). Raises
    ``OSError`` when the connection is broken or closed.

    A daemon connection is a :class:`~pitrio.transports.daemon.http.PrefixedStream` around a
    ``trio.SocketStream``, whose socket trio keeps non-blocking: ``os.write`` on it is a
    ``send`` that returns at once (``BlockingIOError`` when full). The caller holds the
    websocket's stream lock, the only way to write this stream."""
    inner = getattr(stream, "stream", stream)  # the PrefixedStream's socket stream
    if not isinstance(inner, trio.SocketStream):
        return 0
    try:
        return os.write(inner.socket.fileno(), data)  # -1 once closed: EBADF, an OSError
    except BlockingIOError:
        return 0


def close_reason(text: str) -> str:
    """A close frame's reason: at most 123 bytes of UTF-8 (the frame's payload limit less the
    code), cut on a character boundary."""
    data = text.encode("utf-8")[:123]
    return data.decode("utf-8", errors="ignore")


class DaemonWebSocket(WebSocketConnection):
    """A server-side websocket that answers a frame wsproto refuses with a close frame, giving
    up on it after ``close_timeout`` seconds (a peer that does not read)."""

    def __init__(self, *args: Any, close_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.close_timeout = close_timeout
        self._merged: list[Any] = []
        self._unsent = b""
        """The end of a frame :meth:`send_frame_now` could not write: goes first in the next
        write (a flush by the sender, or any frame)."""

    async def _handle_message_event(self, event: BytesMessage | TextMessage) -> None:
        # trio-websocket keeps each fragment of a message as its own object until the last
        # one: a 16 MiB message in two-byte fragments would hold 8 million strings (~500 MB).
        # Every MERGE_PARTS fragments are joined into one piece, so a message costs about
        # its size whatever its fragmentation (the size limit is still counted by the library).
        if event.message_finished and self._merged:
            self._message_parts[:0] = self._merged
            self._merged = []
        await super()._handle_message_event(event)
        if event.message_finished or self._close_reason is not None:
            self._merged = []
        elif len(self._message_parts) >= MERGE_PARTS:
            joiner: Any = b"" if isinstance(event, BytesMessage) else ""
            self._merged.append(joiner.join(self._message_parts))
            self._message_parts = []

    async def _handle_ping_event(self, event: Ping) -> None:
        # Answered only while the connection is open. Once the daemon's close frame has gone
        # out (a slow client, an unanswered ping, shutdown), wsproto refuses every frame but
        # the peer's close, and trio-websocket 0.12 answers a ping that arrives meanwhile
        # anyway: the refusal ended the connection's reader with ``LocalProtocolError``,
        # logged and counted as a connection error (upstream issue 184). RFC 6455 asks for
        # no frame after a close frame; the peer's close reply ends the connection as usual.
        if self._wsproto.state is ConnectionState.OPEN:
            await super()._handle_ping_event(event)

    async def send_messages(self, messages: list[str]) -> None:
        """Send text messages in order with one write to the stream: the bytes on the wire are
        those of one ``send_message`` per message (see :meth:`send_frames`)."""
        await self.send_frames([message.encode("utf-8") for message in messages])

    async def send_frames(self, payloads: list[bytes]) -> None:
        """Send text messages, given as their UTF-8 bytes, in order with one write: the bytes
        on the wire are those of one ``send_message`` per message.

        The frames are built here, not by wsproto: a server's unmasked, unfragmented text
        frame is a two-to-ten-byte header and the payload, and the daemon's frames are
        already bytes (decoding them for wsproto to encode again cost a copy each way). No
        extension is ever negotiated (``accept`` offers none), so nothing else would change
        the bytes. The write goes straight to the socket when it takes it all (the sender's
        common case, one frame of one delta): trio's ``send_all`` would add a trip through
        the scheduler to every write. What the socket does not take now is sent through the
        stream, waiting for room as before."""
        if self._close_reason:
            raise ConnectionClosed(self._close_reason)
        if self._wsproto.state is not ConnectionState.OPEN:  # our close frame went out
            raise ConnectionClosed(self._close_reason or CloseReason(1006, "closing"))
        parts: list[bytes] = []
        for payload in payloads:
            parts.append(text_frame_header(len(payload)))
            parts.append(payload)
        lock = self._stream_lock
        try:
            lock.acquire_nowait()
        except trio.WouldBlock:  # the reader is answering a ping or a close
            await lock.acquire()
        if self._unsent:
            parts.insert(0, self._unsent)
            self._unsent = b""
        data = b"".join(parts)
        try:
            sent = write_now(self._stream, data)
            if sent < len(data):
                await self._stream.send_all(memoryview(data)[sent:])
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            await self._abort_web_socket()
            assert self._close_reason is not None
            raise ConnectionClosed(self._close_reason) from None
        finally:
            lock.release()

    @property
    def unsent(self) -> bool:
        """Whether the end of a frame waits for :meth:`flush`."""
        return bool(self._unsent)

    def send_frame_now(self, payload: bytes) -> bool:
        """Write one text message (its UTF-8 bytes) to the socket now, without waiting or a
        task switch, if nothing else is being written; whether it was written.

        ``False`` (nothing written) when the connection is closing, another write holds the
        stream, or the socket's buffer is full or broken: the caller queues the frame for
        the sender instead, which meets any error. ``True`` when the socket took the frame,
        or its start: the rest waits in :attr:`unsent`, to be written by :meth:`flush`
        before anything else."""
        if self._close_reason or self._unsent or self._wsproto.state is not ConnectionState.OPEN:
            return False
        # Another write holds the stream (or waits for it: trio hands a released lock to its
        # first waiter). Not taken here: nothing below awaits, so no other task can write
        # before this returns, and a lock taken and released per delta cost ~2 % (issue 38).
        if self._stream_lock.locked():
            return False
        data = text_frame_header(len(payload)) + payload
        try:
            sent = write_now(self._stream, data)
        except OSError:
            return False
        if sent == 0:
            return False
        self._unsent = data[sent:]
        return True

    async def flush(self) -> None:
        """Write what :meth:`send_frame_now` left unsent, waiting for room."""
        async with self._stream_lock:
            data, self._unsent = self._unsent, b""
            if data:
                await self._write_locked(data)

    async def _send(self, event: Any) -> None:
        # trio-websocket's every write (pings, pongs, the close frame) goes here: a frame's
        # unsent end goes first, under the same lock, so nothing lands inside it.
        data = self._wsproto.send(event)
        async with self._stream_lock:
            data, self._unsent = self._unsent + data, b""
            await self._write_locked(data)

    async def _write_locked(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            await self._abort_web_socket()
            assert self._close_reason is not None
            raise ConnectionClosed(self._close_reason) from None

    async def _handle_close_connection_event(self, event: CloseConnection) -> None:
        if self._wsproto.state is not ConnectionState.OPEN:
            # The peer's own close frame (or one after ours): the library's handshake.
            await super()._handle_close_connection_event(event)
            return
        reason = close_reason(event.reason or "")
        # Set first: a send racing this one meets ConnectionClosed, not a wsproto error.
        self._close_reason = CloseReason(event.code, reason or None)
        # Bounded: behind a send stuck on a peer that does not read, the close frame would
        # wait for ever, and with it the end of the connection.
        with contextlib.suppress(ConnectionClosed), trio.move_on_after(self.close_timeout):
            await self._send(CloseConnection(code=event.code, reason=reason))
        await self._close_web_socket(event.code, reason or None)
        self._close_handshake.set()
        await self._close_stream()


async def wrap_server_stream(
    nursery: trio.Nursery,
    stream: trio.abc.Stream,
    *,
    max_message_size: int,
    close_timeout: float,
) -> WebSocketRequest:
    """trio-websocket's ``wrap_server_stream`` with a :class:`DaemonWebSocket`."""
    connection = DaemonWebSocket(
        stream,
        WSConnection(ConnectionType.SERVER),
        max_message_size=max_message_size,
        close_timeout=close_timeout,
    )
    nursery.start_soon(connection._reader_task)
    return await connection._get_request()
