"""The acceptor's end of a worker's hand-off socket (``workers/channel.py``)."""

from __future__ import annotations

import socket

import trio
import trio.testing

from pitrio.transports.daemon.workers.channel import (
    HandoffLink,
    acknowledge,
    receive_connection,
)

BURST = 40


async def test_a_burst_of_hand_offs_queues_for_the_socket_instead_of_failing() -> None:
    # A burst of connections fills the hand-off socket's buffer while the worker is busy:
    # every hand-off must wait its turn (trio refuses a second task waiting to write one
    # descriptor: BusyResourceError, which dropped connections unanswered under load), and
    # each is acknowledged once the worker reads it.
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    parent.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    link = HandoffLink(trio.socket.from_stdlib_socket(parent))
    worker = trio.socket.from_stdlib_socket(child)
    head = b"GET /v1/host HTTP/1.1\r\n" + b"x-pad: " + b"x" * 2000 + b"\r\n\r\n"
    results: list[bool] = []

    async def hand(fd: int) -> None:
        results.append(await link.hand(fd, {"head": len(head)}, head))

    async def serve() -> None:
        for _ in range(BURST):
            handed = await receive_connection(worker)
            assert handed is not None
            client, meta, data = handed
            client.close()
            assert data == head
            await acknowledge(worker, meta)

    source, _peer = socket.socketpair()  # stands for the client's connection
    with source, _peer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.run)
            with trio.fail_after(20):
                async with trio.open_nursery() as hands:
                    for _ in range(BURST):
                        hands.start_soon(hand, source.fileno())
                    await trio.testing.wait_all_tasks_blocked()  # the buffer is full
                    hands.start_soon(serve)
            nursery.cancel_scope.cancel()
    assert results == [True] * BURST
