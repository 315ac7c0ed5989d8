"""The SessionStore actor: the one writer of one session file (DESIGN §2, spec §4).

It owns the entry tree (:mod:`.tree`), the projection of the current leaf (:mod:`.projection`),
the open file and its lease (:mod:`.leased_file`). Callers hold a :class:`SessionStoreHandle`.

Appends. The actor adds an entry (made from the caller's draft by :mod:`.appends`) to the tree
and the projection at once, in arrival order, and queues its line for the writer task. The
writer takes *everything queued* as one batch: one ``write`` and (policy ``always``) one
``fsync``, then answers every append of the batch and emits ``entry_appended`` for each, in
order. While a batch is on its way to the disk the next one gathers, so concurrent appends
share fsyncs (group commit); when a batch is synced is the ``session.fsync`` policy's
(:mod:`.syncing`). Subscribers and watchers: :mod:`.listeners`.

Lazy creation (§4.6, issue 21): a new session's file appears with the first entry whose append
is *acknowledged*: the header and every entry so far are written at once (atomically: temp
file, fsync, link) before that append returns, so an append that returned is durable from the
session's first entry on (its caller may announce it: ``entry_appended``). An append marked
``lazy`` (the model and thinking level a new session starts with, which nobody is told about)
returns once recorded in memory and waits there for the first acknowledged one, so a session
that is opened and closed without anything happening leaves no file, as in pi. pi 1.6.0
writes the file at the first user message too (its leading system message, also lazy here,
waits for it); pitrio also writes it at a name, a model change or a bash record before any
prompt, since those are acknowledged to the client as well.

Failure. If the disk refuses a batch (a write or an fsync raises ``OSError``: ENOSPC, EFBIG,
EIO, ...), the file is cut back to where the batch began (so it holds exactly the entries whose
appends returned), the batch's appends fail with a :class:`ReadOnlySessionError` naming the file
and the kernel's error, and the store turns read-only: later appends are refused with the same
text, reads keep working. Retrying on a full disk would only tear more lines, and the memory of
the failed batch is ahead of the file, so nothing more is written. Any other failure (the lease
fence moved: another writer owns the file) stops the actor (fail-stop); the session is reopened
from the file.

Another writer. pi appends to session files without a lock. Before each batch (and at a
prompt's :class:`CatchUp`) the file is checked against what this store last left in it; whole
valid entries another writer appended are taken in first and this store's queued entries
follow them (``entries_merged`` to the watchers), anything else turns the store read-only
(:mod:`.foreign`, :mod:`.reconcile`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors._actor import Actor, Address, Reply
from pitrio.actors.session_store.appends import (
    appended_entry,
    needs_file,
    stale_fence,
    write_failure,
)
from pitrio.actors.session_store.commands import (
    FSYNC_POLICIES,
    Append,
    BranchWithSummary,
    CatchUp,
    DeliverNotices,
    Flush,
    ForkResult,
    FsyncPolicy,
    MoveLeaf,
    Query,
    SessionSeed,
    StoreCommand,
    StoreOptions,
    StoreStatus,
    Subscribe,
    WatchLease,
    WatchNotices,
    _Pending,
    _Source,
    new_header,
)
from pitrio.actors.session_store.file_format import Problem
from pitrio.actors.session_store.handle import SessionStoreHandle
from pitrio.actors.session_store.leased_file import LeasedFile
from pitrio.actors.session_store.listeners import Listeners
from pitrio.actors.session_store.opening import rehome, whole_file
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.actors.session_store.projection import Projection
from pitrio.actors.session_store.storage import (
    AppendFile,
    FileChanged,
)
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.syncing import IDLE_SYNC_WAIT, SyncClock
from pitrio.actors.session_store.tree import IdFactory, SessionTree, random_entry_id
from pitrio.errors import ReadOnlySessionError, SessionError
from pitrio.messages.entries import SessionEntry, SessionHeader, iso_now

if TYPE_CHECKING:
    from pitrio.actors.session_store.foreign import Conflict

__all__ = [
    "FSYNC_POLICIES",
    "IDLE_SYNC_WAIT",
    "ForkResult",
    "FsyncPolicy",
    "SessionSeed",
    "SessionStore",
    "SessionStoreHandle",
    "StoreCommand",
    "StoreOptions",
    "StoreStatus",
    "new_header",
]

FOREIGN_TRIES = 8
"""How often a batch is tried against a file another writer keeps appending to."""

log = logging.getLogger("pitrio.session_store")


class SessionStore(Actor[StoreCommand]):
    """Owns one session file: its tree, projection, lease and writes. Start it with
    :mod:`.start`'s :func:`open_store`, :func:`create_store` or :func:`start_seeded_store`."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_disk", "_listeners", "_new_id", "_pending", "_source",
        "_sync_clock", "_wake", "_wants_file", "_writer_running", "_writing", "backup",
        "cwd", "failure", "header", "merges", "migrated", "options", "path", "problems",
        "projection", "read_only", "tree",
    )
    # fmt: on

    def __init__(
        self,
        source: _Source,
        *,
        options: StoreOptions | None = None,
        new_id: IdFactory = random_entry_id,
        file_class: Callable[[Path], AppendFile] = AppendFile,
    ) -> None:
        self.options = options or StoreOptions()
        super().__init__(name="session-store", capacity=self.options.inbox_capacity)
        self._source = source
        self._new_id = new_id
        self.path: Path | None = source.path
        self.read_only = source.read_only
        self.cwd = source.cwd or ""
        self.header: SessionHeader = source.header or new_header(self.cwd)
        self.tree = SessionTree(self.header, new_id=new_id)
        self.projection = Projection()
        self.problems: tuple[Problem, ...] = ()
        self.migrated = False
        self.backup: Path | None = None
        """Where a migration kept the original file (``None``: no migration here)."""
        self._disk = LeasedFile(
            source.path,
            take_over=self.options.take_over,
            inline=self.options.sync_inline,
            file_class=file_class,
        )
        """The file and its lease (:mod:`.leased_file`; a store in memory never has a file)."""
        self._wants_file = False
        """An entry that needs the file exists: an acknowledged append, or an assistant
        message among the entries a store starts with (a fork's, as pi writes its file)."""
        self._pending: list[_Pending] = []
        self._wake = trio.Event()
        self._writer_running = False  # the writer task is started (it ends when idle)
        self._sync_clock = SyncClock()  # what is written but not synced (:mod:`.syncing`)
        self._listeners = Listeners(str(self.path))
        self.failure: ReadOnlySessionError | None = None
        """Why the store turned read-only after a failed write (``None``: it has not)."""
        self.merges = 0
        self._writing = False  # the writer has taken a batch and not answered it yet
        """How many times another writer's entries were taken in (:mod:`.foreign`)."""

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def opening(
        cls,
        path: Path,
        *,
        cwd: str | None = None,
        read_only: bool = False,
        options: StoreOptions | None = None,
        new_id: IdFactory = random_entry_id,
        file_class: Callable[[Path], AppendFile] = AppendFile,
    ) -> SessionStore:
        """A store for an existing file (or a new session at that path if there is none).

        ``cwd`` overrides the header's cwd as the session's working directory.
        """
        source = _Source("open", Path(path), read_only=read_only, cwd=cwd)
        return cls(source, options=options, new_id=new_id, file_class=file_class)

    @classmethod
    def creating(
        cls,
        header: SessionHeader,
        path: Path | None,
        *,
        options: StoreOptions | None = None,
        new_id: IdFactory = random_entry_id,
        file_class: Callable[[Path], AppendFile] = AppendFile,
    ) -> SessionStore:
        """A store for a new, empty session (``path`` None: in memory, never written)."""
        source = _Source("new", path, cwd=header.cwd, header=header)
        return cls(source, options=options, new_id=new_id, file_class=file_class)

    @classmethod
    def seeded(
        cls,
        seed: SessionSeed,
        *,
        options: StoreOptions | None = None,
        new_id: IdFactory = random_entry_id,
        file_class: Callable[[Path], AppendFile] = AppendFile,
    ) -> SessionStore:
        """A store for a forked or cloned session (see :meth:`SessionStoreHandle.fork`)."""
        source = _Source(
            "seed", seed.path, cwd=seed.header.cwd, header=seed.header, entries=seed.entries
        )
        return cls(source, options=options, new_id=new_id, file_class=file_class)

    async def started(self) -> None:
        """Load the session (in a worker thread) and start the writer task."""
        source = self._source
        if source.kind == "open":
            await self._open()
        else:
            origin = str(self.path) if self.path else "<memory>"
            entries = [rehome(stored, origin) for stored in source.entries]
            self.tree = SessionTree(self.header, entries, new_id=self._new_id)
            self._wants_file = self.tree.has_assistant()
            if self.path is not None and (self._wants_file or not self.options.lazy_create):
                await self._create_file()
        self.projection = Projection(self.tree.path())

    async def _open(self) -> None:
        opened = await self._disk.open(
            cwd=self.cwd, read_only=self.read_only, strict=self.options.strict, new_id=self._new_id
        )
        self.header, self.cwd, self.tree = opened.header, opened.cwd, opened.tree
        self.problems, self._wants_file = opened.problems, opened.wants_file
        self.migrated, self.backup = opened.migrated, opened.backup

    async def _create_file(self) -> None:
        """Write header and every entry so far to a new file (lazy creation's moment)."""
        assert self.path is not None
        # The entries so far, taken before the first await: one appended while the lease is
        # taken is written by its own batch, after them (taken later, it was written twice).
        data = whole_file(self.header, self.tree.entries)
        await self._disk.create(data)

    async def run(
        self, *, task_status: trio.TaskStatus[Address[StoreCommand]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run the actor; however it ends (closed, failed, cancelled), its file is closed and
        its lease released, so a live process never keeps a session it no longer writes."""
        try:
            await super().run(task_status=task_status)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(self._close)

    def _close(self) -> None:
        self._disk.close()

    async def stopping(self) -> None:
        """Inbox closed: write what is queued, sync, release the lease, end subscriptions."""
        done: Reply[None] = Reply()
        self._pending.append(_Pending(None, done, None, force_sync=self.options.fsync != "never"))
        self._wake_writer()
        try:
            await done.wait()
        except ReadOnlySessionError as exc:  # the store failed before: that was reported
            log.warning("%s", exc)
        await self._disk.stop()
        await self._listeners.close()

    # -- commands ------------------------------------------------------------------------------

    async def handle(self, command: StoreCommand) -> None:
        """Apply one command (appends are answered by the writer once written)."""
        match command:
            case Append(entry=entry, fence=fence, reply=reply, lazy=lazy):
                try:
                    self._check_fence(fence)
                    self._append(entry, reply, lazy=lazy)
                except SessionError as exc:
                    reply.fail(exc)
            case BranchWithSummary(from_id=from_id, entry=entry, reply=reply):
                try:
                    self._check_writable()
                    # ``fromId`` names the leaf the branch leaves, read here where the leaf
                    # lives (pi 1.6.0's ``branchWithSummary``; ``"root"`` when there is none).
                    left = self.tree.leaf_id or "root"
                    self._move_leaf(from_id)
                    self._append(attrs.evolve(entry, from_id=left), reply)
                except SessionError as exc:
                    reply.fail(exc)
            case MoveLeaf(entry_id=entry_id, reply=reply):
                try:
                    self._move_leaf(entry_id)
                except SessionError as exc:
                    reply.fail(exc)
                else:
                    reply.set(None)
            case Query(run=run, reply=reply):
                try:
                    reply.set(run(self))
                except SessionError as exc:
                    reply.fail(exc)
            case Flush(reply=reply):
                self._pending.append(_Pending(None, reply, None, force_sync=True))
                self._wake_writer()
            case Subscribe(capacity=capacity, reply=reply):
                reply.set(self._listeners.subscribe(capacity))
            case CatchUp(reply=reply):
                if self.failure is not None:
                    reply.fail(self.failure)
                elif self._pending or self._writing:
                    # In the writer's turn: never checked against a batch in flight.
                    self._pending.append(_Pending(None, reply, None, catch_up=True))
                    self._wake_writer()
                else:  # nothing in flight: checked here, without waking the writer
                    try:
                        self._catch_up_now([])
                    except ReadOnlySessionError as exc:
                        reply.fail(exc)
                    else:
                        reply.set(self.merges)
            case WatchNotices(capacity=capacity, reply=reply):
                reply.set(self._listeners.watch(capacity))
            case DeliverNotices(deliver=deliver, reply=reply):
                self._listeners.deliver_to(deliver)
                reply.set(None)
            case WatchLease(reply=reply):
                self._watch_lease(reply)

    @property
    def fence(self) -> int | None:
        """The fence of this store's lease (``None`` while it holds none)."""
        return self._disk.fence

    def _watch_lease(self, reply: Reply[SessionOwnedElsewhereError]) -> None:
        """A file's lease is a lock the kernel holds for this store while it runs: no other
        daemon takes it, so ``reply`` is never answered (it fails when the store stops)."""

    def _check_writable(self) -> None:
        if self.failure is not None:
            raise ReadOnlySessionError(str(self.failure)) from self.failure.__cause__
        if self.read_only:
            raise ReadOnlySessionError(f"{self.path}: the session was opened read-only")

    def _check_fence(self, fence: int | None) -> None:
        self._check_writable()
        if fence is not None and fence != self.fence:
            raise stale_fence(self.path, fence, self.fence)

    def _move_leaf(self, entry_id: str | None) -> None:
        if entry_id is None:
            self.tree.reset_leaf()
        elif entry_id == self.tree.leaf_id:
            return
        else:
            self.tree.branch(entry_id)
        self.projection.reset(self.tree.path())

    def _append(
        self, draft: SessionEntry, reply: Reply[SessionEntry], *, lazy: bool = False
    ) -> None:
        self._check_writable()
        entry = appended_entry(draft, self.tree, self.projection, iso_now())
        stored = StoredEntry.from_entry(entry, origin=str(self.path) if self.path else "<memory>")
        self.tree.add(stored)
        self.projection.append(stored)
        if needs_file(stored, lazy=lazy):
            self._wants_file = True  # this append returns once the file holds it
        self._pending.append(_Pending(stored, reply, entry))
        self._wake_writer()

    # -- the writer ------------------------------------------------------------------------------

    def _wake_writer(self) -> None:
        """Something was queued for the writer: wake it, or start it if it is not running."""
        if self._writer_running:
            self._wake.set()
        else:
            self._writer_running = True
            self.nursery.start_soon(self._writer)

    async def _writer(self) -> None:
        """Write queued appends in batches: one write and at most one fsync per batch.

        Started by the first thing queued; it ends once nothing is queued and nothing written
        waits for a timed sync, so an idle store keeps no task waiting (issue 38)."""
        try:
            await self._write_batches()
        finally:
            self._writer_running = False

    async def _write_batches(self) -> None:
        while True:
            self._writing = False
            while not self._pending:
                # Policy ``batch``: the first unsynced write sets a deadline; load after it
                # does not push it back, and waking early for nothing does not sync early.
                deadline = self._sync_clock.deadline
                if deadline == math.inf:
                    return  # nothing unsynced: no deadline to keep (started again when due)
                with trio.move_on_at(deadline):
                    await self._wake.wait()
                self._wake = trio.Event()
                if not self._pending and self._sync_clock.due(trio.current_time()):
                    try:
                        await self._sync()
                    except OSError as exc:  # policy ``batch``'s timed fsync
                        self._turn_read_only(exc)
                        self._sync_clock = SyncClock()  # no retry loop
            batch, self._pending = self._pending, []
            self._writing = True
            if self.failure is not None:
                # Queued while the failed batch was being written: refused too, even if it
                # would fit now (its entries follow ones the file does not have).
                for item in batch:
                    if item.stored is not None:
                        item.reply.fail(self.failure)
                batch = [item for item in batch if item.stored is None]
            try:
                await self._commit(batch)
            except trio.Cancelled:
                raise
            except OSError as exc:
                failure = self._turn_read_only(exc)
                for item in batch:
                    item.reply.fail(failure)
                continue
            except ReadOnlySessionError as failure:  # another writer's change (read-only now)
                for item in batch:
                    item.reply.fail(failure)
                continue
            except BaseException as exc:
                for item in batch:
                    item.reply.fail(exc)
                raise
            for item in batch:
                item.reply.set(self.merges if item.catch_up else item.result)
            committed = (item.result for item in batch if item.stored is not None)
            await self._listeners.committed(committed, written=self._written())

    def _written(self) -> bool:
        """Whether an entry committed now is stored (or never will be: a store in memory)."""
        return self._disk.file is not None or self.path is None

    def _turn_read_only(self, exc: OSError) -> ReadOnlySessionError:
        """Record a failed write: from now on the store refuses appends (see the module doc)."""
        if self.failure is None:
            self.failure = write_failure(self.path, exc)
            log.error("%s", self.failure)
        return self.failure

    async def _commit(self, batch: list[_Pending]) -> None:
        lines = [item.stored.raw for item in batch if item.stored is not None]
        force = any(item.force_sync for item in batch)
        if self._disk.file is None:
            creatable = self.path is not None and not self.read_only
            if lines and creatable and (self._wants_file or not self.options.lazy_create):
                await self._create_file()  # every entry so far, synced
            return
        if not lines:
            if any(item.catch_up for item in batch):
                self._catch_up_now(batch)
            if force and self._sync_clock.dirty:
                await self._sync()
            return
        for _ in range(FOREIGN_TRIES):
            try:
                await self._write(batch, force)
            except FileChanged as changed:
                self._take_in(changed, batch)  # or read-only; the batch's lines may change
                continue
            return
        from pitrio.actors.session_store.foreign import Conflict  # see _take_in

        raise self._foreign_conflict(
            Conflict("rewritten", f"the file kept changing under {FOREIGN_TRIES} tries to write")
        )

    async def _write(self, batch: list[_Pending], force: bool) -> None:
        """Write the batch's lines (the file checked against its mark first)."""
        lines = [item.stored.raw for item in batch if item.stored is not None]
        if lines:
            policy = self.options.fsync
            sync = self._sync_clock.must_sync(policy, force, trio.current_time())
            await self._disk.write(lines, sync=sync)
            self._sync_clock = self._sync_clock.written(
                sync, policy, trio.current_time(), self.options.batch_interval
            )

    # -- another writer (pi appends without a lock; see :mod:`.foreign`) ------------------------

    def _catch_up_now(self, batch: list[_Pending]) -> None:
        """Check the file against its mark (inline: one ``fstat``, a read only when another
        writer wrote) and take in or refuse what changed; raises ``ReadOnlySessionError``."""
        file = self._disk.file
        if file is None:
            return
        try:
            file.check_mark()
        except FileChanged as changed:
            self._take_in(changed, batch)
        except OSError as exc:  # the file was replaced or cannot be read: as a failed write
            raise self._turn_read_only(exc) from exc

    def _take_in(self, changed: FileChanged, batch: list[_Pending]) -> None:
        """Judge what another writer did to the file; take its entries in (the unwritten ones
        of this store follow them), or turn read-only (raises the failure)."""
        # Here: another writer's entries are judged and merged by code a start, and a file
        # only this process writes, never needs (cold start, issue 38).
        with _attrs_cache.caching():  # their classes from the attrs method cache
            from pitrio.actors.session_store.foreign import Conflict, Unchanged
            from pitrio.actors.session_store.reconcile import take_in
        file = self._disk.file
        assert file is not None and self.path is not None
        queued = [*batch, *self._pending]
        outcome = take_in(self.path, file, changed, self.tree, queued)
        if isinstance(outcome, Unchanged):  # only touched: the same bytes are there
            file.mark = attrs.evolve(file.mark, mtime_ns=outcome.mtime_ns)
        elif isinstance(outcome, Conflict):
            raise self._foreign_conflict(outcome)
        else:
            self.tree = outcome.tree
            self.projection.reset(self.tree.path())
            self.merges += 1
            log.warning("%s", outcome.event.message)
            self._listeners.notify(outcome.event)

    def _foreign_conflict(self, conflict: Conflict) -> ReadOnlySessionError:
        """Turn read-only: another writer changed the file in a way that cannot be merged."""
        if self.failure is None:
            from pitrio.actors.session_store.reconcile import conflict_failure  # see _take_in

            self.failure = conflict_failure(self.path, conflict)
            log.error("%s", self.failure)
        return self.failure

    async def _sync(self) -> None:
        await self._disk.sync()
        self._sync_clock = SyncClock()

    # -- state for queries -----------------------------------------------------------------------

    def status(self) -> StoreStatus:
        """A snapshot of this store (runs inside the actor)."""
        file = self._disk.file
        return StoreStatus(
            path=self.path,
            read_only=self.read_only,
            persisted=file is not None,
            fence=self.fence,
            entries=len(self.tree),
            leaf_id=self.tree.leaf_id,
            writes=0 if file is None else file.writes,
            syncs=0 if file is None else file.syncs,
            migrated=self.migrated,
            backup=self.backup,
            problems=self.problems,
            write_error=None if self.failure is None else str(self.failure),
        )
