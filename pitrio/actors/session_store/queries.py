"""Read-only functions of a store's state, run inside the actor (a handle's ``Query``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

import attrs

from pitrio.actors.session_store.commands import ForkResult, SessionSeed, StoreView, new_header
from pitrio.actors.session_store.paths import session_file_name
from pitrio.actors.session_store.projection import EMPTY_CONTEXT, Projection, SessionContext
from pitrio.actors.session_store.stored import AnyEntry, StoredEntry
from pitrio.errors import EntryNotFoundError, SessionError
from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of
from pitrio.messages.entries import SessionEntry


def entry(entry_id: str) -> Callable[[StoreView], AnyEntry | None]:
    """The query of the entry with that id (``None`` if there is none)."""

    def run(store: StoreView) -> AnyEntry | None:
        stored = store.tree.get(entry_id)
        return None if stored is None else stored.entry()

    return run


def entries(stored: Sequence[StoredEntry]) -> list[AnyEntry]:
    """The entries of stored lines, decoded."""
    return [item.entry() for item in stored]


def context_at(store: StoreView, leaf_id: str | None) -> SessionContext:
    """pi's ``buildSessionContext(entries, leaf_id)``: an unknown id means the last entry."""
    tree = store.tree
    if leaf_id is None:
        return EMPTY_CONTEXT
    if leaf_id == tree.leaf_id:
        return store.projection.context()
    if leaf_id not in tree:
        if not tree.entries:
            return EMPTY_CONTEXT
        leaf_id = tree.entries[-1].id
    return Projection(tree.path(leaf_id)).context()


def preview(entries: Sequence[SessionEntry]) -> Callable[[StoreView], SessionContext]:
    """The query of the context the leaf's would become with ``entries`` appended after it, in
    order (their envelopes are replaced: each one's parent is the one before), without writing
    them: a boundary handler's preview of the drafts before it (pi 1.6.0). O(path)."""

    def run(store: StoreView) -> SessionContext:
        tree = store.tree
        projection = Projection(tree.path())
        parent = tree.leaf_id
        for number, item in enumerate(entries, start=1):
            placed = attrs.evolve(item, id=f"preview-{number}", parent_id=parent)
            projection.append(StoredEntry.from_entry(placed))
            parent = placed.id
        return projection.context()

    return run


def fork(
    store: StoreView,
    entry_id: str,
    position: Literal["before", "at"],
    session_id: str | None = None,
) -> ForkResult:
    """The new session of pi's fork (``before`` a user message) or clone (``at`` an entry),
    with the id ``session_id`` if given."""
    tree = store.tree
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
    return ForkResult(seed(store, target, session_id), selected)


def seed(store: StoreView, leaf_id: str | None, session_id: str | None = None) -> SessionSeed:
    """pi's ``createBranchedSession(leaf_id)`` as a new session beside this one
    (``None``: an empty session), with ``parentSession`` = this file (and the id
    ``session_id`` if given)."""
    header = new_header(
        store.header.cwd, session_id=session_id, parent_session=_parent_ref(store.path)
    )
    entries = () if leaf_id is None else tuple(store.tree.branched_entries(leaf_id))
    path = None
    if store.path is not None:
        path = store.path.parent / session_file_name(header.timestamp, header.id)
    return SessionSeed(header=header, entries=entries, path=path)


def _parent_ref(path: Path | None) -> str | None:
    return None if path is None else str(path)
