"""What a stored entry keeps in memory: its line at its own size (a live session holds every
entry of its file, so slack per line multiplies by the session's length)."""

from __future__ import annotations

import tracemalloc

import orjson

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.messages.agent import user_message
from pitrio.messages.codec import compact
from pitrio.messages.entries import MessageEntry

COUNT = 200


def traced_bytes(make: object) -> int:
    """Bytes still allocated after ``make()`` returned what it built (kept alive meanwhile)."""
    assert callable(make)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = make()
        after = tracemalloc.get_traced_memory()[0]
        del kept
    finally:
        tracemalloc.stop()
    return after - before


def test_compact_is_an_equal_copy() -> None:
    raw = orjson.dumps({"type": "message", "id": "a1"})
    copied = compact(raw)
    assert copied == raw
    assert copied is not raw
    assert type(copied) is bytes


def test_compact_lines_hold_about_their_length() -> None:
    lines = [orjson.dumps({"n": index, "text": "x" * 100}) for index in range(COUNT)]
    length = sum(len(line) for line in lines)
    held = traced_bytes(lambda: [compact(line) for line in lines])
    # The list and the object headers on top of the text: far below orjson's 4 KB buffers.
    assert held < 2 * length + 100 * COUNT


def test_an_appended_entry_holds_its_line_at_its_size() -> None:
    def entries() -> list[StoredEntry]:
        return [
            StoredEntry.from_entry(
                MessageEntry(
                    id=f"e{index}",
                    parent_id=None,
                    timestamp="2026-01-01T00:00:00.000Z",
                    message=user_message(f"hello {index}", timestamp=1),
                )
            )
            for index in range(COUNT)
        ]

    built = entries()
    assert all(entry.raw == orjson.dumps(orjson.loads(entry.raw)) for entry in built)
    held = traced_bytes(entries)
    # Before the copy each line sat in a 4 KB buffer: COUNT of them alone were 800 KB.
    assert held < 1500 * COUNT


def _pi_lines(count: int) -> bytes:
    """A session file of ``count`` message lines as pi writes them (envelope, then message)."""
    lines = [b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}']
    parent = None
    for index in range(count):
        entry_id = f"{index:08x}"
        lines.append(
            orjson.dumps(
                {
                    "type": "message",
                    "id": entry_id,
                    "parentId": parent,
                    "timestamp": f"2026-01-01T00:{index // 60 % 60:02d}:{index % 60:02d}.000Z",
                    "message": {"role": "user", "content": "hi", "timestamp": index},
                }
            )
        )
        parent = entry_id
    return b"\n".join([*lines, b""])


def test_a_read_message_entry_holds_little_beside_its_line() -> None:
    # A resumed 20,000-turn session holds 48,000 entries (issue 38): beside its line, an entry
    # read from a file keeps its id, its line number and its slots; its timestamp is read
    # from the line when asked (the strings were 65 bytes an entry).
    data = _pi_lines(COUNT * 5)
    lines = data.split(b"\n")[1:-1]
    parsed = parse_session_bytes(data, origin="f.jsonl")
    assert [entry.timestamp for entry in parsed.entries] == [
        orjson.loads(line)["timestamp"] for line in lines
    ]
    held = traced_bytes(lambda: parse_session_bytes(data, origin="f.jsonl").entries)
    beside = (held - sum(len(line) for line in lines)) / len(lines)
    assert beside < 320, beside  # 291 here; 364 with the timestamps kept


def test_a_read_entrys_timestamp_follows_its_copies() -> None:
    parsed = parse_session_bytes(_pi_lines(2), origin="f.jsonl")
    first, second = parsed.entries
    assert (first.timestamp, second.timestamp) == (
        "2026-01-01T00:00:00.000Z",
        "2026-01-01T00:00:01.000Z",
    )
    moved = second.reparented(None)
    assert moved.timestamp == second.timestamp and moved.parent_id is None
    assert b'"parentId":null' in moved.raw
