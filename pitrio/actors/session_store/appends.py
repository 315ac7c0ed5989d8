"""An append's decisions that need no disk (pure): the entry a draft becomes, whether it needs
the file, and the errors of a store that refuses it.

The store actor calls these on its own task, in arrival order, with its tree and projection as
they are at that append; it applies the outcome (adds the entry, queues its line, turns
read-only). Nothing here awaits or writes.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pitrio.actors.session_store.projection import Projection, system_checkpoint
from pitrio.actors.session_store.stored import StoredEntry, iso_to_ms
from pitrio.actors.session_store.tree import SessionTree
from pitrio.errors import ReadOnlySessionError, StaleFenceError
from pitrio.messages.entries import (
    CompactionEntry,
    ContextEditEntry,
    LabelEntry,
    SessionEntry,
    SessionInfoEntry,
)


def appended_entry(
    draft: SessionEntry, tree: SessionTree, projection: Projection, timestamp: str
) -> SessionEntry:
    """The entry an append of ``draft`` stores at ``tree``'s leaf: a fresh id, the leaf as its
    parent, ``timestamp``. A label's or a context edit's target must exist (else
    :class:`~pitrio.errors.EntryNotFoundError`); a session name is trimmed; a compaction without
    a system message gets the one in force in ``projection``'s context."""
    if isinstance(draft, LabelEntry | ContextEditEntry):
        tree.require(draft.target_id)
    if isinstance(draft, SessionInfoEntry) and draft.name is not None:
        draft = attrs.evolve(draft, name=draft.name.strip())
    entry = attrs.evolve(draft, id=tree.next_id(), parent_id=tree.leaf_id, timestamp=timestamp)
    if isinstance(entry, CompactionEntry) and entry.system_message is None:
        # The prompt and tools in force, replayed from the context it compacts (pi 1.6.0).
        checkpoint = system_checkpoint(projection.context().messages, iso_to_ms(entry.timestamp))
        entry = attrs.evolve(entry, system_message=checkpoint)
    return entry


def needs_file(stored: StoredEntry, *, lazy: bool) -> bool:
    """Whether the append of ``stored`` returns only once the file holds it (from then on the
    store wants its file: lazy creation, see :mod:`.actor`)."""
    # A system message is written with the user message after it (pi 1.6.0 writes a new
    # session's file at its first user message).
    wants_file = not lazy and not (stored.type == "message" and stored.role == "system")
    return wants_file or stored.is_assistant_message


def stale_fence(path: Path | None, fence: int, held: int | None) -> StaleFenceError:
    """The refusal of an append made under lease ``fence`` when the store holds ``held``."""
    return StaleFenceError(f"{path}: append with lease {fence} refused, the lease is {held}")


def write_failure(path: Path | None, exc: OSError) -> ReadOnlySessionError:
    """Why a store whose write or fsync failed with ``exc`` is read-only (its cause)."""
    failure = ReadOnlySessionError(
        f"{path}: writing the session failed: {exc}. The session is read-only "
        "from now on; every entry saved before is in the file."
    )
    failure.__cause__ = exc
    return failure
