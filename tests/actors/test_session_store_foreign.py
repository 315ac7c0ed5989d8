"""Another writer's changes to a session file, judged (pitrio/actors/session_store/foreign.py).

The pure decision: what the file holds beyond the store's mark is merged, or refused with what
was found (issue 36, item 3). The store's I/O is tested in ``test_session_store_foreign_io``.
"""

from __future__ import annotations

import orjson
import pytest

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.foreign import (
    SUFFIX_BYTES,
    Conflict,
    FileMark,
    Grew,
    Unchanged,
    judge,
    mark_of,
    merge,
)
from pitrio.actors.session_store.stored import StoredEntry

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s1",
    "timestamp": "2026-01-01T00:00:00Z",
    "cwd": "/p",
}


def line(entry_id: str, parent: str | None, text: str = "hi", role: str = "user") -> bytes:
    message = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    value = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": message,
    }
    return orjson.dumps(value) + b"\n"


FILE = orjson.dumps(HEADER) + b"\n" + line("a1", None) + line("a2", "a1", role="user")
KNOWN = {"a1", "a2"}


def decide(now: bytes, *, mtime: int = 2, mark: FileMark | None = None, taken=KNOWN) -> object:
    mark = mark or mark_of(FILE, size=len(FILE), mtime_ns=1)
    data = now[mark.read_from :]
    return judge(mark, len(now), mtime, data, known=KNOWN, taken=taken, origin="f.jsonl", line=3)


def test_a_mark_keeps_the_end_of_what_was_written() -> None:
    mark = mark_of(FILE, size=len(FILE), mtime_ns=1)
    assert mark.suffix == FILE[-SUFFIX_BYTES:] and mark.read_from == len(FILE) - len(mark.suffix)
    assert mark.unchanged(len(FILE), 1) and not mark.unchanged(len(FILE), 2)
    assert not mark.unchanged(len(FILE) + 1, 1)
    after = mark.after(b"x\n", 5)
    assert (after.size, after.mtime_ns, after.suffix[-2:]) == (len(FILE) + 2, 5, b"x\n")


def test_a_touched_file_with_the_same_bytes_is_unchanged() -> None:
    assert decide(FILE, mtime=9) == Unchanged(9)


def test_whole_valid_entries_of_the_session_are_taken_in_with_the_new_mark() -> None:
    grown = FILE + line("f1", "a2", "from pi") + b"\n" + line("f2", "f1", role="user")
    decision = decide(grown)
    assert isinstance(decision, Grew)
    assert [(e.id, e.parent_id) for e in decision.entries] == [("f1", "a2"), ("f2", "f1")]
    assert decision.leaf_id == "f2"
    assert decision.mark == FileMark(len(grown), 2, grown[-SUFFIX_BYTES:])
    assert decision.entries[0].raw == line("f1", "a2", "from pi")[:-1]  # the bytes kept


def test_a_branch_from_an_older_entry_is_taken_in_too() -> None:
    decision = decide(FILE + line("f1", "a1"))
    assert isinstance(decision, Grew) and decision.entries[0].parent_id == "a1"


@pytest.mark.parametrize(
    ("now", "kind", "words"),
    [
        (FILE[:-10], "truncated", "cut from"),
        (FILE.replace(b'"hi"', b'"HI"') + line("f1", "a2"), "rewritten", "rewritten"),
        (FILE.replace(b'"hi"', b'"HI"'), "rewritten", "rewritten"),
        (FILE + line("f1", "a2")[:-1], "unterminated", "unterminated"),
        (FILE + orjson.dumps({**HEADER, "id": "other"}) + b"\n", "header", "session header"),
        (FILE + line("a1", "a2"), "duplicate_id", "duplicate entry id a1"),
        (FILE + line("f1", "nowhere"), "no_parent", "parent nowhere does not exist"),
        (FILE + b"not json\n", "malformed", "malformed JSON"),
        (FILE + b"[1, 2]\n", "malformed", "not a JSON object"),
        (FILE + line("f1", "a2", role="assistant"), "malformed", "does not decode"),
    ],
)
def test_what_cannot_be_merged_is_a_conflict_naming_what_was_found(
    now: bytes, kind: str, words: str
) -> None:
    decision = decide(now)
    assert isinstance(decision, Conflict), decision
    assert decision.kind == kind
    assert words in decision.detail


def test_an_id_the_store_has_not_written_yet_is_not_reused() -> None:
    decision = decide(FILE + line("q1", "a2"), taken={*KNOWN, "q1"})
    assert isinstance(decision, Conflict) and decision.kind == "duplicate_id"


def test_a_parent_the_file_does_not_hold_yet_does_not_exist() -> None:
    # q1 is queued in this store but not written: another writer cannot have seen it.
    decision = decide(FILE + line("f1", "q1"), taken={*KNOWN, "q1"})
    assert isinstance(decision, Conflict) and decision.kind == "no_parent"


def stored(data: bytes) -> list[StoredEntry]:
    return parse_session_bytes(orjson.dumps(HEADER) + b"\n" + data, origin="f").entries


def test_merge_puts_the_queued_entries_after_the_other_writers_and_reparents_the_first() -> None:
    written = stored(line("a1", None) + line("a2", "a1"))
    grew = decide(FILE + line("f1", "a2") + line("f2", "f1"))
    assert isinstance(grew, Grew)
    queued = stored(line("a1", None) + line("a2", "a1") + line("q1", "a2") + line("q2", "q1"))[2:]
    merged = merge(written, grew, queued, "q2")
    assert [(e.id, e.parent_id) for e in merged.entries] == [
        ("a1", None),
        ("a2", "a1"),
        ("f1", "a2"),
        ("f2", "f1"),
        ("q1", "f2"),
        ("q2", "q1"),
    ]
    assert set(merged.rebased) == {"q1"}
    assert orjson.loads(merged.rebased["q1"].raw)["parentId"] == "f2"
    assert merged.leaf_id == "q2"


def test_merge_moves_a_leaf_at_the_files_end_and_keeps_one_put_elsewhere() -> None:
    written = stored(line("a1", None) + line("a2", "a1"))
    grew = decide(FILE + line("f1", "a2"))
    assert isinstance(grew, Grew)
    assert merge(written, grew, [], "a2").leaf_id == "f1"
    assert merge(written, grew, [], "a1").leaf_id == "a1"  # navigated to an older entry
    assert merge(written, grew, [], None).leaf_id is None  # a reset leaf
    branch = stored(line("a1", None) + line("b1", "a1"))[1:]
    kept = merge(written, grew, branch, "b1")
    assert kept.rebased == {} and kept.entries[-1].parent_id == "a1"
