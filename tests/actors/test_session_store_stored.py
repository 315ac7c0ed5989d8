"""Stored entries (pitrio/actors/session_store/stored.py): the parser's positional constructor."""

from __future__ import annotations

import pytest

from pitrio.actors.session_store.stored import StoredEntry
from pitrio.errors import SessionFileError

FIELDS = ("type", "id", "parent_id", "timestamp", "raw", "role", "line", "origin")


def made_both_ways(
    raw: bytes, kind: str = "message", role: str | None = "user"
) -> list[StoredEntry]:
    args = (kind, "e1", "p0", "2026-01-01T00:00:01.000Z", raw, role, 7, "/s.jsonl")
    keywords = dict(zip(FIELDS, args, strict=True))
    return [StoredEntry.read(*args), StoredEntry(**keywords)]  # type: ignore[arg-type]


def test_read_sets_what_the_constructor_sets() -> None:
    raw = (
        b'{"type":"message","id":"e1","parentId":"p0","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":"hi","timestamp":1}}'
    )
    read, built = made_both_ways(raw)
    for name in FIELDS:
        assert getattr(read, name) == getattr(built, name)
    assert not read.decoded
    assert read.message() == built.message()
    assert read.entry() == built.entry()
    assert read.decoded


def test_read_entry_names_its_file_and_line_when_it_does_not_decode() -> None:
    raw = b'{"type":"message","id":"e1","parentId":"p0","timestamp":"t","message":{"role":"user"}}'
    for stored in made_both_ways(raw):
        with pytest.raises(SessionFileError) as caught:
            stored.message()
        assert (caught.value.path, caught.value.line) == ("/s.jsonl", 7)


def test_a_system_message_entry_keeps_its_line_as_shared_pieces() -> None:
    # Two sessions' first system messages: equal sections and tools, other times and ids.
    from pitrio.actors.session_store.stored import SharedLineEntry
    from pitrio.messages.codec import compact, encode_reusing
    from pitrio.messages.entries import MessageEntry
    from tests.messages.test_shared import system

    entries = [
        MessageEntry(id=f"e{index}", parent_id="p", timestamp=f"t{index}", message=system(index))
        for index in range(2)
    ]
    stored = [StoredEntry.from_entry(entry) for entry in entries]
    assert all(isinstance(item, SharedLineEntry) for item in stored)
    assert [item.raw for item in stored] == [compact(encode_reusing(e)) for e in entries]
    first, second = (item.pieces for item in stored)  # type: ignore[attr-defined]
    assert len(first) == len(second) == 5  # envelope, sections, time, tools, end
    assert first[1] is second[1] and first[3] is second[3]
    assert stored[0].json()["message"]["role"] == "system"
    assert stored[0].reparented("q").json()["parentId"] == "q"
