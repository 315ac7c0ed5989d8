"""A lean HTTP/1.1 transport for httpx: the providers' streamed POSTs without httpcore and h11.

httpx stays the client (request building, headers, proxies from the environment, response
decoding, the exceptions :mod:`~pitrio.actors.model_router.providers.http` maps to error texts);
this transport replaces its default one (httpcore over h11) for direct connections. Per request
that layer cost ~0.5 ms of Python on loopback (a 1-delta response took ~1 ms through httpx,
~0.3 ms over a raw socket), paid twice in a tool turn (issue 7). What it does:

* one keep-alive pool per origin (``max_connections`` in total, ``max_keepalive`` idle ones
  kept for ``keepalive_expiry`` seconds); an idle connection the server has closed (readable
  while idle) is dropped before reuse, as httpcore does;
* TLS through trio's ``SSLStream`` with httpx's own SSL context (certifi, ``SSL_CERT_FILE``);
* the request written in one gathered write (plain TCP: straight to the socket, see
  :class:`_Connection`); the response head parsed at once, the body framed
  by ``content-length``, ``chunked`` or the connection's end, handed over as it arrives;
* httpx's timeouts (``connect``, ``read`` per receive, ``write``, ``pool``) and httpx's
  exception classes, with httpcore's texts where a caller could see them.

Requests through a proxy never get here: httpx mounts its own proxy transports for them.

httpx itself is not imported by a direct request that succeeds (``HttpProvider`` uses
:meth:`Http11Transport.stream`, not the client): the module loads it to raise one of its
exceptions, to serve the client (:meth:`Http11Transport.handle_async_request`) and to make a
TLS context. Its import was ~20 ms of every process's first answer (issue 38, the long
stream's time to its first delta).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import re
import select
import ssl
import sys
import time
import urllib.parse
import zlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.direct_io import DirectReader, write_all

if TYPE_CHECKING:
    import httpx

SEPARATE_BODY = 256 * 1024
"""Bodies larger than this are written after the request head instead of joined to it."""
MAX_HEAD = 64 * 1024
"""Longest response head accepted (status line and headers)."""
READ_SIZE = 256 * 1024
KEEPALIVE_EXPIRY = 5.0
"""Seconds an idle connection is kept (httpx's default)."""


_Origin = tuple[str, str, int]


def _httpx() -> ModuleType:
    """httpx, imported when it is needed (an error to raise, the client's entry point)."""
    import httpx

    return httpx


@functools.cache
def user_agent() -> bytes:
    """What :meth:`Http11Transport.stream` says it is: what httpx says (servers see no
    change), read from httpx's version file rather than by importing httpx."""
    version = None
    loaded = sys.modules.get("httpx")
    if loaded is not None:
        version = loaded.__version__
    else:
        spec = importlib.util.find_spec("httpx")
        for folder in (spec and spec.submodule_search_locations) or ():
            try:
                text = (Path(folder) / "__version__.py").read_text(encoding="utf-8")
            except OSError:
                continue
            found = re.search(r"^__version__\s*=\s*[\"']([^\"']+)[\"']", text, re.MULTILINE)
            if found:
                version = found.group(1)
                break
        if version is None:  # a layout not foreseen: ask httpx itself
            version = _httpx().__version__
    return f"python-httpx/{version}".encode("ascii")


def _timeout(extensions: dict[str, object], phase: str) -> float:
    timeouts = extensions.get("timeout")
    value = timeouts.get(phase) if isinstance(timeouts, dict) else None
    return float(value) if isinstance(value, int | float) else float("inf")


class _Connection:
    """One HTTP/1.1 connection: a byte stream and what was read past the last message.

    Over plain TCP the socket is read and written directly (:mod:`pitrio.actors.direct_io`),
    without the task step trio's stream layer spends after each operation that did not have
    to wait: about two a request (issue 7).
    """

    def __init__(self, origin: _Origin, stream: trio.abc.Stream, fd: int) -> None:
        self.origin = origin
        self.stream = stream
        self.fd = fd
        self.plain = isinstance(stream, trio.SocketStream)
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.closed = False
        # TLS reads through ``SSLStream`` (the socket's bytes are not the body's).
        self._reader = DirectReader(fd, READ_SIZE) if self.plain else None

    def alive_when_idle(self) -> bool:
        """An idle connection is usable if the server sent nothing meanwhile (no EOF)."""
        if self.closed or self.buffer:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        try:
            return not poller.poll(0)  # readable: EOF or stray bytes, either way unusable
        except OSError:
            return False

    async def receive(self, read_timeout: float) -> bytes:
        """The next bytes from the server (``b""`` at its end), within ``read_timeout``."""
        try:
            if self._reader is not None:
                return await self._reader.read(trio.current_time() + read_timeout)
            with trio.fail_after(read_timeout):
                return bytes(await self.stream.receive_some(READ_SIZE))
        except trio.TooSlowError:
            raise _httpx().ReadTimeout("timed out") from None
        except (trio.BrokenResourceError, OSError, ssl.SSLError) as exc:
            raise _httpx().ReadError(str(exc) or type(exc).__name__) from exc

    async def fill(self, read_timeout: float) -> bool:
        """Read more into the buffer; ``False`` at EOF."""
        data = await self.receive(read_timeout)
        if not data:
            return False
        self.buffer += data
        return True

    async def send(self, parts: Sequence[bytes], write_timeout: float) -> None:
        """Write ``parts`` in order, within ``write_timeout`` seconds (httpx's exceptions)."""
        try:
            if self.plain:
                await write_all(self.fd, parts, trio.current_time() + write_timeout)
                return
            with trio.fail_after(write_timeout):
                for piece in parts:  # TLS: piece by piece, each encrypted on its own
                    await self.stream.send_all(piece)
        except trio.TooSlowError:
            raise _httpx().WriteTimeout("timed out") from None
        except (trio.BrokenResourceError, OSError, ssl.SSLError) as exc:
            raise _httpx().WriteError(str(exc) or type(exc).__name__) from exc

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await trio.aclose_forcefully(self.stream)


class _Body:
    """A response body framed by length, chunks or the connection's end (an httpx
    ``AsyncByteStream`` by its methods; :func:`_httpx_stream` makes it one for the client)."""

    def __init__(
        self,
        transport: Http11Transport,
        connection: _Connection,
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
        read_timeout: float,
    ) -> None:
        self._transport = transport
        self._connection = connection
        self._length = length
        self._chunked = chunked
        self._reusable = reusable
        self._read_timeout = read_timeout
        self._complete = length == 0 and not chunked
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete:
            return
        if self._chunked:
            async for data in self._chunks():
                yield data
        elif self._length is not None:
            async for data in self._fixed(self._length):
                yield data
        else:
            async for data in self._until_close():
                yield data
        self._complete = True

    async def _fixed(self, length: int) -> AsyncIterator[bytes]:
        connection = self._connection
        left = length
        while left:
            if not connection.buffer and not await connection.fill(self._read_timeout):
                raise _httpx().RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {length - left} bytes, expected {length}"
                )
            data = bytes(connection.buffer[:left])
            del connection.buffer[:left]
            left -= len(data)
            yield data

    async def _until_close(self) -> AsyncIterator[bytes]:
        connection = self._connection
        self._reusable = False
        while True:
            if connection.buffer:
                data = bytes(connection.buffer)
                connection.buffer.clear()
                yield data
            if not await connection.fill(self._read_timeout):
                return

    async def _line(self) -> bytes:
        connection = self._connection
        while True:
            end = connection.buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(connection.buffer[:end])
                del connection.buffer[: end + 2]
                return line
            if len(connection.buffer) > MAX_HEAD:
                raise _httpx().RemoteProtocolError("chunk header too long")
            if not await connection.fill(self._read_timeout):
                raise _httpx().RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    "incomplete chunked read"
                )

    async def _chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            header = await self._line()
            try:
                size = int(header.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _httpx().RemoteProtocolError(f"invalid chunk size {header[:40]!r}") from None
            if size == 0:
                while await self._line():  # trailers, up to the empty line
                    pass
                return
            left = size
            while left:
                if not connection.buffer and not await connection.fill(self._read_timeout):
                    raise _httpx().RemoteProtocolError(
                        "peer closed connection without sending complete message body: "
                        "incomplete chunked read"
                    )
                data = bytes(connection.buffer[:left])
                del connection.buffer[:left]
                left -= len(data)
                yield data
            if await self._line():
                raise _httpx().RemoteProtocolError("missing CRLF after a chunk")

    async def aclose(self) -> None:
        if self._released:
            return
        self._released = True
        await self._transport._release(self._connection, self._complete and self._reusable)


@attrs.frozen(kw_only=True)
class _Timeouts:
    connect: float
    read: float
    write: float
    pool: float


Timeouts = _Timeouts
"""Seconds allowed to connect, between two reads, to write the request, to get a connection."""


class DirectResponse:
    """A response of :meth:`Http11Transport.stream`: status, headers (names lower-cased,
    repeated ones joined by ``", "``) and the body, decoded per ``Content-Encoding``."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: _Body) -> None:
        self.status_code = status
        merged: dict[str, str] = {}
        for name, value in headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            merged[key] = f"{merged[key]}, {text}" if key in merged else text
        self.headers = merged
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives (gzip/deflate undone)."""
        encoding = self.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            async for chunk in self._body:
                yield chunk
            return
        if encoding not in ("gzip", "deflate", "x-gzip"):
            raise _httpx().DecodingError(f"unsupported content encoding {encoding!r}")
        decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
        try:
            async for chunk in self._body:
                data = decoder.decompress(chunk)
                if data:
                    yield data
            data = decoder.flush()
        except zlib.error as exc:
            raise _httpx().DecodingError(str(exc)) from exc
        if data:
            yield data


class Http11Transport:
    """httpx transport: HTTP/1.1 over trio sockets, pooled per origin (see the module doc).

    An httpx ``AsyncBaseTransport`` by its methods (``handle_async_request``, ``aclose`` and
    the context manager), not by its base, so that a direct request need not import httpx."""

    def __init__(
        self,
        *,
        max_connections: int = 100,
        max_keepalive: int = 20,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        ssl_context: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self._max_connections = max(1, max_connections)
        self._max_keepalive = max(0, max_keepalive)
        self._expiry = keepalive_expiry
        self._ssl_factory = ssl_context or (lambda: _httpx().create_ssl_context())
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._open = 0  # connections in use or idle
        self._freed = trio.Event()

    # -- the pool --------------------------------------------------------------------------

    async def _connection(self, origin: _Origin, extensions: dict[str, object]) -> _Connection:
        now = time.monotonic()
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if now - connection.idle_since < self._expiry and connection.alive_when_idle():
                return connection
            await self._discard(connection)
        deadline = _timeout(extensions, "pool")
        try:
            with trio.fail_after(deadline):
                while self._open >= self._max_connections:
                    if not await self._close_one_idle():
                        await self._freed.wait()
        except trio.TooSlowError:
            raise _httpx().PoolTimeout("timed out waiting for a free connection") from None
        self._open += 1
        try:
            return await self._connect(origin, _timeout(extensions, "connect"))
        except BaseException:
            self._open -= 1
            self._signal()
            raise

    async def _connect(self, origin: _Origin, connect_timeout: float) -> _Connection:
        scheme, host, port = origin
        try:
            with trio.fail_after(connect_timeout):
                # An ASCII name as bytes: the resolver's numeric try then skips Python's
                # IDNA codec, whose first use imports ~1 ms of modules (a non-ASCII name
                # still goes through trio's IDNA 2008 encoding).
                name: str | bytes = host.encode("ascii") if host.isascii() else host
                tcp = await trio.open_tcp_stream(name, port)
                stream: trio.abc.Stream = tcp
                if scheme == "https":
                    if self._ssl is None:
                        self._ssl = self._ssl_factory()
                    tls = trio.SSLStream(tcp, self._ssl, server_hostname=host)
                    try:
                        await tls.do_handshake()
                    except BaseException:
                        await trio.aclose_forcefully(tcp)
                        raise
                    stream = tls
        except trio.TooSlowError:
            raise _httpx().ConnectTimeout("timed out") from None
        except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
            raise _httpx().ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(origin, stream, tcp.socket.fileno())

    async def _release(self, connection: _Connection, reusable: bool) -> None:
        if reusable and not connection.closed and not connection.buffer:
            idle = self._idle.setdefault(connection.origin, [])
            if sum(len(group) for group in self._idle.values()) < self._max_keepalive:
                connection.idle_since = time.monotonic()
                idle.append(connection)
                self._signal()
                return
        await self._discard(connection)

    async def _discard(self, connection: _Connection) -> None:
        self._open -= 1
        self._signal()
        with trio.CancelScope(shield=True):
            await connection.close()

    async def _close_one_idle(self) -> bool:
        for idle in self._idle.values():
            if idle:
                await self._discard(idle.pop(0))
                return True
        return False

    def _signal(self) -> None:
        self._freed.set()
        self._freed = trio.Event()

    async def __aenter__(self) -> Http11Transport:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close every idle connection (connections in use close when their body does)."""
        idle, self._idle = self._idle, {}
        for group in idle.values():
            for connection in group:
                await self._discard(connection)

    # -- one exchange ----------------------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """httpx's entry point."""
        import httpx  # the client's path: httpx is loaded already

        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise _httpx().UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme}'"
            )
        port = url.port or (443 if scheme == "https" else 80)
        extensions = dict(request.extensions)
        stream = request.stream
        parts: list[bytes] = []
        if isinstance(stream, httpx.AsyncByteStream):
            async for chunk in stream:
                parts.append(chunk)
        else:
            parts.extend(stream)
        status, reason, headers, version, body = await self._exchange(
            (scheme, url.host, port),
            request.method,
            url.raw_path or b"/",
            request.headers.raw,
            b"".join(parts),
            _Timeouts(
                connect=_timeout(extensions, "connect"),
                read=_timeout(extensions, "read"),
                write=_timeout(extensions, "write"),
                pool=_timeout(extensions, "pool"),
            ),
        )
        return httpx.Response(
            status,
            headers=headers,
            stream=_httpx_stream()(body),
            extensions={"http_version": version, "reason_phrase": reason},
        )

    @contextlib.asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | Sequence[bytes],
        timeouts: _Timeouts,
    ) -> AsyncIterator[DirectResponse]:
        """One request without httpx's client layers (URL and header models, cookies, auth,
        redirects: ~0.3 ms of CPU per request on loopback, issue 7). ``headers`` are sent as
        given after ``Host``, ``User-Agent``, ``Accept-Encoding`` (gzip and deflate are decoded)
        and ``Content-Length``; no cookies, no redirects, no proxies (callers use httpx for
        those). ``body`` may come in pieces, sent in order (a long transcript's request, see
        ``convert.encode_json_pieces``). Raises httpx's exceptions, as the transport does
        under httpx."""
        scheme, host, port, netloc, target = _request_target(url)
        sent: list[tuple[bytes, bytes]] = [
            (b"Host", netloc),
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"User-Agent", user_agent()),
            (b"Content-Length", str(_size(body)).encode("ascii")),
        ]
        given = {name.lower() for name in headers}
        sent = [(name, value) for name, value in sent if name.decode().lower() not in given]
        sent += [
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
        ]
        status, _, raw_headers, _, framed = await self._exchange(
            (scheme, host, port), method, target, sent, body, timeouts
        )
        response = DirectResponse(status, raw_headers, framed)
        try:
            yield response
        finally:
            await framed.aclose()

    async def _exchange(
        self,
        origin: _Origin,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | Sequence[bytes],
        timeouts: _Timeouts,
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, _Body]:
        extensions: dict[str, object] = {
            "timeout": {"pool": timeouts.pool, "connect": timeouts.connect}
        }
        connection = await self._connection(origin, extensions)
        try:
            await self._send(connection, method, target, headers, body, timeouts.write)
            status, reason, response_headers, version = await self._head(connection, timeouts.read)
        except BaseException:
            await self._discard(connection)
            raise
        length: int | None = None
        chunked = False
        keep_alive = version == b"HTTP/1.1"
        names: dict[bytes, bytes] = {}
        for name, value in response_headers:
            names[name.lower()] = value
        connection_header = names.get(b"connection", b"").lower()
        if b"close" in connection_header:
            keep_alive = False
        elif b"keep-alive" in connection_header:
            keep_alive = True
        if method == "HEAD" or status in (204, 304):
            length = 0
        elif b"chunked" in names.get(b"transfer-encoding", b"").lower():
            chunked = True
        elif b"content-length" in names:
            try:
                length = int(names[b"content-length"])
            except ValueError:
                await self._discard(connection)
                raise _httpx().RemoteProtocolError("invalid content-length") from None
        framed = _Body(
            self,
            connection,
            length=length,
            chunked=chunked,
            reusable=keep_alive,
            read_timeout=timeouts.read,
        )
        return status, reason, response_headers, version, framed

    async def _send(
        self,
        connection: _Connection,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | Sequence[bytes],
        write_timeout: float,
    ) -> None:
        parts = [method.encode("ascii"), b" ", target, b" HTTP/1.1\r\n"]
        for name, value in headers:
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"\r\n")
        pieces = (body,) if isinstance(body, bytes) else body
        # A small body goes out with the head in one write; a large one (a long transcript's
        # request) after it, as it was given, not copied into a joined buffer first.
        joined = _size(body) <= SEPARATE_BODY
        if joined:
            parts += pieces
        head = b"".join(parts)
        await connection.send((head,) if joined else (head, *pieces), write_timeout)

    async def _head(
        self, connection: _Connection, read_timeout: float
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
        while True:  # skip informational (1xx) responses
            while True:
                end = connection.buffer.find(b"\r\n\r\n")
                if end >= 0:
                    break
                if len(connection.buffer) > MAX_HEAD:
                    raise _httpx().RemoteProtocolError("response head too long")
                if not await connection.fill(read_timeout):
                    raise _httpx().RemoteProtocolError(
                        "Server disconnected without sending a response."
                    )
            head = bytes(connection.buffer[:end])
            del connection.buffer[: end + 4]
            lines = head.split(b"\r\n")
            status_line = lines[0].split(b" ", 2)
            try:
                version = status_line[0]
                status = int(status_line[1])
            except (IndexError, ValueError):
                raise _httpx().RemoteProtocolError(
                    f"invalid status line {lines[0][:80]!r}"
                ) from None
            if not version.startswith(b"HTTP/1."):
                raise _httpx().RemoteProtocolError(f"unsupported HTTP version {version[:20]!r}")
            reason = status_line[2] if len(status_line) > 2 else b""
            headers: list[tuple[bytes, bytes]] = []
            for line in lines[1:]:
                name, colon, value = line.partition(b":")
                if not colon or not name or name != name.strip():
                    raise _httpx().RemoteProtocolError(f"invalid header line {line[:80]!r}")
                headers.append((name, value.strip()))
            if 100 <= status < 200 and status != 101:
                continue
            return status, reason, headers, version


@functools.lru_cache(maxsize=64)
def _request_target(url: str) -> tuple[str, str, int, bytes, bytes]:
    """``url``'s scheme, host, port, ``Host`` header and request target. Kept for the URLs
    last used: a session sends every request to the same one, and parsing it took ~15 us of
    each turn (issue 38). A URL refused (an unsupported scheme, no host) raises each time."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme
    if scheme not in ("http", "https") or not parts.hostname:
        raise _httpx().UnsupportedProtocol(f"Request URL has an unsupported protocol '{scheme}'")
    port = parts.port or (443 if scheme == "https" else 80)
    host = parts.hostname
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None and parts.port != (443 if scheme == "https" else 80):
        netloc += f":{parts.port}"
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return scheme, host, port, netloc.encode("ascii"), target.encode("ascii")


def _size(body: bytes | Sequence[bytes]) -> int:
    return len(body) if isinstance(body, bytes) else sum(map(len, body))


@functools.cache
def _httpx_stream() -> Callable[[_Body], Any]:
    """The class that shows a :class:`_Body` to httpx's client as its ``AsyncByteStream``
    (the client checks the type), made once httpx is loaded."""
    import httpx

    class HttpxBody(httpx.AsyncByteStream):
        def __init__(self, body: _Body) -> None:
            self._body = body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for data in self._body:
                yield data

        async def aclose(self) -> None:
            await self._body.aclose()

    return HttpxBody
