"""A raw websocket client for the daemon tests: a hand-made handshake over TCP and frames a
websocket library would refuse to produce (invalid UTF-8, no mask, reserved opcodes and bits,
oversize control frames, stray continuations), and a reader of the server's frames."""

from __future__ import annotations

import base64
import os
import socket

import trio

from tests.transports.daemon_harness import TOKEN

OPCODE_CONTINUATION, OPCODE_TEXT, OPCODE_BINARY = 0x0, 0x1, 0x2
OPCODE_CLOSE, OPCODE_PING, OPCODE_PONG = 0x8, 0x9, 0xA


async def raw_upgrade(
    port: int, path: str, *, receive_buffer: int | None = None, token: str = TOKEN
) -> tuple[trio.SocketStream, bytes]:
    """A TCP connection upgraded to a websocket by hand; the bytes read past the handshake."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    if receive_buffer is not None:
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    key = base64.b64encode(os.urandom(16)).decode("ascii")
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    )
    await stream.send_all(request.encode("ascii"))
    data = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(4096)
            assert chunk, f"closed during the handshake: {data!r}"
            data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return stream, rest


def frame(
    opcode: int, payload: bytes, *, masked: bool = True, fin: bool = True, rsv: int = 0
) -> bytes:
    """One websocket frame as a client sends it (masked unless told otherwise; ``rsv``: the
    three reserved bits, 0 to 7)."""
    first = (0x80 if fin else 0) | (rsv & 7) << 4 | opcode
    mask_bit = 0x80 if masked else 0
    size = len(payload)
    if size < 126:
        header = bytes([first, mask_bit | size])
    elif size < 1 << 16:
        header = bytes([first, mask_bit | 126]) + size.to_bytes(2, "big")
    else:
        header = bytes([first, mask_bit | 127]) + size.to_bytes(8, "big")
    if not masked:
        return header + payload
    key = os.urandom(4)
    return header + key + bytes(byte ^ key[i % 4] for i, byte in enumerate(payload))


class ServerFrames:
    """The server's (unmasked) frames on a raw connection, read as they come."""

    def __init__(self, stream: trio.SocketStream, pending: bytes = b"") -> None:
        self.stream = stream
        self.buffer = pending

    async def next(self) -> tuple[int, bytes] | None:
        """The next frame's opcode and payload, or ``None`` once the connection ended (an
        end by reset counts as an end)."""
        buffer = self.buffer
        while True:
            if len(buffer) >= 2:
                opcode, size, start = buffer[0] & 0x0F, buffer[1] & 0x7F, 2
                if size == 126 and len(buffer) >= 4:
                    size, start = int.from_bytes(buffer[2:4], "big"), 4
                elif size == 127 and len(buffer) >= 10:
                    size, start = int.from_bytes(buffer[2:10], "big"), 10
                if (size < 126 or start > 2) and len(buffer) >= start + size:
                    self.buffer = buffer[start + size :]
                    return opcode, buffer[start : start + size]
            try:
                chunk = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                chunk = b""
            if not chunk:
                self.buffer = buffer
                return None
            buffer += chunk


def close_of(payload: bytes) -> tuple[int, str]:
    """A close frame's code and reason (1005 when it has none)."""
    code = int.from_bytes(payload[:2], "big") if len(payload) >= 2 else 1005
    return code, payload[2:].decode("utf-8", "replace")


async def read_until_end(stream: trio.SocketStream, pending: bytes) -> tuple[int, str] | None:
    """Read the server's frames until the connection ends: the close frame's code and reason,
    or ``None`` when the server dropped the connection without one."""
    frames = ServerFrames(stream, pending)
    while (item := await frames.next()) is not None:
        if item[0] == OPCODE_CLOSE:
            return close_of(item[1])
    return None
