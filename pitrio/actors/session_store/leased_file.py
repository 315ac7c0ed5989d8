"""A file store's hold on its session file: the open file and the lease it writes under.

:class:`LeasedFile` is the store actor's own helper (one per store, called on the actor's tasks
only; :meth:`LeasedFile.close` in a worker thread the actor waits for). It keeps what the actor
holds of the disk, the open :class:`~.storage.AppendFile` (``None`` until the file exists:
lazy creation), the :class:`~.lease.Lease` and whether the file ends in a torn line, and takes
the steps that touch them: opening (:mod:`.opening`, in a worker thread), the lazy creation's
moment, writing a batch's lines (:func:`.syncing.write_lines`), an fsync, closing. What is
written, when it is synced and what another writer did stay the actor's decisions.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import trio

from pitrio.actors.idle import until_idle
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.opening import OpenedFile, create_session_file, open_session_file
from pitrio.actors.session_store.storage import AppendFile
from pitrio.actors.session_store.syncing import IDLE_SYNC_WAIT, write_lines
from pitrio.actors.session_store.tree import IdFactory

log = logging.getLogger("pitrio.session_store")


class LeasedFile:
    """The session file of one file store and its lease (see the module docstring)."""

    def __init__(
        self,
        path: Path | None,
        *,
        take_over: bool,
        inline: bool,
        file_class: Callable[[Path], AppendFile] = AppendFile,
    ) -> None:
        self.path = path
        """The file's name (``None``: a store in memory, which never has a file)."""
        self._take_over = take_over
        self._inline = inline  # the process hosts this one session (``sync_inline``)
        self._file_class = file_class
        self.file: AppendFile | None = None
        self.lease: Lease | None = None
        self.needs_newline = False
        """The file ends in a torn line: the next batch starts on a fresh one."""

    @property
    def fence(self) -> int | None:
        """The fence of the lease (``None`` while none is held)."""
        return None if self.lease is None else self.lease.fence

    async def open(
        self, *, cwd: str, read_only: bool, strict: bool, new_id: IdFactory
    ) -> OpenedFile:
        """Open the session file in a worker thread (:func:`.opening.open_session_file`): the
        file and the lease are kept here, the rest of the outcome is the actor's to apply."""
        assert self.path is not None
        opened = await trio.to_thread.run_sync(
            functools.partial(
                open_session_file,
                self.path,
                cwd=cwd,
                read_only=read_only,
                take_over=self._take_over,
                strict=strict,
                new_id=new_id,
                file_class=self._file_class,
            )
        )
        self.lease, self.file = opened.lease, opened.file
        self.needs_newline = opened.needs_newline
        return opened

    async def create(self, data: bytes) -> None:
        """Write ``data`` (the header and every entry so far) as the new file, the lease taken
        first unless it is held (lazy creation's moment)."""
        assert self.path is not None
        if self._inline:
            # One session per process (RPC mode): inline, as its fsyncs are. The first
            # prompt's append waits for this (issue 21); through worker threads the event
            # loop would go on streaming the answer meanwhile and then deliver it in a burst.
            # Like an inline append's fsync (syncing.write_lines), it first waits, at most
            # IDLE_SYNC_WAIT, until nothing else can run: the first prompt's model request
            # then goes out before the file's three fsyncs, which overlap the wait for the
            # answer instead of delaying it (issue 38: 2-10 ms of the first answer).
            await until_idle(IDLE_SYNC_WAIT, shield=True)
            if self.lease is None:
                self.lease = Lease.acquire(self.path, take_over=self._take_over)
            self.file = create_session_file(self.path, data, self._file_class)
            return
        if self.lease is None:
            await self._take_lease()
        self.file = await trio.to_thread.run_sync(
            create_session_file, self.path, data, self._file_class
        )

    async def _take_lease(self) -> None:
        assert self.path is not None
        path, take_over = self.path, self._take_over
        self.lease = await trio.to_thread.run_sync(lambda: Lease.acquire(path, take_over=take_over))

    async def write(self, lines: list[bytes], *, sync: bool) -> None:
        """Append ``lines`` to the file (synced if ``sync``), after a torn last line on a
        fresh one."""
        file, lease = self.file, self.lease
        assert file is not None
        data = b"\n".join(lines) + b"\n"
        if self.needs_newline:
            data = b"\n" + data  # start after a torn last line, never inside it
        await write_lines(file, lease, data, sync=sync, inline=self._inline)
        self.needs_newline = False

    async def sync(self) -> None:
        """fsync the file (in a worker thread), if there is one."""
        file = self.file
        if file is not None:
            await trio.to_thread.run_sync(file.sync)

    async def stop(self) -> None:
        """At a clean stop: close the file, then release the lease (each in a worker
        thread; a failure is raised)."""
        if self.file is not None:
            await trio.to_thread.run_sync(self.file.close)
        if self.lease is not None:
            await trio.to_thread.run_sync(self.lease.release)

    def close(self) -> None:
        """Close the file and release the lease, however the store ended (blocking)."""
        # Both are idempotent: after a clean stop there is nothing left to do.
        if self.file is not None:
            self.file.close()
        if self.lease is not None:
            try:
                self.lease.release()
            except OSError as exc:  # e.g. a full disk: the lock is dropped all the same
                log.warning("%s: could not mark the lease released: %s", self.path, exc)
