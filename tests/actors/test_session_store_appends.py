"""An append's pure decisions (pitrio/actors/session_store/appends.py): the entry a draft
becomes, whether it needs the file, the refusals' texts."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pitrio.actors.session_store.appends import (
    appended_entry,
    needs_file,
    stale_fence,
    write_failure,
)
from pitrio.actors.session_store.projection import Projection
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.tree import SessionTree
from pitrio.errors import EntryNotFoundError
from pitrio.messages.agent import (
    AgentMessage,
    SystemCheckpoint,
    SystemMessage,
    ToolDeclaration,
    user_message,
)
from pitrio.messages.entries import (
    CompactionEntry,
    LabelEntry,
    MessageEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
)
from tests.actors.test_session_store_actor import assistant

HEADER = SessionHeader(version=3, id="s", timestamp="2026-01-01T00:00:00.000Z", cwd="/p")
NOW = "2026-01-01T00:01:00.000Z"
NOW_MS = 1767225660000


class Store:
    """A tree and its projection, appended to as the actor does."""

    def __init__(self) -> None:
        numbers = itertools.count(1)
        self.tree = SessionTree(HEADER, new_id=lambda taken: f"e{next(numbers)}")
        self.projection = Projection()

    def append(self, draft: SessionEntry) -> SessionEntry:
        entry = appended_entry(draft, self.tree, self.projection, NOW)
        stored = StoredEntry.from_entry(entry)
        self.tree.add(stored)
        self.projection.append(stored)
        return entry

    def message(self, message: AgentMessage) -> SessionEntry:
        return self.append(MessageEntry(id="", parent_id=None, timestamp="", message=message))


def compaction(system: SystemCheckpoint | None = None) -> CompactionEntry:
    return CompactionEntry(
        id="",
        parent_id=None,
        timestamp="",
        summary="sum",
        first_kept_entry_id="e1",
        tokens_before=10,
        system_message=system,
    )


def test_a_draft_gets_a_fresh_id_the_leaf_as_parent_and_the_time_given() -> None:
    store = Store()
    first = store.message(user_message("u", timestamp=1))
    second = store.message(assistant())
    assert (first.id, first.parent_id, first.timestamp) == ("e1", None, NOW)
    assert (second.id, second.parent_id) == ("e2", "e1")


def test_a_session_name_is_trimmed() -> None:
    entry = Store().append(SessionInfoEntry(id="", parent_id=None, timestamp="", name="  n  "))
    assert isinstance(entry, SessionInfoEntry) and entry.name == "n"


def test_a_label_needs_its_target() -> None:
    store = Store()
    target = store.message(user_message("u", timestamp=1)).id
    label = LabelEntry(id="", parent_id=None, timestamp="", target_id="missing", label="x")
    with pytest.raises(EntryNotFoundError):
        store.append(label)
    assert len(store.tree) == 1  # refused before an id was drawn: the next one is e2
    kept = store.append(
        LabelEntry(id="", parent_id=None, timestamp="", target_id=target, label="x")
    )
    assert isinstance(kept, LabelEntry) and (kept.id, kept.parent_id) == ("e2", target)


def test_a_compaction_gets_the_system_message_in_force() -> None:
    store = Store()
    read = ToolDeclaration(name="read", description="read", parameters={})
    store.message(SystemMessage(sections={"preamble": "P"}, timestamp=5, tools_added=(read,)))
    store.message(user_message("u", timestamp=1))
    entry = store.append(compaction())
    assert isinstance(entry, CompactionEntry) and entry.system_message is not None
    assert entry.system_message.sections == {"preamble": "P"}
    assert entry.system_message.timestamp == NOW_MS  # the compaction's own time
    # One it already has is kept; a context without system messages gives none.
    again = store.append(compaction(entry.system_message))
    assert isinstance(again, CompactionEntry) and again.system_message is entry.system_message
    plain = Store()
    plain.message(user_message("u", timestamp=1))
    none = plain.append(compaction())
    assert isinstance(none, CompactionEntry) and none.system_message is None


@pytest.mark.parametrize(
    ("message", "lazy", "expected"),
    [
        (user_message("u", timestamp=1), False, True),
        (user_message("u", timestamp=1), True, False),  # a lazy append waits in memory
        (SystemMessage(sections={"preamble": "P"}, timestamp=5), False, False),
        (assistant(), True, True),  # an assistant message always wants the file
    ],
)
def test_which_appends_need_the_file(message: AgentMessage, lazy: bool, expected: bool) -> None:
    stored = StoredEntry.from_entry(
        MessageEntry(id="e1", parent_id=None, timestamp=NOW, message=message)
    )
    assert needs_file(stored, lazy=lazy) is expected


def test_the_refusals_name_the_file_and_the_cause() -> None:
    path = Path("/sessions/s.jsonl")
    assert str(stale_fence(path, 3, 4)) == (
        "/sessions/s.jsonl: append with lease 3 refused, the lease is 4"
    )
    cause = OSError(28, "No space left on device")
    failure = write_failure(path, cause)
    assert failure.__cause__ is cause
    assert str(failure).startswith(
        "/sessions/s.jsonl: writing the session failed: [Errno 28] No space left on device."
    )
    assert "read-only from now on" in str(failure)
