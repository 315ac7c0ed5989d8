"""Per-file serialisation of file mutations (spec §5.1 "file mutation queue").

Calls that change the same file (``edit``, ``write``, any tool declaring ``mutates``) run one
after another, in the order they were queued; calls on different files run in parallel. The key
is the file's real path, so two spellings of one file (a symlink, ``a/../b``) share a queue.

There is one queue per trio run (a :class:`trio.lowlevel.RunVar`), like pi's module-wide one:
in a daemon holding many sessions, two sessions editing the same file are serialised too.
"""

from __future__ import annotations

import os

import trio

_QUEUE: trio.lowlevel.RunVar[FileMutationQueue] = trio.lowlevel.RunVar("pitrio_file_mutations")


def mutation_key(path: str) -> str:
    """The queue key of ``path``: its real path (symlinks and ``..`` resolved).

    A cheap syscall sequence done inline: it must happen synchronously, in source order,
    before the calls of a batch start.
    """
    return os.path.realpath(os.path.abspath(path))


class Ticket:
    """One place in a file's queue: :meth:`wait` for the turn, :meth:`release` when done.

    A ticket released early (its call was refused or aborted before its turn) still lets its
    successors go only after every earlier ticket is released.
    """

    __slots__ = ("_done", "_key", "_previous", "_queue")

    def __init__(self, queue: FileMutationQueue, key: str, previous: Ticket | None) -> None:
        self._queue = queue
        self._key = key
        self._previous = previous
        self._done = trio.Event()

    @property
    def key(self) -> str:
        """The real path this ticket serialises."""
        return self._key

    @property
    def released(self) -> bool:
        """Whether :meth:`release` was called."""
        return self._done.is_set()

    def settled(self) -> bool:
        """Whether this ticket and every earlier one are released."""
        ticket: Ticket | None = self
        while ticket is not None:
            if not ticket._done.is_set():
                return False
            ticket = ticket._previous
        return True

    async def wait(self) -> None:
        """Return once every earlier ticket for the same file was released."""
        ticket = self._previous
        while ticket is not None:
            await ticket._done.wait()
            ticket = ticket._previous
        self._previous = None  # all done: drop the chain

    def release(self) -> None:
        """Give up the place (after the work, or instead of it); idempotent."""
        if not self._done.is_set():
            self._done.set()
            self._queue._tidy(self._key)


class FileMutationQueue:
    """FIFO queues of tickets, one per real path; a file's queue vanishes when it drains."""

    def __init__(self) -> None:
        self._tails: dict[str, Ticket] = {}

    def enqueue(self, path: str) -> Ticket:
        """Take the next place for ``path`` (synchronously: the order of calls is the order)."""
        key = mutation_key(path)
        previous = self._tails.get(key)
        if previous is not None and previous.settled():
            previous = None
        ticket = Ticket(self, key, previous)
        self._tails[key] = ticket
        return ticket

    def busy(self) -> frozenset[str]:
        """The keys with a ticket not yet released."""
        return frozenset(key for key, tail in self._tails.items() if not tail.settled())

    def _tidy(self, key: str) -> None:
        tail = self._tails.get(key)
        if tail is not None and tail.settled():
            del self._tails[key]


def file_mutation_queue() -> FileMutationQueue:
    """The queue of the current trio run (created on first use)."""
    try:
        return _QUEUE.get()
    except LookupError:
        queue = FileMutationQueue()
        _QUEUE.set(queue)
        return queue
