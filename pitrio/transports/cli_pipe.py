"""A command's output into a closed pipe ends quietly (``pitrio --list-models --all | head``).

A Unix tool whose reader went away stops without a word. Python instead raises
``BrokenPipeError`` at the next write and, at exit, complains again while flushing what is
still buffered. :func:`quiet_exit_on_closed_output` turns the first into a quiet exit when the
error really is about stdout or stderr (their reader is gone, which ``poll`` tells apart from a
broken pipe to some child process, which stays an error), and :func:`quiet_stream` swaps the
dead descriptor for an empty pipe of our own so the final flush has somewhere to go.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Callable
from typing import TextIO

from pitrio.errors import unwrap_group

_KEPT: list[int] = []  # read ends of the replacement pipes, open until the process exits


def reader_gone(fd: int) -> bool:
    """Whether ``fd`` is a pipe or socket whose reading end has been closed."""
    try:
        poller = select.poll()
        poller.register(fd, 0)  # POLLERR and POLLHUP are always reported
        events = poller.poll(0)
    except (OSError, ValueError):
        return False
    return any(flags & (select.POLLERR | select.POLLHUP) for _fd, flags in events)


def quiet_stream(stream: TextIO | None) -> None:
    """Point ``stream``'s descriptor at a fresh pipe nobody reads, so what is still buffered
    (at most a buffer's worth) is written somewhere at exit instead of failing again."""
    if stream is None:
        return
    try:
        fd = stream.fileno()
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)  # never wait on it, whatever is left to flush
        os.dup2(write_end, fd)
        os.close(write_end)
        _KEPT.append(read_end)
    except (OSError, ValueError):
        pass


def closed_output(exc: BaseException) -> tuple[str, ...]:
    """The standard streams (``"stdout"``, ``"stderr"``) whose reader went away, if ``exc``
    (or the one error inside a group) is a write into a closed pipe; each is quieted."""
    leaf = unwrap_group(exc) if isinstance(exc, BaseExceptionGroup) else exc
    if not isinstance(leaf, BrokenPipeError):
        return ()
    gone: list[str] = []
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        try:
            fd = stream.fileno() if stream is not None else -1
        except (OSError, ValueError):
            continue
        if fd >= 0 and reader_gone(fd):
            quiet_stream(stream)
            gone.append(name)
    return tuple(gone)


def quiet_exit_on_closed_output(run: Callable[[], int]) -> int:
    """``run()``; when it ends by writing into a closed stdout, 0 (the reader had what it
    wanted: ``| head``); into a closed stderr only, 1 (what failed could not be said)."""
    try:
        return run()
    except (BrokenPipeError, BaseExceptionGroup) as exc:
        gone = closed_output(exc)
        if not gone:
            raise
        return 0 if "stdout" in gone else 1
