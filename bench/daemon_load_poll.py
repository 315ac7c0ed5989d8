"""The load generator's default clients: every session of a process on one ``epoll`` loop.

``bench/daemon_load_client.py`` runs these unless ``--client`` names a trio client. The
load generators share the daemon's two cores, so their CPU per delta is taken from the daemon
being measured: trio's ``receive_some`` costs each frame two ``recv`` calls, two ``epoll_ctl``
changes and a trip through the scheduler, and wsproto's parser builds several objects per
frame. Here each socket is registered once (level-triggered), a readable socket is read
once, in large pieces, and the server's frames are cut out by hand (a server's frames are
unmasked, so a frame is a header and its payload). What each client does and checks is the
trio client's: :class:`~bench.daemon_load_client.TurnReader` reads every frame of a turn.

Pure pieces (:class:`ServerFrames`, :func:`client_frame`, :func:`handshake_request`,
:func:`handshake_answer`) carry the wire format; :func:`run_poll` is the loop.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import itertools
import os
import random
import select
import socket
import time
from typing import Any

import orjson

from bench.daemon_load_client import Closed, Tally, TurnReader, turn_id
from pitrio.actors.model_router.providers.faux_load import LoadRequest, load_prompt

READ_SIZE = 256 * 1024
"""Bytes taken from a socket per read."""
_READ_BUFFER = bytearray(READ_SIZE)
_READ_VIEW = memoryview(_READ_BUFFER)
"""Every socket of the process is read into this one buffer, and what a read got is copied
out: ``socket.recv(READ_SIZE)`` allocates a new 256 KiB object per read, above glibc's
``mmap`` threshold, which cost ~13 µs of a ~20 µs read of one small frame (an ``mmap``,
page faults and an ``munmap`` per delta, in a process whose CPU is taken from the daemon's
two cores; issue 38, helper daemon4)."""
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG = 0x1, 0x8, 0x9, 0xA


class ServerFrames:
    """Cuts a server's websocket frames out of the bytes read: whole messages (continuations
    joined) and control frames, as ``(opcode, payload)``."""

    def __init__(self) -> None:
        self._pending = b""
        self._parts: list[bytes] = []
        self._opcode = TEXT

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        """Every message and control frame that ``data`` completes, in order."""
        if (
            not self._pending
            and len(data) >= 2
            and data[0] == 0x81
            and data[1] < 126
            and len(data) == data[1] + 2
        ):
            # The usual read: one whole final text frame of under 126 bytes (unmasked: its
            # length byte is below 128), what the general path below makes of it.
            self._opcode, self._parts = TEXT, []
            return [(TEXT, data[2:])]
        if self._pending:
            data = self._pending + data
        out: list[tuple[int, bytes]] = []
        pos, size = 0, len(data)
        while size - pos >= 2:
            first, second = data[pos], data[pos + 1]
            if second & 0x80:
                raise Closed(1002, "a masked frame from the server")
            length, head = second & 0x7F, 2
            if length == 126:
                if size - pos < 4:
                    break
                length, head = int.from_bytes(data[pos + 2 : pos + 4], "big"), 4
            elif length == 127:
                if size - pos < 10:
                    break
                length, head = int.from_bytes(data[pos + 2 : pos + 10], "big"), 10
            end = pos + head + length
            if end > size:
                break
            payload = data[pos + head : end]
            pos = end
            opcode = first & 0x0F
            if opcode >= CLOSE:
                out.append((opcode, payload))
                continue
            if opcode:  # a new message (0 continues the one before)
                self._opcode, self._parts = opcode, []
            if first & 0x80:
                out.append((self._opcode, b"".join([*self._parts, payload])))
                self._parts = []
            else:
                self._parts.append(payload)
        self._pending = data[pos:]
        return out


def client_frame(opcode: int, payload: bytes) -> bytes:
    """A client's final frame: masked with four random bytes, as RFC 6455 requires."""
    size = len(payload)
    if size < 126:
        head = bytes((0x80 | opcode, 0x80 | size))
    elif size < 1 << 16:
        head = bytes((0x80 | opcode, 0x80 | 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((0x80 | opcode, 0x80 | 127)) + size.to_bytes(8, "big")
    mask = os.urandom(4)
    key = (mask * (size // 4 + 1))[:size]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(size, "big")
    return head + mask + masked


def handshake_request(port: int, target: str) -> tuple[bytes, bytes]:
    """The upgrade request for ``target``, and the ``Sec-WebSocket-Accept`` it must get."""
    key = base64.b64encode(os.urandom(16))
    request = (
        f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key.decode()}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n"
    ).encode()
    return request, base64.b64encode(hashlib.sha1(key + GUID).digest())


def handshake_answer(data: bytes, accept: bytes) -> tuple[bool, bytes] | None:
    """``None`` until the answer's head is complete; then whether it accepted the upgrade
    (101 and the expected accept key) and the bytes after the head (frames already sent)."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = data[:end].lower()
    ok = head.startswith(b"http/1.1 101") and b"sec-websocket-accept: " + accept.lower() in head
    return ok, data[end + 4 :]


class PollSession:
    """One session's client: connect, attach, turns until the window ends."""

    def __init__(self, session: str, config: dict[str, Any], tally: Tally, seed: int) -> None:
        self.session = session
        self.config = config
        self.tally = tally
        self.rng = random.Random(seed)
        self.sock: socket.socket | None = None
        self.frames = ServerFrames()
        self.accept = b""
        self.head: bytes | None = b""  # the handshake's answer so far (None once done)
        self.attached = False
        self.reader: TurnReader | None = None
        self.turn = 0
        self.last_seq = 0
        self.done = False

    def connect(self) -> socket.socket:
        """Open the connection and send the upgrade request (loopback: neither waits)."""
        sock = socket.create_connection(("127.0.0.1", self.config["port"]), timeout=10)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        request, self.accept = handshake_request(
            self.config["port"], f"/v1/sessions/{self.session}"
        )
        sock.sendall(request)
        sock.setblocking(False)
        self.sock = sock
        return sock

    def send(self, opcode: int, payload: bytes) -> None:
        """One frame, whole (waiting for room in the rare case the socket is full)."""
        assert self.sock is not None
        data = client_frame(opcode, payload)
        while data:
            try:
                data = data[self.sock.send(data) :]
            except BlockingIOError:
                select.select([], [self.sock], [], 5)

    def readable(self) -> float | None:
        """Read what the socket has; when a turn ended, when to prompt again (monotonic s)."""
        assert self.sock is not None
        size = self.sock.recv_into(_READ_BUFFER)
        data = _READ_VIEW[:size].tobytes()
        # The frames' arrival: after the read, never before it (a chunk stamped between a
        # clock read and the recv would seem handed off after it arrived, and its latency
        # wrap to 17.9 minutes).
        now_us = time.monotonic_ns() // 1000
        if not data:
            raise Closed(1006, "connection lost")
        if self.head is not None:
            self.head += data
            answer = handshake_answer(self.head, self.accept)
            if answer is None:
                return None
            ok, data = answer
            if not ok:
                raise Closed(None, "handshake refused")
            self.head = None
        after: float | None = None
        for opcode, payload in self.frames.feed(data):
            if opcode == PING:
                self.send(PONG, payload)
            elif opcode == CLOSE:
                code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else None
                raise Closed(code, payload[2:].decode("utf-8", "replace"))
            elif opcode == TEXT and not self.attached:
                self.attached = True
                self.last_seq = int(orjson.loads(payload).get("seq", 0))
                after = time.monotonic()  # the first prompt goes now
            elif opcode != TEXT:
                continue
            elif self.reader is None:  # between turns: only its seq matters
                seq = orjson.loads(payload).get("seq")
                self.last_seq = self.last_seq if seq is None else int(seq)
            elif self.reader.take(payload, now_us):
                self.last_seq = self.reader.finish()
                self.reader = None
                self.turn += 1
                config = self.config
                after = time.monotonic() + self.rng.uniform(
                    config["think_min_s"], config["think_max_s"]
                )
        return after

    def prompt(self, now_us: int) -> bool:
        """Start the next turn; ``False`` (and the session done) once the window ended."""
        if now_us >= self.config["end_us"]:
            self.done = True
            return False
        config = self.config
        request = LoadRequest(
            chunks=self.rng.randint(config["chunks_min"], config["chunks_max"]),
            rate=config["rate"],
            tool=self.rng.random() < config["tool_share"],
        )
        self.reader = TurnReader(self.session, request, self.tally, self.last_seq)
        message = {
            "id": turn_id(config, f"t{self.turn}"),
            "type": "prompt",
            "message": load_prompt(request),
        }
        self.send(TEXT, orjson.dumps(message))
        return True


def run_poll(config: dict[str, Any], tally: Tally) -> None:
    """Every session of ``config`` on one ``epoll`` loop, until each finished its last turn."""
    poll = select.epoll()
    timers: list[tuple[float, int, str, PollSession]] = []
    order = itertools.count()
    by_fd: dict[int, PollSession] = {}
    start = time.monotonic()
    for index, session in enumerate(config["sessions"]):
        client = PollSession(session, config, tally, config["seed"] * 100003 + index)
        # Not every client connects and prompts in the same tick.
        when = start + client.rng.random() * config["stagger_s"]
        heapq.heappush(timers, (when, next(order), "connect", client))
    live = len(config["sessions"])

    def finish(client: PollSession, fault: str | None = None, disconnect: bool = False) -> None:
        nonlocal live
        if fault is not None:
            tally.counts["disconnects" if disconnect else "errors"] += 1
            tally.fault(client.session, fault)
        if client.sock is not None:
            by_fd.pop(client.sock.fileno(), None)
            poll.unregister(client.sock)
            client.sock.close()
        client.done = True
        live -= 1

    while live:
        timeout = max(0.0, timers[0][0] - time.monotonic()) if timers else -1
        for fd, _ in poll.poll(timeout):
            client = by_fd[fd]
            try:
                after = client.readable()
            except Closed as exc:
                finish(client, f"disconnected: {exc}", disconnect=True)
                continue
            except OSError as exc:
                finish(client, f"connection lost: {exc}", disconnect=True)
                continue
            if after is not None:
                heapq.heappush(timers, (after, next(order), "prompt", client))
        now = time.monotonic()
        while timers and timers[0][0] <= now:
            _, _, action, client = heapq.heappop(timers)
            if client.done:
                continue
            try:
                if action == "connect":
                    sock = client.connect()
                    by_fd[sock.fileno()] = client
                    poll.register(sock, select.EPOLLIN)
                elif not client.prompt(time.monotonic_ns() // 1000):
                    finish(client)
            except OSError as exc:
                finish(client, f"connection failed: {exc}")
    poll.close()
