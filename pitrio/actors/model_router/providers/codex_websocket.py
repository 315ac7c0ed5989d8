"""Codex over a WebSocket: pi 0.73.1's ``websocket`` transport of ``openai-codex-responses``.

Facts from pi-ai's ``openai-codex-responses.js`` (and a capture of what it sends). The
setting ``transport`` (``sse``, ``websocket``, ``websocket-cached``, ``auto``; pi's default
``auto``) picks it; anything but ``sse`` tries the WebSocket first:

* URL: the SSE endpoint with ``https`` -> ``wss`` (``http`` -> ``ws``).
* Handshake headers: the SSE request's, without ``accept``, ``content-type`` and
  ``OpenAI-Beta: responses=experimental``; instead ``openai-beta:
  responses_websockets=2026-02-06``, and ``session-id`` and ``x-client-request-id`` both the
  session id (a random UUID without a session).
* Framing: one text message ``{"type": "response.create", ...the SSE body}`` per request; the
  server answers with one text message per Responses event (the SSE events' JSON) up to
  ``response.completed`` / ``response.done`` / ``response.incomplete``.
* A session keeps its connection for the next request (idle for 5 minutes at most); a second
  request while it is busy opens one of its own. With ``websocket-cached`` and ``auto`` the
  next request on a kept connection sends only the new input items with
  ``previous_response_id`` when the rest of the body is unchanged and its input extends the
  previous input plus the previous answer (:func:`continued_body`).
* A transport failure before the first event falls back to SSE for that request, and that
  session uses SSE from then on (a failure after the first event fails the request, and the
  session too falls back); a Codex error event or a malformed message is not a transport
  failure.

The client is wsproto (sans-IO) over a trio stream read by the request's own task: no
background task, so a kept connection is not read while idle; one that received anything
meanwhile (a close, a ping) is not reused (:meth:`.codex_socket.WsprotoSocket.reusable`, in a
module of its own: wsproto is imported with the first WebSocket request).
"""

from __future__ import annotations

import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs
import orjson
import trio

WEBSOCKET_BETA = "responses_websockets=2026-02-06"
SESSION_IDLE_S = 5 * 60.0
"""How long pi keeps a session's idle connection."""
TRANSPORTS = ("sse", "websocket", "websocket-cached", "auto")
CACHED_TRANSPORTS = ("websocket-cached", "auto")
MESSAGE_TOO_BIG = 1009
ABNORMAL_CLOSURE = 1006
"""The close code a client reports when the connection ended without a close frame."""
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""A message longer than this (characters) closes the connection with 1009."""
READ_SIZE = 65536
"""How much a read of the stream asks for."""
_DROPPED_HEADERS = ("accept", "content-type", "openai-beta")


class WebSocketFailure(Exception):
    """The WebSocket transport failed (connect, handshake, close, timeout): a transport
    failure, which may fall back to SSE. The text is what the user reads."""


def websocket_url(url: str) -> str:
    """``url`` (the SSE endpoint) with its WebSocket scheme."""
    parts = urllib.parse.urlsplit(url)
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme, parts.scheme)
    return urllib.parse.urlunsplit(parts._replace(scheme=scheme))


def handshake_headers(sse_headers: Mapping[str, str], session_id: str | None) -> dict[str, str]:
    """The handshake's headers from the SSE request's (lower-cased names)."""
    request_id = session_id or str(uuid.uuid4())
    headers = {
        name: value
        for name, value in sse_headers.items()
        if name not in _DROPPED_HEADERS and name not in ("session-id", "x-client-request-id")
    }
    headers["openai-beta"] = WEBSOCKET_BETA
    headers["x-client-request-id"] = request_id
    headers["session-id"] = request_id
    return headers


def close_text(code: int | None, reason: str) -> str:
    """pi's text for a connection closed before the answer was complete."""
    text = "WebSocket closed"
    if code is not None:
        text += f" {code}"
    if reason:
        text += f" {reason}"
    elif code == MESSAGE_TOO_BIG:
        text += " message too big"
    return text


# -- continuation (pure) ---------------------------------------------------------------------


@attrs.frozen
class Continuation:
    """What a kept connection remembers of its last request: its full body, the answer's
    response id and the answer as input items."""

    body: Mapping[str, Any]
    response_id: str
    items: tuple[Any, ...]


def _without_input(body: Mapping[str, Any]) -> bytes:
    rest = {k: v for k, v in body.items() if k not in ("input", "previous_response_id")}
    return orjson.dumps(rest)


def continued_body(body: dict[str, Any], continuation: Continuation) -> dict[str, Any] | None:
    """``body`` as a continuation of the previous request (only the new input items, with
    ``previous_response_id``), or ``None`` when it does not continue it."""
    if _without_input(body) != _without_input(continuation.body):
        return None
    current = list(body.get("input") or [])
    baseline = [*(continuation.body.get("input") or []), *continuation.items]
    if len(current) < len(baseline):
        return None
    if orjson.dumps(current[: len(baseline)]) != orjson.dumps(baseline):
        return None
    return {
        **body,
        "previous_response_id": continuation.response_id,
        "input": current[len(baseline) :],
    }


# -- the sessions' connections ---------------------------------------------------------------


class CodexSocket(Protocol):
    """What the pool and the provider use of one connection (the class is
    :class:`.codex_socket.WsprotoSocket`, imported with the first WebSocket request)."""

    idle_since: float
    busy: bool
    continuation: Continuation | None

    @property
    def open(self) -> bool:
        """Whether neither side has started closing."""

    def reusable(self) -> bool:
        """Open, and the server sent nothing while it was idle."""

    async def send_text(self, text: str) -> None:
        """Send one text message."""

    async def receive_text(self, read_timeout: float) -> str:
        """The next whole message as text."""

    async def aclose(self, code: int = 1000, reason: str = "done") -> None:
        """Close; never raises."""


@attrs.define
class Lease:
    """A connection lent to one request; ``kept``: the session's cached one."""

    socket: CodexSocket
    kept: bool


class CodexSockets:
    """The kept connection of each session, and the sessions that fell back to SSE. Owned by
    one provider; trio runs its tasks one at a time, so the checks and updates between two
    awaits are atomic."""

    def __init__(self) -> None:
        self.by_session: dict[str, CodexSocket] = {}
        self.sse_sessions: set[str] = set()

    async def acquire(
        self,
        session_id: str | None,
        connect: Callable[[], Any],
    ) -> Lease:
        """A connection for one request of ``session_id`` (``connect()`` opens a new one)."""
        await self._sweep(keep=session_id)
        if session_id is None:
            return Lease(await connect(), kept=False)
        cached = self.by_session.get(session_id)
        if cached is not None:
            if cached.busy:
                return Lease(await connect(), kept=False)
            del self.by_session[session_id]
            if trio.current_time() - cached.idle_since < SESSION_IDLE_S and cached.reusable():
                cached.busy = True
                self.by_session[session_id] = cached
                return Lease(cached, kept=True)
            await cached.aclose(1000, "idle_timeout")
        socket: CodexSocket = await connect()
        socket.busy = True
        self.by_session[session_id] = socket
        return Lease(socket, kept=True)

    async def _sweep(self, keep: str | None) -> None:
        # No timer closes an idle connection (pi's has one), so each request closes those
        # idle too long or closed by the server: an ended session's socket does not linger
        # past the next request of any session.
        now = trio.current_time()
        for name, socket in list(self.by_session.items()):
            if name == keep or socket.busy:
                continue
            if now - socket.idle_since >= SESSION_IDLE_S or not socket.reusable():
                del self.by_session[name]
                await socket.aclose(1000, "idle_timeout")

    async def release(self, session_id: str | None, lease: Lease, *, keep: bool) -> None:
        """Give ``lease`` back: kept for the session's next request, or closed."""
        socket = lease.socket
        if lease.kept and keep and socket.open and session_id is not None:
            socket.busy = False
            socket.idle_since = trio.current_time()
            return
        if lease.kept and session_id is not None and self.by_session.get(session_id) is socket:
            del self.by_session[session_id]
        await socket.aclose()

    async def aclose(self, session_id: str | None = None) -> None:
        """Close the kept connection of ``session_id`` (every one without)."""
        names = [session_id] if session_id is not None else list(self.by_session)
        for name in names:
            socket = self.by_session.pop(name, None)
            if socket is not None:
                await socket.aclose(1000, "debug_close")
