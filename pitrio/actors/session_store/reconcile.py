"""Another writer's lines, taken into a running file store, or refused (issue 36, item 3).

The store's side of :mod:`.foreign`: given what the file holds beyond the store's mark (a
:class:`~.storage.FileChanged` from the writer's check), judge it and, when it can be merged,
make the tree that takes the other writer's entries in (the store's queued entries follow
them; their replies carry the new parent). The actor applies the result on its own task,
between the writer's awaits, so no append interleaves with it.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pitrio.actors.session_store.commands import _Pending
from pitrio.actors.session_store.foreign import Conflict, Unchanged, judge, merge
from pitrio.actors.session_store.storage import AppendFile, FileChanged
from pitrio.actors.session_store.tree import SessionTree
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.events import EntriesMerged


@attrs.frozen
class TakenIn:
    """The tree once the other writer's entries are in, and the event that says so."""

    tree: SessionTree
    event: EntriesMerged


def take_in(
    path: Path, file: AppendFile, changed: FileChanged, tree: SessionTree, queued: list[_Pending]
) -> Unchanged | Conflict | TakenIn:
    """Judge the file's change; on a merge, re-parent the queued items that must follow the
    other writer's entries (in place: they are about to be written) and build the new tree.
    ``queued`` are the items not written yet (the batch, then those still pending)."""
    unwritten = [item for item in queued if item.stored is not None]
    entries = tree.entries
    written = entries[: len(entries) - len(unwritten)]
    # The tree is the file's entries, then the queued ones in order (appends add to both).
    if any(a is not b.stored for a, b in zip(entries[len(written) :], unwritten, strict=True)):
        raise AssertionError(f"{path}: the tree and the write queue disagree")
    decision = judge(
        file.mark,
        changed.size,
        changed.mtime_ns,
        changed.data,
        known={stored.id for stored in written},
        taken=(stored.id for stored in entries),
        origin=str(path),
        line=len(written) + 1,
    )
    if isinstance(decision, Unchanged | Conflict):
        return decision
    merged = merge(
        written, decision, [item.stored for item in unwritten if item.stored], tree.leaf_id
    )
    for item in unwritten:
        assert item.stored is not None
        moved = merged.rebased.get(item.stored.id)
        if moved is not None:
            item.stored = moved
            item.result = attrs.evolve(item.result, parent_id=moved.parent_id)
    new_tree = SessionTree(tree.header, merged.entries, new_id=tree.new_id)
    if merged.leaf_id is None:
        new_tree.reset_leaf()
    else:
        new_tree.branch(merged.leaf_id)
    file.mark = decision.mark
    ids = tuple(stored.id for stored in decision.entries)
    event = EntriesMerged(
        path=str(path),
        entry_ids=ids,
        leaf_id=new_tree.leaf_id,
        message=(
            f"{path}: another writer appended {len(ids)} "
            f"entr{'y' if len(ids) == 1 else 'ies'}; the session continues from "
            f"entry {new_tree.leaf_id}"
        ),
    )
    return TakenIn(new_tree, event)


def conflict_failure(path: Path | None, conflict: Conflict) -> ReadOnlySessionError:
    """The error of a store that another writer's change turned read-only."""
    return ReadOnlySessionError(
        f"{path}: another writer (pi, or another program writing without "
        f"pitrio's lock) changed the session file: {conflict.detail}. The session is "
        "read-only from now on; nothing more is written to the file, and every "
        "line in it, this session's and the other writer's, stays as it is."
    )
