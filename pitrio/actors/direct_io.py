"""Reading and writing a non-blocking descriptor without trio's stream layer on the hot paths.

trio's ``FdStream.receive_some`` and its socket operations yield to the scheduler once per call
even when the operation does not have to wait (before a read of a pipe, after a read or write
of a socket): a task step each, several a turn (issue 7: the stdin reader, the provider's
request and response). Here the operation is tried first and the task waits for the
descriptor only when it would block. A cancellation is still seen at once (each call starts
with ``checkpoint_if_cancelled``), and after ``FAST_STREAK`` reads in a row that did not wait
the reader yields anyway, so a peer that always has data cannot hold the event loop.

Errors are the operating system's (``OSError``); callers map them to their own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Sequence

import trio

FAST_STREAK = 16
"""Reads in a row that found data waiting, after which a reader yields anyway."""
GATHERED_PIECES = 512
"""At most this many pieces per ``writev`` (the kernel's limit, IOV_MAX, is 1024 here)."""


class DirectReader:
    """Reads of one non-blocking descriptor (a pipe, a socket) by one task."""

    __slots__ = ("_owner", "_streak", "fd", "size")

    def __init__(self, fd: int, size: int, *, owner: object = None) -> None:
        self.fd = fd
        self.size = size
        self._streak = 0
        # Kept alive with the reader: a stream closes its descriptor when it is collected.
        self._owner = owner

    async def read(self, deadline: float = math.inf) -> bytes:
        """Up to ``size`` bytes (``b""`` at the end); ``trio.TooSlowError`` if nothing came
        by ``deadline`` (trio's clock)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        while True:
            try:
                data = os.read(self.fd, self.size)
                break
            except BlockingIOError:
                waited = True
                with trio.fail_at(deadline):
                    await trio.lowlevel.wait_readable(self.fd)
        if waited:
            self._streak = 0
        else:
            self._streak += 1
            if self._streak >= FAST_STREAK:
                self._streak = 0
                await trio.lowlevel.cancel_shielded_checkpoint()
        return data


def receiver(stream: trio.abc.ReceiveStream, size: int) -> Callable[[], Awaitable[bytes]]:
    """Reads of up to ``size`` bytes from ``stream``: directly (:class:`DirectReader`) when it
    is a descriptor's ``FdStream`` (a pipe), else through the stream (its errors then)."""
    if isinstance(stream, trio.lowlevel.FdStream):
        return DirectReader(stream.fileno(), size, owner=stream).read

    async def receive_some() -> bytes:
        return bytes(await stream.receive_some(size))

    return receive_some


async def write_all(fd: int, parts: Sequence[bytes], deadline: float = math.inf) -> None:
    """Write ``parts`` in order, gathered into as few ``writev`` calls as the descriptor takes;
    ``trio.TooSlowError`` if they are not all written by ``deadline`` (trio's clock)."""
    await trio.lowlevel.checkpoint_if_cancelled()
    views = [memoryview(part) for part in parts if part]
    first = 0
    while first < len(views):
        try:
            sent = os.writev(fd, views[first : first + GATHERED_PIECES])
        except BlockingIOError:
            with trio.fail_at(deadline):
                await trio.lowlevel.wait_writable(fd)
            continue
        while sent:
            size = len(views[first])
            if sent < size:
                views[first] = views[first][sent:]
                break
            sent -= size
            first += 1
