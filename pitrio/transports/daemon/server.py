"""The daemon's network server: one TCP port for the page, ``/healthz``, ``/metrics`` and the
websocket endpoints (``/v1/sessions/{id}``, ``/v1/host``).

Every connection's request head is read and checked here before anything else happens: the
path (a valid session id, a known endpoint or page file), the token (``Authorization: Bearer``
or the ``pitrio.token.<token>`` subprotocol), the ``Origin``. A refused request gets a plain
HTTP error and is closed; an accepted upgrade continues in trio-websocket. Connections run in
their own nursery, so stopping the listener leaves them to be closed properly (1001) at
shutdown.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections import Counter
from collections.abc import Awaitable
from importlib import resources
from typing import Any

import orjson
import trio
from trio_websocket import WebSocketConnection

from pitrio.errors import PitrioError, SessionNotFoundError
from pitrio.logs import event as log_event
from pitrio.sdk.host import HostHandle, InvalidSessionIdError, validate_session_id
from pitrio.sdk.models import ModelRouterHandle
from pitrio.transports.daemon import metrics
from pitrio.transports.daemon.context import DaemonConfig as DaemonConfig  # re-exported
from pitrio.transports.daemon.host_socket import HostSocket
from pitrio.transports.daemon.http import (
    BadRequest,
    PrefixedStream,
    RequestHead,
    read_head,
    response,
)
from pitrio.transports.daemon.security import (
    SUBPROTOCOL,
    is_loopback,
    origin_allowed,
    own_origins,
    presented_token,
    token_matches,
)
from pitrio.transports.daemon.sockets import SessionSocket
from pitrio.transports.daemon.websocket import wrap_server_stream
from pitrio.transports.rpc.events import UpdateFormat

log = logging.getLogger("pitrio.daemon")

SESSIONS_PREFIX = "/v1/sessions/"
HOST_PATH = "/v1/host"
PAGE_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
PAGE_NAMES = (
    "index.html",
    "app.css",
    "app.js",
    "connection.js",
    "dom.js",
    "composer.js",
    "dialogs.js",
    "markdown.js",
    "notices.js",
    "sessions.js",
    "tools.js",
    "transcript.js",
    "favicon.svg",
    "vendor/marked.esm.js",
    "vendor/purify.es.mjs",
    "vendor/highlight.min.js",
    "vendor/highlight-github.min.css",
)
PAGE_FILES = {
    "/": ("index.html", PAGE_TYPES[".html"]),
    # Browsers ask for /favicon.ico by habit; the SVG answers it.
    "/favicon.ico": ("favicon.svg", PAGE_TYPES[".svg"]),
    **{"/" + name: (name, PAGE_TYPES[name[name.rindex(".") :]]) for name in PAGE_NAMES},
}
"""The page's files, by exact path: nothing else on disk is ever served."""
PAGE_POLICY = (
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; "
    "style-src 'self'; script-src 'self'; frame-ancestors 'none'"
)


class UnsafeBindError(PitrioError):
    """A non-loopback address without a token."""


def check_bind(config: DaemonConfig) -> None:
    """Refuse (:class:`UnsafeBindError`) a non-loopback address without a token."""
    if config.token is None and not is_loopback(config.host):
        raise UnsafeBindError(
            f"Refusing to listen on {config.host} without a token: only loopback "
            "addresses may run without authentication"
        )


class DaemonServer:
    """Serves one :class:`DaemonConfig` on behalf of a host."""

    def __init__(self, config: DaemonConfig, host: HostHandle, router: ModelRouterHandle) -> None:
        check_bind(config)
        self.config = config
        self.host = host
        self.router = router
        self.port = config.port
        self.closing = trio.Event()
        self.counters: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.started_at = time.time()
        self._origins = tuple(config.allowed_origins)
        self._listen_scope = trio.CancelScope()
        self._sockets = 0
        self._no_sockets = trio.Event()
        self._no_sockets.set()
        self._connections: trio.Nursery | None = None

    @property
    def url(self) -> str:
        """The page's address."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"http://{host}:{self.port}/"

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` in the connections' nursery (fire and forget)."""

        async def run() -> None:
            await work

        if self._connections is not None:
            self._connections.start_soon(run)

    async def session_made(self, session_id: str) -> None:
        """Nothing to do in one process: every session is this daemon's."""

    async def serve(
        self, *, task_status: trio.TaskStatus[DaemonServer] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen until :meth:`stop_listening`; connections go on until they close."""
        listeners = await self.listen()
        self._origins = (*own_origins(self.config.host, self.port), *self.config.allowed_origins)
        async with trio.open_nursery() as connections:
            self._connections = connections
            task_status.started(self)
            with self._listen_scope:
                await self.accept(listeners, connections)
            for listener in listeners:
                await listener.aclose()

    async def listen(self) -> list[trio.SocketListener]:
        """Open the listening sockets and set :attr:`port` (a worker of ``--workers`` opens
        none: its connections come from the acceptor)."""
        listeners = await trio.open_tcp_listeners(self.config.port, host=self.config.host)
        self.port = listeners[0].socket.getsockname()[1]
        return listeners

    async def accept(self, listeners: list[trio.SocketListener], connections: trio.Nursery) -> None:
        """Serve each new connection in ``connections`` until cancelled."""
        await trio.serve_listeners(self._connection, listeners, handler_nursery=connections)

    async def sockets_closed(self) -> None:
        """Return once no websocket is open."""
        await self._no_sockets.wait()

    def _socket_opened(self) -> None:
        if self._sockets == 0:
            self._no_sockets = trio.Event()
        self._sockets += 1

    def _socket_closed(self) -> None:
        self._sockets -= 1
        if self._sockets == 0:
            self._no_sockets.set()

    def stop_listening(self) -> None:
        """Stop accepting connections."""
        self._listen_scope.cancel()

    # -- one connection --------------------------------------------------------------------

    async def _connection(self, stream: trio.SocketStream) -> None:
        await self.serve_connection(stream)

    async def serve_connection(
        self, stream: trio.SocketStream, read: tuple[bytes, bytes] | None = None
    ) -> None:
        """Serve one client until it closes; ``read``: its request head and the bytes after
        it when another process already read them (a worker's hand-off)."""
        try:
            await self._serve_connection(stream, read)
        except Exception:
            # A bug while serving one connection must not take the daemon down.
            log.exception("error while serving a connection")
            self.counters["connection_errors"] += 1
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()

    async def _serve_connection(
        self, stream: trio.SocketStream, read: tuple[bytes, bytes] | None
    ) -> None:
        if self.config.send_buffer is not None:
            stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer)
        try:
            if read is None:
                with trio.fail_after(self.config.handshake_timeout):
                    read = await read_head(stream)
            head_bytes, rest = read
            head = _parse(head_bytes)
        except BadRequest as exc:
            await self._refuse(stream, exc.status, str(exc), "bad_request")
            return
        except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.aclose()
            return
        if self.closing.is_set():
            await self._refuse(stream, 503, "the daemon is shutting down", "shutting_down")
            return
        if head.is_websocket:
            await self._websocket(stream, head, head_bytes + rest)
        else:
            await self._http(stream, head)

    async def _refuse(
        self, stream: trio.abc.Stream, status: int, message: str, reason: str
    ) -> None:
        self.rejected[reason] += 1
        log_event(
            log,
            "request_refused",
            status=status,
            reason=reason,
            message=message,
            remote=remote_address(stream),
        )
        body = orjson.dumps({"error": message}) + b"\n"
        try:
            with trio.move_on_after(self.config.close_timeout):
                await stream.send_all(response(status, body, content_type="application/json"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        await stream.aclose()

    def _authorized(self, head: RequestHead) -> tuple[bool, str]:
        token = self.config.token
        protocols = head.header_list("sec-websocket-protocol")
        presented, where = presented_token(head.header("authorization"), protocols)
        if token is None:
            return True, where
        return token_matches(presented, token), where

    async def _http(self, stream: trio.SocketStream, head: RequestHead) -> None:
        if head.method not in ("GET", "HEAD"):
            await self._refuse(stream, 405, f"method {head.method} not allowed", "method")
            return
        if head.path == "/healthz":
            body = orjson.dumps({"status": "ok", "closing": self.closing.is_set()}) + b"\n"
            data = response(200, body, content_type="application/json")
        elif head.path == "/metrics":
            if not self._authorized(head)[0]:
                await self._refuse(stream, 401, "a valid token is required", "auth")
                return
            text = metrics.render(await self.metrics())
            data = response(200, text.encode("utf-8"), content_type=metrics.CONTENT_TYPE)
        elif head.path in PAGE_FILES:
            name, kind = PAGE_FILES[head.path]
            page = resources.files("pitrio.transports.daemon").joinpath("web", name)
            data = response(
                200,
                page.read_bytes(),
                content_type=kind,
                headers=(("Content-Security-Policy", PAGE_POLICY),),
            )
        elif head.path.startswith(("/v1/sessions", HOST_PATH)):
            await self._refuse(stream, 426, "this endpoint speaks websocket", "not_websocket")
            return
        else:
            await self._refuse(stream, 404, f"no such page: {head.path}", "not_found")
            return
        if head.method == "HEAD":
            data = data.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(data)
        await stream.aclose()

    async def _websocket(self, stream: trio.SocketStream, head: RequestHead, raw: bytes) -> None:
        origin = head.header("origin")
        if not origin_allowed(origin, self._origins):
            await self._refuse(stream, 403, f"origin not allowed: {origin}", "origin")
            return
        authorized, where = self._authorized(head)
        if not authorized:
            await self._refuse(stream, 401, "a valid token is required", "auth")
            return
        hosted = None
        if head.path.startswith(SESSIONS_PREFIX):
            try:
                session_id = validate_session_id(head.path[len(SESSIONS_PREFIX) :])
                hosted = await self.host.get(session_id)
            except InvalidSessionIdError as exc:
                await self._refuse(stream, 400, str(exc), "bad_session_id")
                return
            except SessionNotFoundError as exc:
                await self._refuse(stream, 404, str(exc), "unknown_session")
                return
        elif head.path != HOST_PATH:
            await self._refuse(stream, 404, f"no such endpoint: {head.path}", "not_found")
            return
        protocols = head.header_list("sec-websocket-protocol")
        chosen = SUBPROTOCOL if SUBPROTOCOL in protocols else None
        if where == "subprotocol" and chosen is None:
            # A browser offering only the token would have it echoed: refuse instead.
            await self._refuse(stream, 400, f"offer the {SUBPROTOCOL} subprotocol", "protocol")
            return
        async with trio.open_nursery() as nursery:
            request = await wrap_server_stream(
                nursery,
                PrefixedStream(stream, raw),
                max_message_size=self.config.max_message_size,
                close_timeout=self.config.close_timeout,
            )
            ws = await request.accept(subprotocol=chosen)
            self._socket_opened()
            connection = _connection_fields(stream, head, hosted.id if hosted else None)
            log_event(log, "client_connected", **connection)
            opened = trio.current_time()
            try:
                if hosted is not None:
                    updates: UpdateFormat = "full" if head.param("updates") == "full" else "delta"
                    await SessionSocket(self, ws, hosted, updates=updates).run(
                        since=since_param(head.param("since")),
                        stream=head.param("stream"),
                    )
                else:
                    await self.host_socket(ws).run()
            finally:
                self._socket_closed()
                nursery.cancel_scope.cancel()
                seconds = round(trio.current_time() - opened, 3)
                log_event(log, "client_disconnected", **connection, seconds=seconds)

    def host_socket(self, ws: WebSocketConnection) -> HostSocket:
        """The ``/v1/host`` endpoint for one client (a worker's lists across workers)."""
        return HostSocket(self, ws)

    # -- metrics ---------------------------------------------------------------------------

    async def metrics(self) -> list[metrics.Metric]:
        """Every metric, read now."""
        stats = await self.host.host_stats()
        families = [
            metrics.Metric(
                "pitrio_sessions",
                "gauge",
                "Sessions known to the daemon, by status.",
                tuple(
                    ({"status": status}, count) for status, count in sorted(stats.sessions.items())
                ),
            ),
            metrics.gauge("pitrio_runs_active", "Sessions with a run in progress.", stats.running),
            metrics.gauge(
                "pitrio_queued_messages", "Steering and follow-up messages queued.", stats.queued
            ),
            metrics.gauge("pitrio_session_clients", "Clients attached to sessions.", stats.clients),
            metrics.Metric(
                "pitrio_connections",
                "gauge",
                "Open websocket connections, by endpoint.",
                (
                    ({"endpoint": "session"}, self.counters["session_connections"]),
                    ({"endpoint": "host"}, self.counters["host_connections"]),
                ),
            ),
            metrics.counter("pitrio_events_total", "Session events relayed.", stats.events_total),
            metrics.counter(
                "pitrio_updates_coalesced_total",
                "Events merged into others for slow clients.",
                stats.coalesced_total,
            ),
            metrics.counter(
                "pitrio_clients_dropped_total",
                "Clients closed for being too slow (1008).",
                self.counters["slow_closes"],
            ),
            metrics.counter(
                "pitrio_session_restarts_total",
                "Session trees restarted after a crash.",
                stats.restarts_total,
            ),
            metrics.counter(
                "pitrio_session_evictions_total",
                "Idle sessions evicted from memory.",
                stats.evictions_total,
            ),
            metrics.gauge(
                "pitrio_replay_bytes", "Bytes held by replay buffers.", stats.replay_bytes
            ),
            metrics.counter(
                "pitrio_resumes_total", "Resumes served from replay.", self.counters["resumes"]
            ),
            metrics.counter(
                "pitrio_resyncs_total", "Resumes answered with resync.", self.counters["resyncs"]
            ),
            metrics.counter(
                "pitrio_rate_limited_total",
                "Messages dropped by the per-connection rate limit.",
                self.counters["rate_limited"],
            ),
            metrics.Metric(
                "pitrio_rejected_requests_total",
                "counter",
                "Requests refused before any websocket was opened, by reason.",
                tuple(({"reason": r}, n) for r, n in sorted(self.rejected.items())),
            ),
            metrics.gauge(
                "pitrio_uptime_seconds",
                "Seconds since the daemon started.",
                time.time() - self.started_at,
            ),
        ]
        # The shared session store's pool and lease figures (``--store postgresql://``).
        families.extend(
            metrics.Metric(name, "counter" if kind == "counter" else "gauge", text, (({}, value),))
            for name, kind, text, value in stats.store_metrics
        )
        return families


def remote_address(stream: trio.abc.Stream) -> str | None:
    """``host:port`` of the peer of a socket stream (``None`` when it is gone or not one)."""
    sock = getattr(stream, "socket", None)
    try:
        peer = sock.getpeername() if sock is not None else None
    except OSError:
        return None
    if isinstance(peer, tuple) and len(peer) >= 2:
        host = f"[{peer[0]}]" if ":" in str(peer[0]) else str(peer[0])
        return f"{host}:{peer[1]}"
    return str(peer) if peer else None


def _connection_fields(
    stream: trio.abc.Stream, head: RequestHead, session_id: str | None
) -> dict[str, Any]:
    """What the connect and disconnect log events say about a websocket client."""
    fields: dict[str, Any] = {
        "endpoint": "session" if session_id is not None else "host",
        "remote": remote_address(stream),
    }
    if session_id is not None:
        fields["session"] = session_id
    forwarded = head.header("x-forwarded-for")
    if forwarded:
        fields["forwarded_for"] = forwarded  # the client behind a reverse proxy
    return fields


def since_param(text: str | None) -> int | None:
    """The ``?since=`` of a session URL: a sequence number (ASCII digits, at most 18 of them,
    so no conversion can fail), else ``None`` (no resume)."""
    if text is None or not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    return int(text)


def _parse(head: bytes) -> RequestHead:
    from pitrio.transports.daemon.http import parse_head

    return parse_head(head)
