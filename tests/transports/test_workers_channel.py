"""The acceptor's end of a worker's hand-off socket (``workers/channel.py``)."""

from __future__ import annotations

import socket

import trio
import trio.testing

from pitrio.transports.daemon.workers.channel import (
    HandoffLink,
    HandoffReceiver,
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
    head = b"GET /v1/host HTTP/1.1\r\n" + b"x-pad: " + b"x" * 2000 + b"\r\n\r\n"
    results: list[bool] = []

    async def hand(fd: int) -> None:
        results.append(await link.hand(fd, {"head": len(head)}, head))

    async def serve() -> None:
        receiver = HandoffReceiver(child)
        taken = 0
        while taken < BURST:
            batch = await receiver.receive()
            assert batch is not None
            for client, meta, data in batch:
                client.close()
                assert data == head
                await receiver.acknowledge(meta)
            taken += len(batch)

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


async def test_the_worker_takes_every_waiting_hand_off_in_one_wake_up() -> None:
    # A busy worker runs its accept task about once per pass of its scheduler: a burst of
    # connections taken one per wake-up outlasted the acceptor's handshake timeout (503s at
    # 800 streaming sessions). Every hand-off already waiting is taken at once, and the
    # acknowledgements go out without waiting while the socket has room.
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link = HandoffLink(trio.socket.from_stdlib_socket(parent))
    receiver = HandoffReceiver(child)
    head = b"GET /v1/host HTTP/1.1\r\n\r\n"
    results: list[bool] = []
    source, peer = socket.socketpair()
    with source, peer:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.run)
            with trio.fail_after(20):
                async with trio.open_nursery() as hands:
                    for _ in range(10):
                        hands.start_soon(_hand, link, source.fileno(), head, results)
                    await trio.testing.wait_all_tasks_blocked()  # all ten are in the socket
                    batch = await receiver.receive()
                    assert batch is not None and len(batch) == 10
                    for client, meta, data in batch:
                        client.close()
                        assert data == head
                        await receiver.acknowledge(meta)
            link.sock.close()  # the acceptor's end closes: the worker hears of it
            assert await receiver.receive() is None
            nursery.cancel_scope.cancel()
    assert results == [True] * 10


async def _hand(link: HandoffLink, fd: int, head: bytes, results: list[bool]) -> None:
    results.append(await link.hand(fd, {"head": len(head)}, head))
