"""The typed access to a session store: :class:`SessionStoreHandle` (see :mod:`.actor`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import trio

from pitrio.actors._actor import Address, Handle
from pitrio.actors.session_store import queries
from pitrio.actors.session_store.command_stamp import COMMAND_STAMP, stamped
from pitrio.actors.session_store.commands import (
    DRAFT,
    Append,
    BranchWithSummary,
    CatchUp,
    DeliverNotices,
    Flush,
    ForkResult,
    MoveLeaf,
    Query,
    StoreCommand,
    StoreNotice,
    StoreStatus,
    StoreView,
    Subscribe,
    WatchLease,
    WatchNotices,
)
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.actors.session_store.projection import SessionContext
from pitrio.actors.session_store.stored import AnyEntry
from pitrio.actors.session_store.tree import ForkMessage, TreeNode
from pitrio.messages.agent import AgentMessage, Usage
from pitrio.messages.content import UserContent
from pitrio.messages.entries import (
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
    UsageEntry,
)
from pitrio.messages.events import EntryAppended

T = TypeVar("T")
E = TypeVar("E", bound=SessionEntry)

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

    async def _query(self, run: Callable[[StoreView], T]) -> T:
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
        stamp = COMMAND_STAMP.get()
        if stamp is not None:  # appended while a client's command is applied (exactly once)
            entry = stamped(entry, stamp)
        written: SessionEntry = await self.ask(lambda reply: Append(entry, fence, reply, lazy))
        assert isinstance(written, type(entry))
        return written

    async def append_message(self, message: AgentMessage) -> MessageEntry:
        """Append a ``message`` entry."""
        return await self.append(
            MessageEntry(id=DRAFT, parent_id=None, timestamp=DRAFT, message=message)
        )

    async def append_thinking_level_change(
        self, level: str, *, lazy: bool = False
    ) -> ThinkingLevelChangeEntry:
        """Append a ``thinking_level_change`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            ThinkingLevelChangeEntry(
                id=DRAFT, parent_id=None, timestamp=DRAFT, thinking_level=level
            ),
            lazy=lazy,
        )

    async def append_model_change(
        self, provider: str, model_id: str, *, lazy: bool = False
    ) -> ModelChangeEntry:
        """Append a ``model_change`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            ModelChangeEntry(
                id=DRAFT, parent_id=None, timestamp=DRAFT, provider=provider, model_id=model_id
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
        usage: Usage | None = None,
    ) -> CompactionEntry:
        """Append a ``compaction`` entry (``lazy``: see :meth:`append`)."""
        return await self.append(
            CompactionEntry(
                id=DRAFT,
                parent_id=None,
                timestamp=DRAFT,
                summary=summary,
                first_kept_entry_id=first_kept_entry_id,
                tokens_before=tokens_before,
                details=details,
                usage=usage,
                from_hook=from_hook,
            ),
            lazy=lazy,
        )

    async def append_custom_entry(self, custom_type: str, data: Any = None) -> CustomEntry:
        """Append a ``custom`` entry (extension state, never in the context)."""
        return await self.append(
            CustomEntry(
                custom_type=custom_type, data=data, id=DRAFT, parent_id=None, timestamp=DRAFT
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
                id=DRAFT,
                parent_id=None,
                timestamp=DRAFT,
            )
        )

    async def append_label_change(self, target_id: str, label: str | None) -> LabelEntry:
        """Set (non-empty) or clear the label of an entry; raises ``Entry <id> not found``."""
        return await self.append(
            LabelEntry(id=DRAFT, parent_id=None, timestamp=DRAFT, target_id=target_id, label=label)
        )

    async def append_session_info(self, name: str) -> SessionInfoEntry:
        """Name the session (stored trimmed; an empty name clears it)."""
        return await self.append(
            SessionInfoEntry(id=DRAFT, parent_id=None, timestamp=DRAFT, name=name)
        )

    async def append_context_edit(
        self, target_id: str, replacement: ContentReplacement | None, reason: str | None = None
    ) -> ContextEditEntry:
        """Omit (``None``) or rewrite the content of ``target_id`` in the projection."""
        return await self.append(
            ContextEditEntry(
                id=DRAFT,
                parent_id=None,
                timestamp=DRAFT,
                target_id=target_id,
                replacement=replacement,
                reason=reason,
            )
        )

    async def append_usage(self, entry: UsageEntry) -> UsageEntry:
        """Append a ``usage`` entry: model usage outside the conversation (a cache refresh),
        counted by the statistics, never projected into the model context."""
        return await self.append(entry)

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
        usage: Usage | None = None,
    ) -> BranchSummaryEntry:
        """Move the leaf to ``from_id`` (``None``: reset) and append a ``branch_summary``.

        The entry's ``fromId`` is the leaf being left, filled in by the store.
        """
        draft = BranchSummaryEntry(
            id=DRAFT,
            parent_id=None,
            timestamp=DRAFT,
            from_id=DRAFT,
            summary=summary,
            details=details,
            from_hook=from_hook,
            usage=usage,
        )
        stamp = COMMAND_STAMP.get()
        if stamp is not None:
            draft = stamped(draft, stamp)
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

        def run(store: StoreView) -> AnyEntry | None:
            leaf = store.tree.leaf
            return None if leaf is None else leaf.entry()

        return await self._query(run)

    # -- reading the tree ----------------------------------------------------------------------

    async def get_entry(self, entry_id: str) -> AnyEntry | None:
        """The entry with that id, if any."""
        return await self._query(queries.entry(entry_id))

    async def entries(self) -> list[AnyEntry]:
        """Every entry in file order (decodes them all)."""
        return await self._query(lambda store: queries.entries(store.tree.entries))

    async def children(self, entry_id: str) -> list[AnyEntry]:
        """The children of an entry, in file order."""
        return await self._query(lambda store: queries.entries(store.tree.children(entry_id)))

    async def branch_entries(self, from_id: str | None = None) -> list[AnyEntry]:
        """pi's ``getBranch``: entries root -> ``from_id`` (default: the leaf)."""
        return await self._query(lambda store: queries.entries(store.tree.path(from_id)))

    async def tree(self) -> list[TreeNode]:
        """pi's ``getTree``: roots, children by timestamp, labels on the nodes."""
        return await self._query(lambda store: store.tree.tree())

    async def entry_lines(self) -> tuple[list[tuple[str, bytes]], str | None]:
        """Every entry's id and JSON as read or written (unknown fields and key order kept),
        in file order, and the leaf id: pi's ``getEntries`` and ``getLeafId``."""
        return await self._query(
            lambda store: (
                [(stored.id, stored.raw) for stored in store.tree.entries],
                store.tree.leaf_id,
            )
        )

    async def tree_and_leaf(self) -> tuple[list[TreeNode], str | None]:
        """:meth:`tree` and the leaf id, read together (``get_tree``)."""
        return await self._query(lambda store: (store.tree.tree(), store.tree.leaf_id))

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
        return await self._query(lambda store: queries.context_at(store, leaf_id))

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

    async def preview_messages(self, entries: Sequence[SessionEntry]) -> tuple[AgentMessage, ...]:
        """The projected messages the leaf would have with ``entries`` appended (nothing is
        written; O(path))."""
        context = await self._query(queries.preview(entries))
        return context.messages.materialize()

    # -- new sessions --------------------------------------------------------------------------

    async def fork(
        self,
        entry_id: str,
        *,
        position: Literal["before", "at"] = "before",
        session_id: str | None = None,
    ) -> ForkResult:
        """pi's fork: ``before`` a user message (its text is the ``selected_text``) or ``at``
        an entry (clone). The result's seed starts the new store (:func:`start_seeded_store`);
        this store and its file are unchanged. ``session_id``: the new session's id."""
        return await self._query(lambda store: queries.fork(store, entry_id, position, session_id))

    async def clone(self, *, session_id: str | None = None) -> ForkResult:
        """pi's clone: a new session holding the whole current branch."""
        return await self._query(
            lambda store: ForkResult(queries.seed(store, store.tree.leaf_id, session_id))
        )

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

    async def catch_up(self) -> int:
        """Take in what another writer appended to the file since this store last wrote it
        (one ``fstat`` when nothing was); returns how many times the store has taken in
        another writer's entries so far (a change means the projection moved)."""
        return await self.ask(CatchUp)

    async def watch_notices(self, capacity: int = 16) -> trio.MemoryReceiveChannel[StoreNotice]:
        """What the store tells unasked: ``entries_merged`` (another writer's entries taken
        in, see :mod:`.foreign`), ``session_read_only`` (it turned read-only by itself: its
        lease was lost)."""
        return await self.ask(lambda reply: WatchNotices(capacity, reply))

    async def deliver_notices(self, deliver: Callable[[StoreNotice], None]) -> None:
        """Like :meth:`watch_notices`, each notice handed to ``deliver`` in the store's task
        as it happens (``deliver`` must not block or raise); no channel between the two."""
        await self.ask(lambda reply: DeliverNotices(deliver, reply))

    async def lease_moved(self) -> SessionOwnedElsewhereError:
        """Wait until another daemon has taken this store's lease (a shared store: the store
        is read-only by then); who holds the session now. Never returns for a file's lease."""
        return await self.ask(WatchLease)
