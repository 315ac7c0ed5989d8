"""A trio-websocket client closing while its server pings (``websocket_pings``).

The server here is raw TCP with a hand-made handshake, so the order is forced: it reads the
client's close frame first, then pings, then replies with its own close.
"""

from __future__ import annotations

import base64
import hashlib

import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from pitrio.transports.websocket_pings import answer_pings_only_while_open
from tests.transports.raw_websocket import OPCODE_CLOSE, OPCODE_PING, frame

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def client_frame(data: bytes) -> tuple[int, bytes, bytes] | None:
    """The first (masked) client frame in ``data``: opcode, payload, the bytes after it."""
    if len(data) < 2:
        return None
    size, start = data[1] & 0x7F, 2
    if size >= 126:
        return None  # the client sends only short control frames here
    if len(data) < start + 4 + size:
        return None
    key, payload = data[start : start + 4], data[start + 4 : start + 4 + size]
    unmasked = bytes(byte ^ key[i % 4] for i, byte in enumerate(payload))
    return data[0] & 0x0F, unmasked, data[start + 4 + size :]


async def pinging_server(stream: trio.SocketStream, seen: list[int]) -> None:
    """Accept the upgrade; once the client's close frame arrives, ping, then reply with a
    close; ``seen``: the opcodes of the client's frames until it closes the connection."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive_some(4096)
    head, data = data.split(b"\r\n\r\n", 1)
    key = next(
        line.split(b":", 1)[1].strip()
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"sec-websocket-key:")
    )
    accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
    await stream.send_all(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n"
    )
    while True:
        while (parsed := client_frame(data)) is None:
            chunk = await stream.receive_some(4096)
            if not chunk:
                return
            data += chunk
        opcode, payload, data = parsed
        seen.append(opcode)
        if opcode == OPCODE_CLOSE:
            # Unmasked: a server's frames. The ping lands while the client waits for our close.
            ping, close = (
                frame(OPCODE_PING, b"late", masked=False),
                frame(OPCODE_CLOSE, payload[:2], masked=False),
            )
            await stream.send_all(ping + close)


@pytest.fixture
def mended(monkeypatch: pytest.MonkeyPatch) -> None:
    # The class's method as it was is put back after the test (an import may have mended it
    # already: the mend is idempotent).
    monkeypatch.setattr(
        WebSocketConnection,
        "_handle_ping_event",
        WebSocketConnection.__dict__["_handle_ping_event"],
    )
    answer_pings_only_while_open()


async def test_a_client_closing_while_its_server_pings_closes_cleanly(mended: None) -> None:
    seen: list[int] = []
    closed = None
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            trio.serve_tcp, lambda stream: pinging_server(stream, seen), 0
        )
        port = listeners[0].socket.getsockname()[1]
        with trio.fail_after(10):
            async with open_websocket_url(f"ws://127.0.0.1:{port}/") as ws:
                pass  # leaving the block closes: the close frame, then the server's ping
        closed = ws.closed
        nursery.cancel_scope.cancel()
    # Checked out here: a stray cancellation out of the client's block (the unmended case)
    # cancels this nursery and is swallowed by it, skipping the rest of the block.
    assert closed is not None and closed.code == 1000  # the close handshake completed
    # The client's close and nothing else: the late ping was not answered.
    assert seen == [OPCODE_CLOSE]
