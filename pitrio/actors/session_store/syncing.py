"""How a batch reaches the disk: the ``session.fsync`` policies (issue 7).

:class:`SyncClock` is the pure part: whether a batch is synced, and when unsynced data must be
(policy ``batch``). :func:`write_lines` is the one step that writes: inline to the page cache,
the fsync in a worker thread, or (a process hosting one session) the fsync inline once the
event loop is idle. The store actor keeps one clock and calls both.
"""

from __future__ import annotations

import math

import attrs
import trio

from pitrio.actors.idle import until_idle
from pitrio.actors.session_store.commands import FsyncPolicy
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.storage import AppendFile, sync_batch, write_batch

IDLE_SYNC_WAIT = 0.002
"""Longest wait of an inline fsync for the event loop to fall idle (see :func:`write_lines`)."""


@attrs.frozen
class SyncClock:
    """What the store has written but not synced (pure; a new clock after each step)."""

    dirty: bool = False
    """Written to the OS but not fsynced yet."""
    deadline: float = math.inf
    """Policy ``batch``: when the dirty data must be synced (``inf``: no deadline)."""

    def must_sync(self, policy: FsyncPolicy, force: bool, now: float) -> bool:
        """Whether a batch written ``now`` is synced: always under ``always``, when asked
        (a flush), or once the deadline has passed."""
        return policy == "always" or force or now >= self.deadline

    def due(self, now: float) -> bool:
        """Whether unsynced data must be synced now, with no batch to carry it (``batch``)."""
        return self.dirty and now >= self.deadline

    def written(self, synced: bool, policy: FsyncPolicy, now: float, interval: float) -> SyncClock:
        """After a batch was written (``synced`` or not) at ``now``. The first unsynced
        write sets the deadline; load after it does not push it back."""
        if synced:
            return SyncClock()
        if self.dirty:
            return self
        return SyncClock(dirty=True, deadline=now + interval if policy == "batch" else math.inf)


async def write_lines(
    file: AppendFile, lease: Lease | None, data: bytes, *, sync: bool, inline: bool
) -> None:
    """Append ``data`` (whole lines) to ``file``, synced if ``sync``; ``inline``: the process
    hosts this one session (``sync_inline``)."""
    # The write goes to the page cache inline (microseconds); only the fsync, which may take
    # long on a slow disk, runs in a thread. A whole batch in the thread cost a thread hop per
    # append even without a sync, and its Python code waited for the GIL while the event loop
    # was busy (issue 7: per-turn latency).
    if sync and not inline:
        await trio.to_thread.run_sync(write_batch, file, lease, data, True)
    elif sync:
        # Synced in a process that hosts this one session: written at once with its
        # writeback started, then the fsync, which stops the whole event loop, waits until
        # nothing else can run (a user message's sync then overlaps the model request in
        # flight instead of delaying it), for at most IDLE_SYNC_WAIT; by then the data is on
        # its way and the fsync waits for the journal only (issue 7). Shielded: a batch taken
        # is synced.
        with file.held():  # one open for the write and its fsync
            start = write_batch(file, lease, data, False, start_writeback=True)
            await until_idle(IDLE_SYNC_WAIT, shield=True)
            sync_batch(file, start)
    else:
        # Page cache only (policies ``batch``/``never``): a thread hop costs more than the
        # write (issue 7).
        write_batch(file, lease, data, False)
