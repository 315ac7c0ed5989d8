"""What the session store's actor and its handle share: options, results and commands.

:class:`StoreOptions` (how a store writes), :class:`SessionSeed` and :class:`ForkResult` (new
sessions from an old one), :class:`StoreStatus` (a snapshot), the commands of the store's inbox
(:data:`StoreCommand`), and the writer's queue items. Plain data, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.session_store.file_format import Problem
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.messages.entries import (
    CURRENT_SESSION_VERSION,
    BranchSummaryEntry,
    SessionEntry,
    SessionHeader,
    iso_now,
    new_session_id,
)
from pitrio.messages.events import EntriesMerged, EntryAppended, SessionReadOnly

if TYPE_CHECKING:
    from pitrio.actors.session_store.projection import Projection
    from pitrio.actors.session_store.tree import SessionTree


class StoreView(Protocol):
    """What a ``Query`` run inside the store reads of it: the actor's state, read-only.

    Named here, not as the actor class, so that the commands, the handle and the queries need
    not import the actor that imports them."""

    @property
    def path(self) -> Path | None: ...
    @property
    def header(self) -> SessionHeader: ...
    @property
    def tree(self) -> SessionTree: ...
    @property
    def projection(self) -> Projection: ...
    def status(self) -> StoreStatus: ...


FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[FsyncPolicy, ...] = ("always", "batch", "never")

DRAFT = ""  # id and timestamp of an entry not appended yet: the store assigns both


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
    backup: Path | None = None
    """Where opening kept the original of a file it migrated (``None``: none was migrated)."""
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
    """Move the leaf to ``from_id`` and append ``entry`` (a branch summary) there, atomically.

    The store sets the entry's ``from_id`` to the leaf it leaves.
    """

    from_id: str | None
    entry: BranchSummaryEntry
    reply: Reply[SessionEntry]


@attrs.frozen
class Query:
    """Run a read-only function of this module over the store's state and answer its result."""

    run: Callable[[StoreView], Any]
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


@attrs.frozen
class CatchUp:
    """Take in what another writer appended to the file (checked in the writer's turn, so
    never against a batch of this store's in flight); answers how many times the store has
    taken in another writer's entries since it started."""

    reply: Reply[int]


StoreNotice = EntriesMerged | SessionReadOnly
"""What a store tells its session unasked: another writer's entries were taken in, or the store
turned read-only by itself (its lease was lost)."""


@attrs.frozen
class WatchNotices:
    """A channel of the store's notices (:data:`StoreNotice`)."""

    capacity: int
    reply: Reply[trio.MemoryReceiveChannel[StoreNotice]]


@attrs.frozen
class DeliverNotices:
    """Call ``deliver`` with each of the store's notices, in the store's task, at once (it must
    not block or raise): a watcher that needs no channel or task waiting (issue 38)."""

    deliver: Callable[[StoreNotice], None]
    reply: Reply[None]


@attrs.frozen
class WatchLease:
    """Answered once another daemon has taken the store's lease (a shared store; the store is
    read-only by then) with who holds it now, for the host to hand the session over. A file's
    lease is a lock the kernel holds for the store: this is never answered for it."""

    reply: Reply[SessionOwnedElsewhereError]


StoreCommand = (
    Append
    | MoveLeaf
    | BranchWithSummary
    | Query
    | Flush
    | Subscribe
    | CatchUp
    | WatchNotices
    | DeliverNotices
    | WatchLease
)


@attrs.define
class _Pending:
    """One item of the writer's queue: an appended entry, or a flush marker (``stored`` None)."""

    stored: StoredEntry | None
    reply: Reply[Any]
    result: Any
    force_sync: bool = False
    catch_up: bool = False  # a CatchUp marker: check the file even with nothing to write


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
