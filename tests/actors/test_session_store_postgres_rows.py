"""The PostgreSQL store's listing of a session's lines (pure: no database needed)."""

from __future__ import annotations

from pitrio.actors.session_store.postgres.rows import ListingDelta
from pitrio.actors.session_store.stored import StoredEntry


def test_a_lone_surrogate_in_a_line_gives_a_listing_a_text_column_can_hold() -> None:
    """A session line may carry a lone surrogate (``"\\ud83d"``, half an emoji, as pi writes
    it). The listing's name and first message read it (orjson alone refuses the line) and
    hold U+FFFD instead, since PostgreSQL text cannot hold a lone surrogate (issue 21)."""
    name = (
        b'{"type":"session_info","id":"i1","parentId":null,'
        b'"timestamp":"2026-01-01T00:00:00.000Z","name":"half \\ud83d"}'
    )
    prompt = (
        b'{"type":"message","id":"m1","parentId":"i1","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":[{"type":"text","text":"cut \\udc00 here"}],'
        b'"timestamp":1767225601000}}'
    )
    stored = [
        StoredEntry(type="session_info", id="i1", parent_id=None, timestamp="2026-01-01", raw=name),
        StoredEntry(
            type="message",
            id="m1",
            parent_id="i1",
            timestamp="2026-01-01",
            raw=prompt,
            role="user",
        ),
    ]
    delta = ListingDelta.of(stored)
    assert delta.name == "half \ufffd"
    assert delta.first_message == "cut \ufffd here"
    assert delta.messages == 1 and delta.name_set
    for text in (delta.name, delta.first_message):
        assert text is not None
        text.encode("utf-8")  # what psycopg must do with it


def test_a_line_with_a_lone_surrogate_is_reparented_with_it_escaped() -> None:
    """Moving a line under another parent (repair, migration) re-encodes it: the surrogate is
    written back as it was read (orjson alone refuses to encode it)."""
    raw = (
        b'{"type":"message","id":"m1","parentId":"p0","timestamp":"2026-01-01T00:00:01.000Z",'
        b'"message":{"role":"user","content":[{"type":"text","text":"cut \\udc00 here"}],'
        b'"timestamp":1767225601000}}'
    )
    stored = StoredEntry(
        type="message", id="m1", parent_id="p0", timestamp="2026-01-01", raw=raw, role="user"
    )
    moved = stored.reparented("p1")
    assert moved.raw == raw.replace(b'"parentId":"p0"', b'"parentId":"p1"')
