"""One client WebSocket of the Codex transport (:mod:`.codex_websocket`): wsproto over a trio
stream.

Kept apart so that wsproto is imported with the first WebSocket request only: a process that
never opens one (most runs: every other provider, or Codex over SSE) does not pay for it at
start-up.
"""

from __future__ import annotations

import contextlib
import select
import ssl
import urllib.parse
from collections.abc import Callable, Mapping

import trio
from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

from pitrio.actors.model_router.providers.codex_websocket import (
    ABNORMAL_CLOSURE,
    MAX_MESSAGE_BYTES,
    MESSAGE_TOO_BIG,
    READ_SIZE,
    Continuation,
    WebSocketFailure,
    close_text,
)

PROTOCOL_ERRORS = (LocalProtocolError, RemoteProtocolError)


class WsprotoSocket:
    """One client WebSocket: wsproto over a TCP (or TLS) stream, read by whoever awaits
    :meth:`receive_text` (so pings are answered only while a request reads)."""

    def __init__(self, stream: trio.abc.Stream, fd: int, connection: WSConnection) -> None:
        self.stream = stream
        self.fd = fd
        self.ws = connection
        self.idle_since = 0.0
        self.busy = False
        self.continuation: Continuation | None = None

    @classmethod
    async def connect(
        cls,
        url: str,
        headers: Mapping[str, str],
        *,
        connect_timeout: float,
        ssl_context: Callable[[], ssl.SSLContext],
    ) -> WsprotoSocket:
        """Open ``url`` (``ws``/``wss``) and finish the handshake within ``connect_timeout``.

        Raises :class:`WebSocketFailure`.
        """
        parts = urllib.parse.urlsplit(url)
        secure = parts.scheme == "wss"
        host = parts.hostname or ""
        port = parts.port or (443 if secure else 80)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        try:
            with trio.fail_after(connect_timeout):
                tcp = await trio.open_tcp_stream(host, port)
                stream: trio.abc.Stream = tcp
                try:
                    if secure:
                        tls = trio.SSLStream(tcp, ssl_context(), server_hostname=host)
                        await tls.do_handshake()
                        stream = tls
                    socket = cls(stream, tcp.socket.fileno(), WSConnection(ConnectionType.CLIENT))
                    await socket._handshake(parts.netloc, target, headers)
                except BaseException:
                    await trio.aclose_forcefully(tcp)
                    raise
        except trio.TooSlowError:
            raise WebSocketFailure("WebSocket connection timed out") from None
        except (OSError, trio.BrokenResourceError, ssl.SSLError, *PROTOCOL_ERRORS) as exc:
            raise WebSocketFailure(str(exc) or type(exc).__name__) from None
        return socket

    async def _handshake(self, netloc: str, target: str, headers: Mapping[str, str]) -> None:
        extra = [(name.encode(), value.encode()) for name, value in headers.items()]
        await self.stream.send_all(self.ws.send(Request(host=netloc, target=target,
                                                        extra_headers=extra)))  # fmt: skip
        while True:
            data = await self.stream.receive_some(READ_SIZE)
            self.ws.receive_data(bytes(data) if data else None)
            for event in self.ws.events():
                if isinstance(event, AcceptConnection):
                    return
                if isinstance(event, RejectConnection):
                    raise WebSocketFailure(f"Unexpected server response: {event.status_code}")
            if not data:
                raise WebSocketFailure(close_text(ABNORMAL_CLOSURE, ""))

    @property
    def open(self) -> bool:
        """Whether neither side has started closing."""
        return self.ws.state is ConnectionState.OPEN

    def reusable(self) -> bool:
        """Open, and the server sent nothing while it was idle (a close, a ping, EOF)."""
        if not self.open:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        try:
            return not poller.poll(0)
        except OSError:
            return False

    async def send_text(self, text: str) -> None:
        """Send one text message. Raises :class:`WebSocketFailure`."""
        try:
            await self.stream.send_all(self.ws.send(TextMessage(data=text)))
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise WebSocketFailure(close_text(ABNORMAL_CLOSURE, "")) from exc

    async def receive_text(self, read_timeout: float) -> str:
        """The next whole message as text (pings answered on the way), each read within
        ``read_timeout``. Raises :class:`WebSocketFailure` on a close or a lost connection."""
        pieces: list[str] = []
        size = 0
        while True:
            for event in self.ws.events():
                if isinstance(event, TextMessage | BytesMessage):
                    piece = event.data if isinstance(event.data, str) else event.data.decode()
                    size += len(piece)
                    if size > MAX_MESSAGE_BYTES:
                        await self.aclose(MESSAGE_TOO_BIG, "")
                        raise WebSocketFailure(close_text(MESSAGE_TOO_BIG, ""))
                    pieces.append(piece)
                    if event.message_finished:
                        return "".join(pieces)
                elif isinstance(event, Ping):
                    await self._send_quietly(self.ws.send(event.response()))
                elif isinstance(event, CloseConnection):
                    if self.ws.state is ConnectionState.REMOTE_CLOSING:
                        await self._send_quietly(self.ws.send(event.response()))
                    raise WebSocketFailure(close_text(event.code, event.reason or ""))
            try:
                with trio.fail_after(read_timeout):
                    data = await self.stream.receive_some(READ_SIZE)
            except trio.TooSlowError:
                raise WebSocketFailure(f"No WebSocket message within {read_timeout:g} s") from None
            except (OSError, trio.BrokenResourceError, ssl.SSLError):
                data = b""
            if not data:
                raise WebSocketFailure(close_text(ABNORMAL_CLOSURE, ""))
            self.ws.receive_data(bytes(data))

    async def _send_quietly(self, data: bytes) -> None:
        with contextlib.suppress(OSError, trio.BrokenResourceError, ssl.SSLError):
            await self.stream.send_all(data)

    async def aclose(self, code: int = 1000, reason: str = "done") -> None:
        """Close (a close frame when still open, then the stream); never raises."""
        with trio.CancelScope(shield=True), trio.move_on_after(1):
            if self.open:
                await self._send_quietly(self.ws.send(CloseConnection(code=code, reason=reason)))
        await trio.aclose_forcefully(self.stream)
