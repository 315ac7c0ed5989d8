"""The acceptor's two links to a worker, as trio shells over :mod:`.wire`.

:func:`send_connection` / :func:`receive_connection` pass one client socket (its descriptor
with ``SCM_RIGHTS``, and the bytes already read from it) over the hand-off socket.
:class:`ControlChannel` carries requests, their answers and notices both ways over the control
socket; each request is answered by its own task, so a slow one (a listing) holds up no other.
"""

from __future__ import annotations

import array
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from pitrio.errors import PitrioError
from pitrio.transports.daemon.workers.wire import (
    MAX_HANDOFF,
    ControlDecoder,
    WireError,
    decode_handoff,
    encode_control,
    encode_handoff,
)

log = logging.getLogger("pitrio.daemon.workers")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
"""Answers one request or notice from the other side (its result is the answer's data)."""


class PeerGoneError(PitrioError):
    """The other end of a control channel closed (a worker died, the acceptor left)."""

    retryable = True


class RemoteError(PitrioError):
    """The other side answered a request with an error (its text)."""


async def send_connection(
    sock: trio.socket.SocketType, fd: int, meta: dict[str, Any], data: bytes
) -> None:
    """Pass the descriptor ``fd`` and the bytes read from it; the caller still closes its own
    copy afterwards (the receiver holds a duplicate)."""
    fds = array.array("i", [fd])
    await sock.sendmsg([encode_handoff(meta, data)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])


async def receive_connection(
    sock: trio.socket.SocketType,
) -> tuple[socket.socket, dict[str, Any], bytes] | None:
    """The next connection handed over: a socket, its meta and the bytes already read; ``None``
    once the acceptor closed its end."""
    while True:
        message, ancillary, flags, _ = await sock.recvmsg(
            MAX_HANDOFF, socket.CMSG_SPACE(array.array("i", [0]).itemsize)
        )
        fds = array.array("i")
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                usable = len(payload) - len(payload) % fds.itemsize
                fds.frombytes(payload[:usable])
        if not message and not fds:
            return None
        if len(fds) != 1 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
            for fd in fds:  # malformed: nothing is served, nothing leaks
                socket.close(fd)
            log.error("hand-off without exactly one descriptor: dropped")
            continue
        client = socket.socket(fileno=fds[0])
        try:
            meta, data = decode_handoff(message)
        except (WireError, ValueError):
            client.close()
            log.error("malformed hand-off: dropped")
            continue
        return client, meta, data


class ControlChannel:
    """Requests and notices over one control socket, in both directions."""

    def __init__(self, stream: trio.SocketStream, handler: Handler) -> None:
        self.stream = stream
        self.handler = handler
        self.closed = trio.Event()
        self._send_lock = trio.Lock()
        self._ids = 0
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}

    async def run(self) -> None:
        """Read until the other side closes; answers requests meanwhile."""
        decoder = ControlDecoder()
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    try:
                        data = await self.stream.receive_some(1 << 16)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        data = b""
                    if not data:
                        break
                    for message in decoder.feed(data):
                        self._take(nursery, message)
                nursery.cancel_scope.cancel()
        finally:
            self.closed.set()
            for waiter in self._waiting.values():
                waiter.close()
            self._waiting.clear()

    def _take(self, nursery: trio.Nursery, message: dict[str, Any]) -> None:
        reply_to = message.get("re")
        if reply_to is not None:
            waiter = self._waiting.pop(reply_to, None)
            if waiter is not None:
                waiter.send_nowait(message)  # capacity 1, one reply per request
                waiter.close()
            return
        nursery.start_soon(self._answer, message)

    async def _answer(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        try:
            data = await self.handler(message)
        except PitrioError as exc:
            answer: dict[str, Any] = {"re": request_id, "error": str(exc)}
        except Exception as exc:  # a bug answering one request: answered, not fatal
            log.exception("control request %s failed", message.get("op"))
            answer = {"re": request_id, "error": f"{type(exc).__name__}: {exc}"}
        else:
            answer = {"re": request_id, "ok": data}
        if request_id is not None:
            await self._send(answer)

    async def _send(self, message: dict[str, Any]) -> None:
        data = encode_control(message)
        async with self._send_lock:
            try:
                await self.stream.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                raise PeerGoneError("the other process is gone") from exc

    async def notify(self, op: str, **fields: Any) -> None:
        """Send a notice (no answer); dropped silently once the other side is gone."""
        with contextlib.suppress(PeerGoneError):
            await self._send({"op": op, **fields})

    async def call(self, op: str, **fields: Any) -> Any:
        """Send a request and wait for its answer's data; :class:`RemoteError` for an error
        answer, :class:`PeerGoneError` when the other side closes first."""
        if self.closed.is_set():
            raise PeerGoneError("the other process is gone")
        self._ids += 1
        request_id = self._ids
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[request_id] = send
        try:
            await self._send({"id": request_id, "op": op, **fields})
            try:
                answer = await receive.receive()
            except trio.EndOfChannel:
                raise PeerGoneError("the other process is gone") from None
        finally:
            self._waiting.pop(request_id, None)
        if "error" in answer:
            raise RemoteError(str(answer["error"]))
        return answer.get("ok")
