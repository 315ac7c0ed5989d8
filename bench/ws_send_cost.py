"""The daemon websocket's cost per frame sent one by one: its send path against trio-websocket's.

A :class:`~pitrio.transports.daemon.websocket.DaemonWebSocket` on one end of a local socket
pair sends ``--frames`` text frames of a delta's size, one ``send_message`` each, while a task
on the other end reads and discards the bytes. Once through the daemon's ``_write`` (a free
stream lock taken without a schedule point) and once through the library's own ``_send``
(``async with`` the lock), alternately, ``--rounds`` times; reported: microseconds of wall time
per frame for each (the process alone on its core is assumed: run it under the bench lock).

    .venv/bin/python bench/ws_send_cost.py --frames 20000 --rounds 3

Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import time

import trio
import trio.testing
from trio_websocket import WebSocketConnection
from wsproto.events import TextMessage

from pitrio.transports.daemon.websocket import DaemonWebSocket, wrap_server_stream

HANDSHAKE = (
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
FRAME = (
    '{"type":"message_update","seq":123456,'
    '"assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"AbCdEfG"}}'
)


async def drain(stream: trio.abc.ReceiveStream) -> None:
    """Read and discard until the peer closes."""
    while await stream.receive_some(1 << 16):
        pass


async def measure(frames: int, rounds: int) -> dict[str, list[float]]:
    """Microseconds per frame, each round, for the daemon's send path and the library's."""
    a, b = trio.socket.socketpair()
    server_stream, client_stream = trio.SocketStream(a), trio.SocketStream(b)
    results: dict[str, list[float]] = {"daemon": [], "library": []}
    async with trio.open_nursery() as nursery:
        # A bare client: the handshake written by hand, then the bytes read and discarded
        # (a websocket client's parsing would share the process and blur the figure).
        await client_stream.send_all(HANDSHAKE)
        request = await wrap_server_stream(
            nursery, server_stream, max_message_size=1 << 20, close_timeout=1
        )
        server = await request.accept()
        assert isinstance(server, DaemonWebSocket)
        nursery.start_soon(drain, client_stream)
        library_send = WebSocketConnection._send
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(frames):
                await server.send_message(FRAME)
            results["daemon"].append((time.perf_counter() - start) / frames * 1e6)
            start = time.perf_counter()
            for _ in range(frames):
                await library_send(server, TextMessage(data=FRAME))
            results["library"].append((time.perf_counter() - start) / frames * 1e6)
        nursery.cancel_scope.cancel()
    return results


def main() -> None:
    """Parse the arguments, measure, print the figures as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = trio.run(measure, args.frames, args.rounds)
    print(json.dumps({k: [round(v, 2) for v in vs] for k, vs in results.items()}))


if __name__ == "__main__":
    main()
