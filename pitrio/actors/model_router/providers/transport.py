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
  :class:`Connection`); the response head parsed at once, the body framed
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
import ssl
import sys
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.model_router.providers.http11_wire import (
    Body,
    Connection,
    DirectResponse,
    Origin,
    read_head,
)
from pitrio.actors.model_router.providers.http11_wire import httpx_module as _httpx

if TYPE_CHECKING:
    import httpx

SEPARATE_BODY = 256 * 1024
"""Bodies larger than this are written after the request head instead of joined to it."""
KEEPALIVE_EXPIRY = 5.0
"""Seconds an idle connection is kept (httpx's default)."""


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


@attrs.frozen(kw_only=True)
class _Timeouts:
    connect: float
    read: float
    write: float
    pool: float


Timeouts = _Timeouts
"""Seconds allowed to connect, between two reads, to write the request, to get a connection."""


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
        self._idle: dict[Origin, list[Connection]] = {}
        self._open = 0  # connections in use or idle
        self._freed = trio.Event()

    # -- the pool --------------------------------------------------------------------------

    async def _connection(self, origin: Origin, extensions: dict[str, object]) -> Connection:
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

    async def _connect(self, origin: Origin, connect_timeout: float) -> Connection:
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
        return Connection(origin, stream, tcp.socket.fileno())

    async def _release(self, connection: Connection, reusable: bool) -> None:
        if reusable and not connection.closed and not connection.buffer:
            idle = self._idle.setdefault(connection.origin, [])
            if sum(len(group) for group in self._idle.values()) < self._max_keepalive:
                connection.idle_since = time.monotonic()
                idle.append(connection)
                self._signal()
                return
        await self._discard(connection)

    async def _discard(self, connection: Connection) -> None:
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
        origin: Origin,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | Sequence[bytes],
        timeouts: _Timeouts,
    ) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, Body]:
        extensions: dict[str, object] = {
            "timeout": {"pool": timeouts.pool, "connect": timeouts.connect}
        }
        connection = await self._connection(origin, extensions)
        try:
            await self._send(connection, method, target, headers, body, timeouts.write)
            status, reason, response_headers, version = await read_head(connection, timeouts.read)
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
        framed = Body(
            self._release,
            connection,
            length=length,
            chunked=chunked,
            reusable=keep_alive,
            read_timeout=timeouts.read,
        )
        return status, reason, response_headers, version, framed

    async def _send(
        self,
        connection: Connection,
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
def _httpx_stream() -> Callable[[Body], Any]:
    """The class that shows a :class:`Body` to httpx's client as its ``AsyncByteStream``
    (the client checks the type), made once httpx is loaded."""
    import httpx

    class HttpxBody(httpx.AsyncByteStream):
        def __init__(self, body: Body) -> None:
            self._body = body

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for data in self._body:
                yield data

        async def aclose(self) -> None:
            await self._body.aclose()

    return HttpxBody
