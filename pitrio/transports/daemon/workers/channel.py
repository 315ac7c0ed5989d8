"""The acceptor's two links to a worker, as trio shells over :mod:`.wire`.

:func:`send_connection` passes one client socket (its descriptor with ``SCM_RIGHTS``, and the
bytes already read from it) over the hand-off socket; :class:`HandoffLink` is the acceptor's
end of it, which waits for the worker's acknowledgement of each connection before letting go
of its own copy, and :class:`HandoffReceiver` the worker's.
:class:`ControlChannel` carries requests, their answers and notices both ways over the control
socket; each request is answered by its own task, so a slow one (a listing) holds up no other.
"""

from __future__ import annotations

import array
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import Any, cast

import trio

from pitrio.errors import PitrioError
from pitrio.transports.daemon.workers.wire import (
    MAX_HANDOFF,
    ControlDecoder,
    WireError,
    decode_ack,
    decode_handoff,
    encode_ack,
    encode_control,
    encode_handoff,
)

log = logging.getLogger("pitrio.daemon.workers")

Handler = Callable[[dict[str, Any]], Awaitable[Any]]
"""Answers one request from the other side (its result is the answer's data)."""
NoticeHandler = Callable[[dict[str, Any]], None]
"""Takes one notice from the other side, at once and in the order they were sent."""


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


Handed = tuple[socket.socket, dict[str, Any], bytes]
"""A connection handed over: its socket, its meta and the bytes the acceptor already read."""
_CLOSED = object()
_ANCILLARY = socket.CMSG_SPACE(array.array("i", [0]).itemsize)


def _handed(message: bytes, ancillary: list[Any], flags: int) -> Handed | object | None:
    """One hand-off message read: the connection, :data:`_CLOSED` (the acceptor closed its
    end) or ``None`` (malformed: dropped, its descriptors closed, nothing leaks)."""
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % fds.itemsize
            fds.frombytes(payload[:usable])
    if not message and not fds:
        return _CLOSED
    if len(fds) != 1 or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            socket.close(fd)
        log.error("hand-off without exactly one descriptor: dropped")
        return None
    client = socket.socket(fileno=fds[0])
    try:
        meta, data = decode_handoff(message)
    except (WireError, ValueError):
        client.close()
        log.error("malformed hand-off: dropped")
        return None
    return client, meta, data


class HandoffReceiver:
    """A worker's end of its hand-off socket: the connections waiting are taken in one
    wake-up, and acknowledged without one when the socket has room.

    A worker busy streaming to hundreds of clients runs each of its tasks about once per
    pass of the scheduler; reading one hand-off per wake-up (each ``await`` on a trio socket
    is one) let a burst of connections wait longer than the acceptor's handshake timeout,
    which then answered them 503. Only this task reads or writes the socket."""

    BATCH = 256
    """Hand-offs taken per wake-up at most (the others wait for the next one)."""

    def __init__(self, raw: socket.socket) -> None:
        raw.setblocking(False)
        self.raw = raw
        self._closed = False

    async def receive(self) -> list[Handed] | None:
        """The connections waiting (at least one: waits for the first); ``None`` once the
        acceptor closed its end and every connection before that was returned."""
        while not self._closed:
            await trio.lowlevel.wait_readable(self.raw)
            batch: list[Handed] = []
            while len(batch) < self.BATCH:
                try:
                    message, ancillary, flags, _ = self.raw.recvmsg(MAX_HANDOFF, _ANCILLARY)
                except BlockingIOError:
                    break
                except OSError:
                    self._closed = True
                    break
                handed = _handed(message, ancillary, flags)
                if handed is _CLOSED:
                    self._closed = True
                    break
                if handed is not None:
                    batch.append(cast(Handed, handed))
            if batch:
                return batch
        return None

    async def acknowledge(self, meta: dict[str, Any]) -> None:
        """Tell the acceptor that the connection handed over with ``meta`` is this worker's
        now (a hand-off without an ``id`` needs none); waits only when the buffer is full."""
        handoff = meta.get("id")
        if not isinstance(handoff, int):
            return
        message = encode_ack(handoff)
        while True:
            try:
                self.raw.send(message)
                return
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.raw)
            except OSError:
                return  # the acceptor is gone: the worker exits anyway

    def close(self) -> None:
        """Close the worker's end."""
        self.raw.close()


class HandoffLink:
    """The acceptor's end of one worker's hand-off socket.

    :meth:`hand` passes a connection and returns once the worker acknowledged it (``True``)
    or went away first (``False``: its end closed, so it never took the descriptor or died
    holding it; the caller still has its own copy and may pass it to another worker). A worker
    acknowledges before it reads from the connection, so a connection given back was never
    read by it. :meth:`run` reads the acknowledgements."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self.sock = sock
        self.gone = trio.Event()
        self._ids = 0
        self._pending: dict[int, trio.Event] = {}
        self._acked: set[int] = set()
        self._sending = trio.Lock()
        """One hand-off written at a time: when a burst of connections fills the socket's
        buffer, a second task waiting to write the same descriptor is an error in trio
        (``BusyResourceError``), so the others queue here, in arrival order."""

    async def run(self) -> None:
        """Read acknowledgements until the worker's end closes (it exited)."""
        try:
            while True:
                try:
                    message = await self.sock.recv(MAX_HANDOFF)
                except (OSError, trio.ClosedResourceError):  # broken, or closed by us
                    message = b""
                if not message:
                    return
                try:
                    handoff = decode_ack(message)
                except WireError as exc:
                    log.error("hand-off acknowledgement dropped: %s", exc)
                    continue
                waiting = self._pending.get(handoff)
                if waiting is not None:
                    self._acked.add(handoff)
                    waiting.set()
        finally:
            self.gone.set()
            for waiting in self._pending.values():
                waiting.set()

    async def hand(self, fd: int, meta: dict[str, Any], data: bytes) -> bool:
        """Pass ``fd`` and ``data``; whether the worker acknowledged it (raises ``OSError``
        when the socket refuses the message)."""
        if self.gone.is_set():
            return False
        self._ids += 1
        handoff = self._ids
        done = self._pending[handoff] = trio.Event()
        try:
            async with self._sending:
                await send_connection(self.sock, fd, {**meta, "id": handoff}, data)
            await done.wait()
            return handoff in self._acked
        finally:
            del self._pending[handoff]
            self._acked.discard(handoff)

    def close(self) -> None:
        """Close the acceptor's end."""
        self.sock.close()


class ControlChannel:
    """Requests and notices over one control socket, in both directions. Each request is
    answered by a task of its own (a slow one holds up no other, so their order is not
    kept); notices go to ``notices`` as they are read, in order (host events of one session
    must stay in order), so it must not block."""

    def __init__(self, stream: trio.SocketStream, handler: Handler, notices: NoticeHandler) -> None:
        self.stream = stream
        self.handler = handler
        self.notices = notices
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
        if message.get("id") is None:
            try:
                self.notices(message)
            except Exception:  # a bug taking one notice: logged, the link goes on
                log.exception("control notice %s failed", message.get("op"))
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
