"""The SessionStore actor: the one writer of one session file (DESIGN §2, spec §4).

It owns the entry tree (:mod:`.tree`), the projection of the current leaf (:mod:`.projection`),
the open file and its lease (:mod:`.lease`). Callers hold a :class:`SessionStoreHandle`.

Appends. The actor adds an entry to the tree and the projection at once, in arrival order,
and queues its line for the writer task. The writer takes *everything queued* as one batch:
one ``write`` and (policy ``always``) one ``fsync``, then answers every append of the batch and
emits ``entry_appended`` for each, in order. While a batch is on its way to the disk the next
one gathers, so concurrent appends share fsyncs (group commit). ``session.fsync`` policies:

* ``always`` (default): an append returns once its line is on stable storage;
* ``batch``: an append returns once its line is written to the OS (it survives the process
  dying, not the machine); the file is fsynced every ``batch_interval`` seconds while there is
  unsynced data, on :meth:`SessionStoreHandle.flush` and when the store closes;
* ``never``: written to the OS, never fsynced except on ``flush``.

Lazy creation (§4.6, issue 21): a new session's file appears with the first entry whose append
is *acknowledged*: the header and every entry so far are written at once (atomically: temp
file, fsync, link) before that append returns, so an append that returned is durable from the
session's first entry on (its caller may announce it: ``entry_appended``). An append marked
``lazy`` (the model and thinking level a new session starts with, which nobody is told about)
returns once recorded in memory and waits there for the first acknowledged one, so a session
that is opened and closed without anything happening leaves no file, as in pi. pi itself
writes the file only at the first assistant message: pitrio writes it one step earlier, at
the first prompt, rather than acknowledge a prompt a crash would lose.

Failure. If the disk refuses a batch (a write or an fsync raises ``OSError``: ENOSPC, EFBIG,
EIO, ...), the file is cut back to where the batch began (so it holds exactly the entries whose
appends returned), the batch's appends fail with a :class:`ReadOnlySessionError` naming the file
and the kernel's error, and the store turns read-only: later appends are refused with the same
text, reads keep working. Retrying on a full disk would only tear more lines, and the memory of
the failed batch is ahead of the file, so nothing more is written. Any other failure (the lease
fence moved: another writer owns the file) stops the actor (fail-stop); the session is reopened
from the file.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import trio

from pitrio.actors._actor import Actor, Address, Handle, Reply
from pitrio.actors.idle import until_idle
from pitrio.actors.session_store.file_format import ParsedSession, Problem
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.paths import session_dir, session_file_name
from pitrio.actors.session_store.projection import (
    EMPTY_CONTEXT,
    Projection,
    SessionContext,
)
from pitrio.actors.session_store.storage import (
    AppendFile,
    create_file,
    read_session,
    replace_file,
)
from pitrio.actors.session_store.stored import AnyEntry, StoredEntry
from pitrio.actors.session_store.tree import (
    ForkMessage,
    IdFactory,
    SessionTree,
    TreeNode,
    random_entry_id,
)
from pitrio.errors import (
    EntryNotFoundError,
    ReadOnlySessionError,
    SessionError,
    SessionFileError,
    StaleFenceError,
    collapse_groups,
)
from pitrio.messages.agent import AgentMessage, UserMessage
from pitrio.messages.codec import encode
from pitrio.messages.content import UserContent, text_of
from pitrio.messages.entries import (
    CURRENT_SESSION_VERSION,
    BranchSummaryEntry,
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    iso_now,
    new_session_id,
)
from pitrio.messages.events import EntryAppended

IDLE_SYNC_WAIT = 0.002
"""Longest wait of an inline fsync for the event loop to fall idle (see ``_commit``)."""

log = logging.getLogger("pitrio.session_store")

T = TypeVar("T")
E = TypeVar("E", bound=SessionEntry)

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("always", "batch", "never")

_DRAFT = ""  # id and timestamp of an entry not appended yet: the store assigns both


@attrs.frozen(kw_only=True)
class StoreOptions:
    """How a store writes: durability policy, lazy creation, lease and strictness."""

    fsync: FsyncPolicy = "always"
    batch_interval: float = 1.0
    sync_inline: bool = False
    """Run an append's fsync on the event loop's thread, not in a worker thread: for a
    process hosting one session (RPC mode), where the thread hop (~180 us here) costs as much
    as the fsync itself; a daemon keeps the worker so a slow disk never stalls its other
    sessions (see DESIGN-NOTES.md, "Durability")."""
    lazy_create: bool = True
    take_over: bool = False
    strict: bool = True
    inbox_capacity: int = 256

    def __attrs_post_init__(self) -> None:
        if self.fsync not in FSYNC_POLICIES:
            raise ValueError(f"session.fsync must be one of {', '.join(FSYNC_POLICIES)}")


@attrs.frozen(kw_only=True)
class SessionSeed:
    """The content of a session that does not have a store yet (a fork, a clone)."""

    header: SessionHeader
    entries: tuple[StoredEntry, ...]
    path: Path | None


@attrs.frozen
class ForkResult:
    """What :meth:`SessionStoreHandle.fork` gives: the new session and the editor text."""

    seed: SessionSeed
    selected_text: str | None = None


@attrs.frozen(kw_only=True)
class StoreStatus:
    """A snapshot of a store: its file, lease, counts and what was found when opening."""

    path: Path | None
    read_only: bool
    persisted: bool
    fence: int | None
    entries: int
    leaf_id: str | None
    writes: int
    syncs: int
    migrated: bool
    problems: tuple[Problem, ...]
    write_error: str | None = None
    """Why the store turned read-only after a failed write, if it did."""
    location: str | None = None
    """Where a session that has no file is kept (a database store's ``postgresql:<id>``);
    ``None`` for files and for sessions kept in memory only."""


# -- commands -----------------------------------------------------------------------------------


@attrs.frozen
class Append:
    """Append ``entry`` at the leaf; the store assigns id, parent id and timestamp."""

    entry: SessionEntry
    fence: int | None
    reply: Reply[SessionEntry]
    lazy: bool = False
    """May wait in memory for the file's creation (see the module doc): nobody is told."""


@attrs.frozen
class MoveLeaf:
    """Move the leaf to ``entry_id`` (``None``: reset it, the next append makes a new root)."""

    entry_id: str | None
    reply: Reply[None]


@attrs.frozen
class BranchWithSummary:
    """Move the leaf to ``from_id`` and append ``entry`` (a branch summary) there, atomically."""

    from_id: str | None
    entry: BranchSummaryEntry
    reply: Reply[SessionEntry]


@attrs.frozen
class Query:
    """Run a read-only function of this module over the store's state and answer its result."""

    run: Callable[[SessionStore], Any]
    reply: Reply[Any]


@attrs.frozen
class Flush:
    """Answer once everything appended before is on stable storage."""

    reply: Reply[None]


@attrs.frozen
class Subscribe:
    """A channel of ``entry_appended`` events from now on (a full channel holds the writer)."""

    capacity: int
    reply: Reply[trio.MemoryReceiveChannel[EntryAppended]]


StoreCommand = Append | MoveLeaf | BranchWithSummary | Query | Flush | Subscribe


@attrs.define
class _Pending:
    """One item of the writer's queue: an appended entry, or a flush marker (``stored`` None)."""

    stored: StoredEntry | None
    reply: Reply[Any]
    result: Any
    force_sync: bool = False


@attrs.frozen
class _Source:
    """Where a store's content comes from when it starts."""

    kind: Literal["open", "new", "seed"]
    path: Path | None
    read_only: bool = False
    cwd: str | None = None
    header: SessionHeader | None = None
    entries: tuple[StoredEntry, ...] = ()


def new_header(
    cwd: str, *, session_id: str | None = None, parent_session: str | None = None
) -> SessionHeader:
    """A fresh version-3 header."""
    return SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=session_id or new_session_id(),
        timestamp=iso_now(),
        cwd=cwd,
        parent_session=parent_session,
    )


class SessionStore(Actor[StoreCommand]):
    """Owns one session file: its tree, projection, lease and writes. Start it with
    :func:`open_store`, :func:`create_store` or :func:`start_seeded_store`."""

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
        self._file_class = file_class
        self.path: Path | None = source.path
        self.read_only = source.read_only
        self.cwd = source.cwd or ""
        self.header: SessionHeader = source.header or new_header(self.cwd)
        self.tree = SessionTree(self.header, new_id=new_id)
        self.projection = Projection()
        self.problems: tuple[Problem, ...] = ()
        self.migrated = False
        self._lease: Lease | None = None
        self._file: AppendFile | None = None
        self._needs_newline = False
        self._wants_file = False
        """An entry that needs the file exists: an acknowledged append, or an assistant
        message among the entries a store starts with (a fork's, as pi writes its file)."""
        self._pending: list[_Pending] = []
        self._wake = trio.Event()
        self._dirty = False  # written to the OS but not fsynced yet
        self._sync_deadline = math.inf  # policy ``batch``: when the dirty data must be synced
        self._subscribers: list[trio.MemorySendChannel[EntryAppended]] = []
        self._unannounced: list[EntryAppended] = []  # lazy entries: announced with the file
        self.failure: ReadOnlySessionError | None = None
        """Why the store turned read-only after a failed write (``None``: it has not)."""

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
            assert source.path is not None
            await self._open(source.path)
        else:
            origin = str(self.path) if self.path else "<memory>"
            entries = [_rehome(stored, origin) for stored in source.entries]
            self.tree = SessionTree(self.header, entries, new_id=self._new_id)
            self._wants_file = self.tree.has_assistant()
            if self.path is not None and (self._wants_file or not self.options.lazy_create):
                await self._create_file()
        self.projection = Projection(self.tree.path())
        self.nursery.start_soon(self._writer)

    async def _open(self, path: Path) -> None:
        parsed: ParsedSession | None = await trio.to_thread.run_sync(read_session, path)
        if parsed is None or parsed.empty:
            # pi: a missing file is a new session at that path; an empty one gets a header.
            # The lease is taken now either way: another process may name the same path.
            self.header = new_header(self.cwd or _process_cwd())
            self.tree = SessionTree(self.header, new_id=self._new_id)
            if not self.read_only:
                await self._take_lease()
            if parsed is not None and not self.read_only:
                await trio.to_thread.run_sync(replace_file, path, encode(self.header) + b"\n")
                self._file = await trio.to_thread.run_sync(self._file_class, path)
            self.cwd = self.cwd or self.header.cwd
            return
        if self.options.strict:
            parsed.raise_for_errors()
        if parsed.header is None:
            raise SessionFileError(str(path), 1, "no session header")
        self.problems = tuple(parsed.problems)
        for problem in parsed.problems:
            log.warning("%s", problem.describe(str(path)))
        self.header = parsed.header
        self.cwd = self.cwd or parsed.header.cwd
        self.tree = SessionTree(parsed.header, parsed.entries, new_id=self._new_id)
        self._wants_file = self.tree.has_assistant()
        self.migrated = parsed.migrated
        if self.read_only:
            return
        await self._take_lease()
        if parsed.migrated:
            # The rewrite keeps torn lines (at the end) rather than losing them.
            data = self._whole_file(parsed.header_raw, parsed.torn)
            await trio.to_thread.run_sync(replace_file, path, data)
        else:
            self._needs_newline = not parsed.ends_clean
        self._file = await trio.to_thread.run_sync(self._file_class, path)

    def _whole_file(self, header_raw: bytes | None = None, tail: Sequence[bytes] = ()) -> bytes:
        parts = [header_raw if header_raw is not None else encode(self.header)]
        parts.extend(stored.raw for stored in self.tree.entries)
        parts.extend(tail)
        return b"\n".join(parts) + b"\n"

    async def _take_lease(self) -> None:
        assert self.path is not None
        path = self.path
        take_over = self.options.take_over
        self._lease = await trio.to_thread.run_sync(
            lambda: Lease.acquire(path, take_over=take_over)
        )

    async def _create_file(self) -> None:
        """Write header and every entry so far to a new file (lazy creation's moment)."""
        assert self.path is not None
        # The entries so far, taken before the first await: one appended while the lease is
        # taken is written by its own batch, after them (taken later, it was written twice).
        data = self._whole_file()
        if self.options.sync_inline:
            # One session per process (RPC mode): inline, as its fsyncs are. The first
            # prompt's append waits for this (issue 21); through worker threads the event
            # loop would go on streaming the answer meanwhile and then deliver it in a burst.
            self._create_file_now(data)
            return
        if self._lease is None:
            await self._take_lease()
        await trio.to_thread.run_sync(create_file, self.path, data)
        self._file = await trio.to_thread.run_sync(self._file_class, self.path)

    def _create_file_now(self, data: bytes) -> None:
        assert self.path is not None
        if self._lease is None:
            self._lease = Lease.acquire(self.path, take_over=self.options.take_over)
        create_file(self.path, data)
        self._file = self._file_class(self.path)

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
        # Both are idempotent: after a clean stop there is nothing left to do.
        if self._file is not None:
            self._file.close()
        if self._lease is not None:
            try:
                self._lease.release()
            except OSError as exc:  # e.g. a full disk: the lock is dropped all the same
                log.warning("%s: could not mark the lease released: %s", self.path, exc)

    async def stopping(self) -> None:
        """Inbox closed: write what is queued, sync, release the lease, end subscriptions."""
        done: Reply[None] = Reply()
        self._pending.append(_Pending(None, done, None, force_sync=self.options.fsync != "never"))
        self._wake.set()
        try:
            await done.wait()
        except ReadOnlySessionError as exc:  # the store failed before: that was reported
            log.warning("%s", exc)
        if self._file is not None:
            await trio.to_thread.run_sync(self._file.close)
        if self._lease is not None:
            await trio.to_thread.run_sync(self._lease.release)
        for subscriber in self._subscribers:
            await subscriber.aclose()

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
                    self._move_leaf(from_id)
                    self._append(entry, reply)
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
                self._wake.set()
            case Subscribe(capacity=capacity, reply=reply):
                send, receive = trio.open_memory_channel[EntryAppended](capacity)
                self._subscribers.append(send)
                reply.set(receive)

    @property
    def fence(self) -> int | None:
        """The fence of this store's lease (``None`` while it holds none)."""
        return None if self._lease is None else self._lease.fence

    def _check_writable(self) -> None:
        if self.failure is not None:
            raise ReadOnlySessionError(str(self.failure)) from self.failure.__cause__
        if self.read_only:
            raise ReadOnlySessionError(f"{self.path}: the session was opened read-only")

    def _check_fence(self, fence: int | None) -> None:
        self._check_writable()
        if fence is not None and fence != self.fence:
            raise StaleFenceError(
                f"{self.path}: append with lease {fence} refused, the lease is {self.fence}"
            )

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
        tree = self.tree
        if isinstance(draft, LabelEntry | ContextEditEntry):
            tree.require(draft.target_id)
        if isinstance(draft, SessionInfoEntry) and draft.name is not None:
            draft = attrs.evolve(draft, name=draft.name.strip())
        entry = attrs.evolve(draft, id=tree.next_id(), parent_id=tree.leaf_id, timestamp=iso_now())
        stored = StoredEntry.from_entry(entry, origin=str(self.path) if self.path else "<memory>")
        tree.add(stored)
        self.projection.append(stored)
        if not lazy or stored.is_assistant_message:
            self._wants_file = True  # this append returns once the file holds it
        self._pending.append(_Pending(stored, reply, entry))
        self._wake.set()

    # -- the writer ------------------------------------------------------------------------------

    async def _writer(self) -> None:
        """Write queued appends in batches: one write and at most one fsync per batch."""
        while True:
            while not self._pending:
                # Policy ``batch``: the first unsynced write sets a deadline; load after it
                # does not push it back, and waking early for nothing does not sync early.
                deadline = self._sync_deadline
                if deadline == math.inf:
                    await self._wake.wait()  # nothing unsynced: no deadline to keep
                else:
                    with trio.move_on_at(deadline):
                        await self._wake.wait()
                self._wake = trio.Event()
                if not self._pending and self._dirty and trio.current_time() >= deadline:
                    try:
                        await self._sync()
                    except OSError as exc:  # policy ``batch``'s timed fsync
                        self._turn_read_only(exc)
                        self._dirty, self._sync_deadline = False, math.inf  # no retry loop
            batch, self._pending = self._pending, []
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
            except BaseException as exc:
                for item in batch:
                    item.reply.fail(exc)
                raise
            for item in batch:
                item.reply.set(item.result)
            appended = [
                EntryAppended(entry=item.result) for item in batch if item.stored is not None
            ]
            if not self._written():
                self._unannounced.extend(appended)  # ``entry_appended`` means durable
                continue
            appended, self._unannounced = self._unannounced + appended, []
            for event in appended:
                await self._emit(event)

    def _written(self) -> bool:
        """Whether an entry committed now is stored (or never will be: a store in memory)."""
        return self._file is not None or self.path is None

    def _turn_read_only(self, exc: OSError) -> ReadOnlySessionError:
        """Record a failed write: from now on the store refuses appends (see the module doc)."""
        if self.failure is None:
            self.failure = ReadOnlySessionError(
                f"{self.path}: writing the session failed: {exc}. The session is read-only "
                "from now on; every entry saved before is in the file."
            )
            self.failure.__cause__ = exc
            log.error("%s", self.failure)
        return self.failure

    async def _commit(self, batch: list[_Pending]) -> None:
        lines = [item.stored.raw for item in batch if item.stored is not None]
        force = any(item.force_sync for item in batch)
        if self._file is None:
            creatable = self.path is not None and not self.read_only
            if lines and creatable and (self._wants_file or not self.options.lazy_create):
                await self._create_file()  # every entry so far, synced
            return
        if lines:
            data = b"\n".join(lines) + b"\n"
            if self._needs_newline:
                data = b"\n" + data  # start after a torn last line, never inside it
            policy = self.options.fsync
            overdue = trio.current_time() >= self._sync_deadline
            sync = policy == "always" or force or overdue
            # The write goes to the page cache inline (microseconds); only the fsync, which
            # may take long on a slow disk, runs in a thread. A whole batch in the thread cost
            # a thread hop per append even without a sync, and its Python code waited for the
            # GIL while the event loop was busy (issue 7: per-turn latency).
            if sync and not self.options.sync_inline:
                await trio.to_thread.run_sync(self._write_batch, data, True)
            elif sync:
                # Synced in a process that hosts this one session (``sync_inline``): written at
                # once with its writeback started, then the fsync, which stops the whole
                # event loop, waits until nothing else can run (a user message's sync then
                # overlaps the model request in flight instead of delaying it), for at most
                # IDLE_SYNC_WAIT; by then the data is on its way and the fsync waits for the
                # journal only (issue 7). Shielded: a batch taken is synced.
                start = self._write_batch(data, False, start_writeback=True)
                await until_idle(IDLE_SYNC_WAIT, shield=True)
                self._sync_batch(start)
            else:
                # Page cache only (policies ``batch``/``never``): a thread hop costs more
                # than the write (issue 7).
                self._write_batch(data, False)
            self._needs_newline = False
            if sync:
                self._dirty = False
                self._sync_deadline = math.inf
            elif not self._dirty:
                self._dirty = True
                if policy == "batch":
                    self._sync_deadline = trio.current_time() + self.options.batch_interval
        elif force and self._dirty:
            await self._sync()

    def _write_batch(self, data: bytes, sync: bool, *, start_writeback: bool = False) -> int:
        # Fence check, one write, maybe one fsync (in a worker thread when it syncs); returns
        # where the batch starts in the file.
        file = self._file
        assert file is not None
        if self._lease is not None:
            self._lease.check()
        start = file.size()
        try:
            file.write(data)
            if start_writeback:
                file.start_writeback(start, len(data))
        except OSError:
            # A full disk may have taken part of the batch: cut it off, so the file holds
            # exactly the entries whose appends returned (shrinking needs no space).
            file.truncate(start)
            raise
        if sync:
            self._sync_batch(start)
        return start

    def _sync_batch(self, start: int) -> None:
        # The fsync of the batch written from ``start``: a failure cuts it off as well.
        file = self._file
        assert file is not None
        try:
            file.sync()
        except OSError:
            file.truncate(start)
            raise

    async def _sync(self) -> None:
        file = self._file
        if file is not None:
            await trio.to_thread.run_sync(file.sync)
        self._dirty = False
        self._sync_deadline = math.inf

    async def _emit(self, event: EntryAppended) -> None:
        for subscriber in list(self._subscribers):
            try:
                await subscriber.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(subscriber)

    # -- state for queries -----------------------------------------------------------------------

    def status(self) -> StoreStatus:
        """A snapshot of this store (runs inside the actor)."""
        return StoreStatus(
            path=self.path,
            read_only=self.read_only,
            persisted=self._file is not None,
            fence=self.fence,
            entries=len(self.tree),
            leaf_id=self.tree.leaf_id,
            writes=0 if self._file is None else self._file.writes,
            syncs=0 if self._file is None else self._file.syncs,
            migrated=self.migrated,
            problems=self.problems,
            write_error=None if self.failure is None else str(self.failure),
        )

    def context_at(self, leaf_id: str | None) -> SessionContext:
        """pi's ``buildSessionContext(entries, leaf_id)``: an unknown id means the last entry."""
        tree = self.tree
        if leaf_id is None:
            return EMPTY_CONTEXT
        if leaf_id == tree.leaf_id:
            return self.projection.context()
        if leaf_id not in tree:
            if not tree.entries:
                return EMPTY_CONTEXT
            leaf_id = tree.entries[-1].id
        return Projection(tree.path(leaf_id)).context()

    def fork(self, entry_id: str, position: Literal["before", "at"]) -> ForkResult:
        """The new session of pi's fork (``before`` a user message) or clone (``at`` an entry)."""
        tree = self.tree
        stored = tree.get(entry_id)
        selected: str | None = None
        if position == "before":
            if stored is None or stored.type != "message" or stored.role != "user":
                raise SessionError("Invalid entry ID for forking")
            message = stored.message()
            assert isinstance(message, UserMessage)
            selected = text_of(message.content)
            target = stored.parent_id
        else:
            if stored is None:
                raise EntryNotFoundError(f"Entry {entry_id} not found")
            target = entry_id
        return ForkResult(self.seed(target), selected)

    def seed(self, leaf_id: str | None) -> SessionSeed:
        """pi's ``createBranchedSession(leaf_id)`` as a new session beside this one
        (``None``: an empty session), with ``parentSession`` = this file."""
        header = new_header(self.header.cwd, parent_session=_parent_ref(self.path))
        entries = () if leaf_id is None else tuple(self.tree.branched_entries(leaf_id))
        path = None
        if self.path is not None:
            path = self.path.parent / session_file_name(header.timestamp, header.id)
        return SessionSeed(header=header, entries=entries, path=path)


def _parent_ref(path: Path | None) -> str | None:
    return None if path is None else str(path)


def _process_cwd() -> str:
    return str(Path.cwd())


def _rehome(stored: StoredEntry, origin: str) -> StoredEntry:
    """A copy of an entry for another file (same bytes and decoded forms, new origin)."""
    copy = StoredEntry(
        type=stored.type,
        id=stored.id,
        parent_id=stored.parent_id,
        timestamp=stored.timestamp,
        raw=stored.raw,
        role=stored.role,
        origin=origin,
        entry=stored.entry() if stored.decoded else None,
    )
    return copy


# -- queries (run inside the actor) ------------------------------------------------------------


def _q_entry(entry_id: str) -> Callable[[SessionStore], AnyEntry | None]:
    def run(store: SessionStore) -> AnyEntry | None:
        stored = store.tree.get(entry_id)
        return None if stored is None else stored.entry()

    return run


def _entries(stored: Sequence[StoredEntry]) -> list[AnyEntry]:
    return [item.entry() for item in stored]


# -- the handle --------------------------------------------------------------------------------


class SessionStoreHandle(Handle[StoreCommand]):
    """Typed access to a :class:`SessionStore`.

    ``header``, ``path`` and ``read_only`` are fixed for the store's life and read without a
    round trip. Appends return the entry as written (id, parent id and timestamp assigned).
    """

    def __init__(
        self,
        address: Address[StoreCommand],
        *,
        header: SessionHeader,
        path: Path | None,
        read_only: bool,
    ) -> None:
        super().__init__(address)
        self._header = header
        self._path = path
        self._read_only = read_only

    @property
    def header(self) -> SessionHeader:
        """The session's header line (after any migration)."""
        return self._header

    @property
    def path(self) -> Path | None:
        """The session file (``None`` in memory); it exists once the store has written it."""
        return self._path

    @property
    def read_only(self) -> bool:
        """Whether the store refuses appends."""
        return self._read_only

    async def _query(self, run: Callable[[SessionStore], T]) -> T:
        result: T = await self.ask(lambda reply: Query(run, reply))
        return result

    # -- appends ------------------------------------------------------------------------------

    async def append(self, entry: E, *, fence: int | None = None, lazy: bool = False) -> E:
        """Append an entry at the leaf; its ``id``, ``parent_id`` and ``timestamp`` are replaced.

        Returns once durable (per the fsync policy), creating a new session's file if need
        be; with ``lazy``, before the file exists, once recorded in memory (the entry is
        written with the first append that is not lazy: never announce a lazy entry).
        With ``fence``, the append is refused (:class:`StaleFenceError`) unless it is the
        store's current lease fence.
        """
        written: SessionEntry = await self.ask(lambda reply: Append(entry, fence, reply, lazy))
        assert isinstance(written, type(entry))
        return written

    async def append_message(self, message: AgentMessage) -> MessageEntry:
        """Append a ``message`` entry."""
        return await self.append(
            MessageEntry(id=_DRAFT, parent_id=None, timestamp=_DRAFT, message=message)
        )

    async def append_thinking_level_change(
        self, level: str, *, lazy: bool = False
    ) -> ThinkingLevelChangeEntry:
        """Append a ``thinking_level_change`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            ThinkingLevelChangeEntry(
                id=_DRAFT, parent_id=None, timestamp=_DRAFT, thinking_level=level
            ),
            lazy=lazy,
        )

    async def append_model_change(
        self, provider: str, model_id: str, *, lazy: bool = False
    ) -> ModelChangeEntry:
        """Append a ``model_change`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            ModelChangeEntry(
                id=_DRAFT, parent_id=None, timestamp=_DRAFT, provider=provider, model_id=model_id
            ),
            lazy=lazy,
        )

    async def append_compaction(
        self,
        summary: str,
        first_kept_entry_id: str,
        tokens_before: int,
        details: Any = None,
        from_hook: bool | None = None,
        *,
        lazy: bool = False,
    ) -> CompactionEntry:
        """Append a ``compaction`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            CompactionEntry(
                id=_DRAFT,
                parent_id=None,
                timestamp=_DRAFT,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                from_hook=from_hook,
            ),
            lazy=lazy,
        )

    async def append_custom_entry(self, custom_type: str, data: Any = None) -> CustomEntry:
        """Append a ``custom`` entry (extension state, never in the context)."""
        return await self.append(
            CustomEntry(
                custom_type=custom_type, data=data, id=_DRAFT, parent_id=None, timestamp=_DRAFT
            )
        )

    async def append_custom_message_entry(
        self, custom_type: str, content: UserContent, display: bool, details: Any = None
    ) -> CustomMessageEntry:
        """Append a ``custom_message`` entry (reaches the model as a user message)."""
        return await self.append(
            CustomMessageEntry(
                custom_type=custom_type,
                content=content,
                display=display,
                details=details,
                id=_DRAFT,
                parent_id=None,
                timestamp=_DRAFT,
            )
        )

    async def append_label_change(self, target_id: str, label: str | None) -> LabelEntry:
        """Set (non-empty) or clear the label of an entry; raises ``Entry <id> not found``."""
        return await self.append(
            LabelEntry(
                id=_DRAFT, parent_id=None, timestamp=_DRAFT, target_id=target_id, label=label
            )
        )

    async def append_session_info(self, name: str) -> SessionInfoEntry:
        """Name the session (stored trimmed; an empty name clears it)."""
        return await self.append(
            SessionInfoEntry(id=_DRAFT, parent_id=None, timestamp=_DRAFT, name=name)
        )

    async def append_context_edit(
        self, target_id: str, replacement: ContentReplacement | None, reason: str | None = None
    ) -> ContextEditEntry:
        """Omit (``None``) or rewrite the content of ``target_id`` in the projection."""
        return await self.append(
            ContextEditEntry(
                id=_DRAFT,
                parent_id=None,
                timestamp=_DRAFT,
                target_id=target_id,
                replacement=replacement,
                reason=reason,
            )
        )

    # -- the leaf ------------------------------------------------------------------------------

    async def branch(self, entry_id: str) -> None:
        """Move the leaf to an entry; raises ``Entry <id> not found``."""
        await self.ask(lambda reply: MoveLeaf(entry_id, reply))

    async def reset_leaf(self) -> None:
        """Leaf = none: the next append creates a new root."""
        await self.ask(lambda reply: MoveLeaf(None, reply))

    async def branch_with_summary(
        self,
        from_id: str | None,
        summary: str,
        details: Any = None,
        from_hook: bool | None = None,
    ) -> BranchSummaryEntry:
        """Move the leaf to ``from_id`` (``None``: reset) and append a ``branch_summary``."""
        draft = BranchSummaryEntry(
            id=_DRAFT,
            parent_id=None,
            timestamp=_DRAFT,
            from_id=from_id or "root",
            summary=summary,
            details=details,
            from_hook=from_hook,
        )
        written: SessionEntry = await self.ask(
            lambda reply: BranchWithSummary(from_id, draft, reply)
        )
        assert isinstance(written, BranchSummaryEntry)
        return written

    async def leaf_id(self) -> str | None:
        """The current leaf's id."""
        return await self._query(lambda store: store.tree.leaf_id)

    async def leaf_entry(self) -> AnyEntry | None:
        """The entry at the leaf."""

        def run(store: SessionStore) -> AnyEntry | None:
            leaf = store.tree.leaf
            return None if leaf is None else leaf.entry()

        return await self._query(run)

    # -- reading the tree ----------------------------------------------------------------------

    async def get_entry(self, entry_id: str) -> AnyEntry | None:
        """The entry with that id, if any."""
        return await self._query(_q_entry(entry_id))

    async def entries(self) -> list[AnyEntry]:
        """Every entry in file order (decodes them all)."""
        return await self._query(lambda store: _entries(store.tree.entries))

    async def children(self, entry_id: str) -> list[AnyEntry]:
        """The children of an entry, in file order."""
        return await self._query(lambda store: _entries(store.tree.children(entry_id)))

    async def branch_entries(self, from_id: str | None = None) -> list[AnyEntry]:
        """pi's ``getBranch``: entries root -> ``from_id`` (default: the leaf)."""
        return await self._query(lambda store: _entries(store.tree.path(from_id)))

    async def tree(self) -> list[TreeNode]:
        """pi's ``getTree``: roots, children by timestamp, labels on the nodes."""
        return await self._query(lambda store: store.tree.tree())

    async def label(self, entry_id: str) -> str | None:
        """The label of an entry, if set."""
        return await self._query(lambda store: store.tree.label(entry_id))

    async def labels(self) -> dict[str, str]:
        """Every resolved label by target id."""
        return await self._query(lambda store: store.tree.labels)

    async def session_name(self) -> str | None:
        """The session's name, if set."""
        return await self._query(lambda store: store.tree.session_name)

    async def user_messages_for_forking(self) -> list[ForkMessage]:
        """Every user message of the file (all branches) with non-empty text."""
        return await self._query(lambda store: store.tree.user_messages_for_forking())

    # -- the projection ------------------------------------------------------------------------

    async def context(self) -> SessionContext:
        """The context at the leaf: O(1), a snapshot whose messages decode on access."""
        return await self._query(lambda store: store.projection.context())

    async def context_at(self, leaf_id: str | None) -> SessionContext:
        """The context at any entry (O(path)); ``None`` is empty, an unknown id the last entry."""
        return await self._query(lambda store: store.context_at(leaf_id))

    async def latest_compaction_timestamp(self) -> str | None:
        """The timestamp of the last compaction on the leaf's branch, if any: O(1), the
        projection knows it (walking the branch for it was O(n) per turn)."""
        return await self._query(lambda store: store.projection.latest_compaction_timestamp)

    async def context_and_latest_compaction(self) -> tuple[SessionContext, str | None]:
        """:meth:`context` and :meth:`latest_compaction_timestamp` in one round trip (both
        O(1)): what the compaction checks read before and after every run."""
        return await self._query(
            lambda store: (store.projection.context(), store.projection.latest_compaction_timestamp)
        )

    async def has_entry_type(self, entry_type: str) -> bool:
        """Whether any entry of the file has this ``type`` (a scan of envelopes, no decoding)."""
        return await self._query(
            lambda store: any(stored.type == entry_type for stored in store.tree.entries)
        )

    async def context_messages(self) -> tuple[AgentMessage, ...]:
        """The projected messages at the leaf as a tuple (O(n); prefer :meth:`context`)."""
        context = await self.context()
        return context.messages.materialize()

    # -- new sessions --------------------------------------------------------------------------

    async def fork(
        self, entry_id: str, *, position: Literal["before", "at"] = "before"
    ) -> ForkResult:
        """pi's fork: ``before`` a user message (its text is the ``selected_text``) or ``at``
        an entry (clone). The result's seed starts the new store (:func:`start_seeded_store`);
        this store and its file are unchanged."""
        return await self._query(lambda store: store.fork(entry_id, position))

    async def clone(self) -> ForkResult:
        """pi's clone: a new session holding the whole current branch."""

        return await self._query(lambda store: ForkResult(store.seed(store.tree.leaf_id)))

    # -- durability and events -----------------------------------------------------------------

    async def flush(self) -> None:
        """Return once everything appended so far is on stable storage (fsyncs if needed)."""
        await self.ask(Flush)

    async def status(self) -> StoreStatus:
        """A snapshot of the store's state."""
        return await self._query(lambda store: store.status())

    async def subscribe(self, capacity: int = 256) -> trio.MemoryReceiveChannel[EntryAppended]:
        """``entry_appended`` events from now on, in order, once each entry is written."""
        return await self.ask(lambda reply: Subscribe(capacity, reply))


# -- starting stores ---------------------------------------------------------------------------


async def start_store(nursery: trio.Nursery, store: SessionStore) -> SessionStoreHandle:
    """Start ``store`` in ``nursery`` and return its handle once it has loaded.

    Opening errors (:class:`~pitrio.errors.SessionFileError`, ...) are raised as themselves,
    not wrapped in the actor nursery's exception group.
    """
    with collapse_groups():
        address: Address[StoreCommand] = await nursery.start(store.run)
    return SessionStoreHandle(
        address, header=store.header, path=store.path, read_only=store.read_only
    )


async def open_store(
    nursery: trio.Nursery,
    path: Path | str,
    *,
    cwd: str | None = None,
    read_only: bool = False,
    options: StoreOptions | None = None,
) -> SessionStoreHandle:
    """pi's ``SessionManager.open``: the session in ``path`` (a new one there if missing).

    Raises :class:`~pitrio.errors.SessionFileError` for a file with errors (strict),
    :class:`~pitrio.errors.SessionLockedError` if another live process writes it.
    """
    store = SessionStore.opening(Path(path), cwd=cwd, read_only=read_only, options=options)
    return await start_store(nursery, store)


async def create_store(
    nursery: trio.Nursery,
    cwd: str,
    *,
    session_dir_override: str | None = None,
    session_id: str | None = None,
    parent_session: str | None = None,
    persist: bool = True,
    options: StoreOptions | None = None,
) -> SessionStoreHandle:
    """pi's ``SessionManager.create`` / ``newSession`` (``persist=False``: ``inMemory``).

    The file goes in the session dir of ``cwd`` and is written with the first append that
    is not ``lazy``.
    """
    header = new_header(cwd, session_id=session_id, parent_session=parent_session)
    path = None
    if persist:
        directory = session_dir(cwd, override=session_dir_override)
        path = directory / session_file_name(header.timestamp, header.id)
    return await start_store(nursery, SessionStore.creating(header, path, options=options))


async def start_seeded_store(
    nursery: trio.Nursery, seed: SessionSeed, *, options: StoreOptions | None = None
) -> SessionStoreHandle:
    """Start the store of a fork or clone; its file is written now if it holds an assistant
    message, else lazily."""
    return await start_store(nursery, SessionStore.seeded(seed, options=options))
