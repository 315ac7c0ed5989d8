"""What both websocket endpoints of the daemon share: the socket, its cancel scope, the rate
limit, keepalive pings, reading well-formed command frames, and closing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.logs import event as log_event
from pitrio.transports.daemon.context import DaemonContext
from pitrio.transports.daemon.frames import problem_of
from pitrio.transports.daemon.security import RateLimiter
from pitrio.transports.daemon.websocket import close_reason
from pitrio.transports.rpc.protocol import Request, parse_record

log = logging.getLogger("pitrio.daemon")

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_POLICY = 1008
CLOSE_PING_TIMEOUT = 1011
REFUSED_FRAME_CODES = frozenset({1002, 1007, 1009})
SHUTDOWN_FLUSH_SECONDS = 1.5
"""How long a connection may keep sending queued frames once the daemon shuts down."""


def parse_error(message: str) -> dict[str, Any]:
    """A parse-error response (pi's shape: no id, command ``parse``)."""
    return {
        "type": "response",
        "command": "parse",
        "success": False,
        "error": f"Failed to parse command: {message}",
    }


class ClientSocket:
    """What both endpoints share: the websocket, a cancel scope, rate limit, close."""

    def __init__(self, server: DaemonContext, ws: WebSocketConnection) -> None:
        self.server = server
        self.ws = ws
        config = server.config
        self.limiter = RateLimiter(config.message_rate, config.message_burst)
        self.scope = trio.CancelScope()
        self.closed = False
        self._close_done = trio.Event()

    async def close(self, code: int, reason: str) -> None:
        """Close the websocket (waiting at most ``close_timeout`` for a stalled peer); a
        second call waits for the first one to finish."""
        if self.closed:
            await self._close_done.wait()
            return
        self.closed = True
        self._note_refused()
        try:
            with trio.move_on_after(self.server.config.close_timeout):
                await self.ws.aclose(code, close_reason(reason))
        finally:
            self._close_done.set()
            self.scope.cancel()

    async def keepalive(self) -> None:
        """Ping the peer every ``ping_interval``; close the connection when a pong does not
        come within ``ping_timeout`` (the peer vanished, or stopped reading altogether)."""
        config = self.server.config
        if config.ping_interval is None:
            return
        while True:
            await trio.sleep(config.ping_interval)
            with trio.move_on_after(config.ping_timeout) as waiting:
                try:
                    await self.ws.ping()
                except ConnectionClosed:
                    return
            if waiting.cancelled_caught:
                self.server.counters["ping_timeouts"] += 1
                await self.close(CLOSE_PING_TIMEOUT, f"no pong within {config.ping_timeout:g} s")
                return

    def allow(self) -> bool:
        """Whether the rate limit lets one more message through."""
        if self.limiter.allow(trio.current_time()):
            return True
        self.server.counters["rate_limited"] += 1
        return False

    async def next_request(self, push: Callable[[dict[str, Any]], None]) -> Request | None:
        """The next well-formed command frame, or ``None`` once the socket closed.

        Frames over the rate limit, binary frames and records that do not parse are answered
        through ``push`` with an error and skipped; so is a record whose reading fails in any
        other way (the connection outlives every frame).
        """
        while True:
            try:
                message = await self.ws.get_message()
            except ConnectionClosed:
                return None  # counted by close() if a bad frame ended it
            if not self.allow():
                push(self.rate_error())
                continue
            if isinstance(message, bytes):
                push(parse_error("binary frames are not supported; send JSON text"))
                continue
            try:
                parsed = parse_record(message)
            except Exception as exc:  # e.g. RecursionError writing the error about it
                log.info("a frame that failed to parse: %r", exc)
                parsed = parse_error(problem_of(exc))
            if isinstance(parsed, Request):
                return parsed
            push(parsed)

    def _note_refused(self) -> None:
        """Count and log a connection the websocket layer ended over a bad frame: invalid UTF-8
        (1007), a protocol violation (1002), a message over the size limit (1009); the client
        got a close frame with the code and reason (:mod:`.websocket`).

        Read from the connection's close reason when the socket closes, not where the reader
        meets the close: the sender may meet it first and cancel the reader, which then never
        sees it."""
        reason = self.ws.closed
        if reason is not None and reason.code in REFUSED_FRAME_CODES:
            self.server.counters["refused_frames"] += 1
            log_event(log, "frame_refused", code=reason.code, reason=reason.reason)

    def rate_error(self) -> dict[str, Any]:
        """The response to a frame over the rate limit."""
        config = self.server.config
        return {
            "type": "response",
            "command": "rate_limit",
            "success": False,
            "error": f"Rate limit exceeded: at most {config.message_rate:g} messages per second "
            f"(bursts of {config.message_burst}); message dropped",
        }
