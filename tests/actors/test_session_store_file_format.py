"""Reading session files line by line (pitrio/actors/session_store/file_format.py).

Spec pi-behavior §4.2-§4.6 and §4.10; scenarios S131-S136 (what pi does with bad files; pitrio
reports instead of skipping silently), and the crash-safety rules of issue 3.
"""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.file_check import check_session_bytes
from pitrio.actors.session_store.file_format import (
    ParsedSession,
    parse_lines,
    parse_session_bytes,
)
from pitrio.errors import SessionFileError

HEADER = (
    b'{"type":"session","version":3,"id":"s-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/p"}'
)


def entry(entry_id: str, parent: str | None, text: str = "hi", **extra: Any) -> bytes:
    value: dict[str, Any] = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": text, "timestamp": 1},
    }
    value.update(extra)
    return orjson.dumps(value)


def file_of(*lines: bytes, end: bytes = b"\n") -> bytes:
    return b"\n".join(lines) + end


def parse(data: bytes) -> ParsedSession:
    return parse_session_bytes(data, origin="f.jsonl")


def kinds(parsed: ParsedSession) -> list[tuple[int, str, str]]:
    return [(p.line, p.kind, p.severity) for p in parsed.problems]


def test_a_clean_file() -> None:
    parsed = parse(file_of(HEADER, entry("a", None), entry("b", "a")))
    assert parsed.header is not None and parsed.header.id == "s-1"
    assert [(e.id, e.parent_id, e.line, e.role) for e in parsed.entries] == [
        ("a", None, 2, "user"),
        ("b", "a", 3, "user"),
    ]
    assert parsed.problems == [] and parsed.ends_clean and not parsed.migrated
    parsed.raise_for_errors()


def test_long_sessions_share_repeated_strings() -> None:
    # Memory of a resumed long session (issue 7): a parentId is its parent's id object, and
    # the names every assistant message repeats are one string each once decoded.
    def reply(entry_id: str, parent: str) -> bytes:
        message = {"role": "assistant", "content": [], "api": "openai-completions"}
        message.update(provider="mock", model="mock-model", stopReason="stop", timestamp=2)
        message["usage"] = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0}
        message["usage"]["cost"] = {"input": 0, "output": 0, "total": 0}
        return entry(entry_id, parent, message=message)

    lines = (entry("a", None), reply("b", "a"), reply("c", "b"))
    for parsed in (
        parse(file_of(HEADER, *lines)),
        parse_lines(io.BytesIO(file_of(HEADER, *lines)), origin="f"),
    ):
        a, b, c = parsed.entries
        assert b.parent_id is a.id and c.parent_id is b.id
        first, second = b.message(), c.message()
        for name in ("api", "provider", "model"):
            assert getattr(first, name) is getattr(second, name)
        assert first.usage.cost.input is second.usage.cost.output  # one shared zero


def test_raw_lines_are_kept_byte_for_byte() -> None:
    odd = (
        b'{"parentId":null,"type":"message","id":"a","timestamp":"t",'
        b'"message":{"role":"user","content":"x","timestamp":1},"zz":1}'
    )
    parsed = parse(file_of(HEADER, odd))
    assert parsed.entries[0].raw == odd


def test_streaming_and_in_memory_parsing_agree() -> None:
    data = file_of(
        HEADER, entry("a", None), b"", b"garbage", entry("b", "a"), b'{"type":"mess', end=b""
    )
    streamed = parse_lines(io.BytesIO(data), origin="f.jsonl")
    whole = parse(data)
    assert kinds(streamed) == kinds(whole)
    assert [e.id for e in streamed.entries] == [e.id for e in whole.entries] == ["a", "b"]
    assert streamed.ends_clean == whole.ends_clean is False


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1 << 20])
def test_blocks_of_any_size_parse_as_the_whole(size: int) -> None:
    # A file is read in blocks (issue 38: no copy of each line without its newline): a line
    # cut between blocks, a block of newlines only, a torn last line are the same lines.
    data = file_of(
        HEADER, entry("a", None), b"", b"garbage", entry("b", "a"), b"  ", entry("c", "zz")
    )
    data += b'{"type":"mess'
    blocks = [data[i : i + size] for i in range(0, len(data), size)]
    parsed = parse_lines(iter(blocks), origin="f.jsonl")
    whole = parse(data)
    assert (
        kinds(parsed)
        == kinds(whole)
        == [(4, "malformed", "error"), (7, "missing_parent", "warning"), (8, "torn", "warning")]
    )
    assert [(e.id, e.line, e.raw) for e in parsed.entries] == [
        (e.id, e.line, e.raw) for e in whole.entries
    ]
    assert parsed.torn == whole.torn == [b'{"type":"mess']


def test_a_line_only_the_fallback_reads_notes_its_missing_parent_in_blocks_too() -> None:
    # orjson refuses a lone surrogate; the line is read by the standard library's parser. Its
    # parent is missing: read in blocks (as a session file is) the warning was lost, because
    # the block loop wrote back its own note that every parent so far came first.
    odd = entry("b", "zzz", text="SURROGATE").replace(b"SURROGATE", b"\\ud800")
    data = file_of(HEADER, entry("a", None), odd)
    expected = [(3, "missing_parent", "warning")]
    assert kinds(parse_lines(io.BytesIO(data), origin="f")) == kinds(parse(data)) == expected


def test_blank_lines_are_skipped_silently() -> None:
    parsed = parse(file_of(HEADER, b"", entry("a", None), b"   ", entry("b", "a")))
    assert [e.line for e in parsed.entries] == [3, 5]
    assert parsed.problems == []


def test_torn_last_line_is_a_warning_excluded_from_the_tree() -> None:
    # S136's garbage line, but at the end and cut short: a writer killed mid-write.
    torn = entry("b", "a")[:40]
    parsed = parse(file_of(HEADER, entry("a", None), torn, end=b""))
    assert [e.id for e in parsed.entries] == ["a"]
    assert kinds(parsed) == [(3, "torn", "warning")]
    assert not parsed.ends_clean
    assert parsed.torn == [torn]
    parsed.raise_for_errors()  # a warning does not stop a strict open


def test_torn_line_cut_inside_a_utf8_character() -> None:
    line = entry("b", "a", text="snowman \u2603 here")
    cut = line[: line.index("\u2603".encode()) + 1]
    parsed = parse(file_of(HEADER, entry("a", None), cut, entry("c", "a")))
    assert kinds(parsed) == [(3, "torn", "warning")]
    assert [e.id for e in parsed.entries] == ["a", "c"]


def test_torn_line_followed_by_later_appends_stays_a_warning() -> None:
    # After a torn tail the next append starts on a fresh line: the fragment is now in the
    # middle, still an incomplete prefix of JSON.
    parsed = parse(file_of(HEADER, entry("a", None), entry("b", "a")[:50], entry("c", "a")))
    assert kinds(parsed) == [(3, "torn", "warning")]
    assert [e.id for e in parsed.entries] == ["a", "c"]


def test_torn_line_with_text_beyond_ascii_followed_by_appends_stays_a_warning() -> None:
    # The cut falls after whole non-ASCII characters: the parser's refusal counts characters,
    # the line's length bytes, and a torn prefix must still be told from a malformed line.
    line = entry("b", "a", text="snowman \u2603 and caf\u00e9 here")
    cut = line[: line.index(b"here")]
    parsed = parse(file_of(HEADER, entry("a", None), cut, entry("c", "a")))
    assert kinds(parsed) == [(3, "torn", "warning")]
    assert [e.id for e in parsed.entries] == ["a", "c"]


def test_complete_last_line_without_newline_is_kept() -> None:
    parsed = parse(file_of(HEADER, entry("a", None), end=b""))
    assert [e.id for e in parsed.entries] == ["a"]
    assert kinds(parsed) == [(2, "no_newline", "warning")]
    assert not parsed.ends_clean


def test_malformed_middle_line_is_an_error_naming_file_and_line() -> None:
    parsed = parse(file_of(HEADER, entry("a", None), b"this is not json", entry("b", "a")))
    assert kinds(parsed) == [(3, "malformed", "error")]
    assert [e.id for e in parsed.entries] == ["a", "b"]
    with pytest.raises(SessionFileError, match=r"^f\.jsonl:3: malformed JSON") as caught:
        parsed.raise_for_errors()
    assert caught.value.line == 3 and caught.value.path == "f.jsonl"


def test_every_error_is_listed_not_only_the_first() -> None:
    parsed = parse(file_of(HEADER, b"[1,2]", b"{bad", entry("a", None) + b"}", b"42"))
    assert kinds(parsed) == [
        (2, "malformed", "error"),
        (3, "malformed", "error"),  # terminated, not a truncation: '{bad' is not JSON so far
        (4, "malformed", "error"),
        (5, "malformed", "error"),
    ]
    with pytest.raises(SessionFileError, match=r"and 3 more problems"):
        parsed.raise_for_errors()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"type":"message","parentId":null,"timestamp":"t","message":{"role":"user"}}',
            "without a string id",
        ),
        (
            b'{"type":"label","id":"x","parentId":5,"timestamp":"t","targetId":"a"}',
            "parentId must be",
        ),
        (b'{"type":"label","id":"x","parentId":null,"targetId":"a"}', "no string timestamp"),
        (b'{"id":"x","parentId":null,"timestamp":"t"}', "no string type"),
        (b'{"type":"session","id":"again","timestamp":"t","cwd":"/"}', "a second session header"),
    ],
)
def test_entries_without_a_usable_envelope_are_errors(line: bytes, message: str) -> None:
    parsed = parse(file_of(HEADER, line))
    assert [p.kind for p in parsed.problems] == ["malformed"]
    assert message in parsed.problems[0].message
    assert parsed.entries == []


def test_duplicate_ids_are_errors_and_the_first_one_stays() -> None:
    parsed = parse(file_of(HEADER, entry("a", None, "one"), entry("a", None, "two")))
    assert kinds(parsed) == [(3, "duplicate_id", "error")]
    assert [e.line for e in parsed.entries] == [2]


def test_non_message_entries_are_decoded_at_once_and_checked() -> None:
    bad_label = b'{"type":"label","id":"l","parentId":"a","timestamp":"t","targetId":7}'
    parsed = parse(file_of(HEADER, entry("a", None), bad_label))
    assert kinds(parsed) == [(3, "undecodable", "error")]
    assert "targetId" in parsed.problems[0].message


def test_message_entries_decode_lazily_but_check_decodes_them() -> None:
    bad = entry("a", None, message={"role": "user", "content": 5, "timestamp": 1})
    parsed = parse(file_of(HEADER, bad))
    assert parsed.problems == [] and not parsed.entries[0].decoded
    with pytest.raises(SessionFileError, match=r"^f\.jsonl:2: entry a does not decode"):
        parsed.entries[0].message()
    problems = check_session_bytes(file_of(HEADER, bad), origin="f.jsonl")
    assert [(p.line, p.kind) for p in problems] == [(2, "undecodable")]


def test_unknown_entry_types_are_kept() -> None:
    future = b'{"type":"future","id":"f","parentId":"a","timestamp":"t","what":{"x":1}}'
    parsed = parse(file_of(HEADER, entry("a", None), future))
    assert parsed.problems == []
    stored = parsed.entries[1]
    assert stored.type == "future" and stored.raw == future
    unknown = stored.entry()
    assert unknown.type == "future" and unknown.data["what"] == {"x": 1}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "first",
    [
        b"not json at all",
        entry("a", None),
        b'{"type":"session","timestamp":"t","cwd":"/"}',
        b'{"type":"session","id":"x","timestamp":5,"cwd":"/"}',
    ],
)
def test_a_file_must_start_with_a_valid_header(first: bytes) -> None:
    # pi treats such files as empty (S133, S134) and later overwrites them; pitrio refuses.
    parsed = parse(file_of(first, entry("b", None)))
    assert parsed.header is None
    assert any(p.kind == "no_header" and p.severity == "error" for p in parsed.problems)
    with pytest.raises(SessionFileError):
        parsed.raise_for_errors()


def test_empty_file() -> None:
    parsed = parse(b"")
    assert parsed.empty and parsed.header is None and parsed.problems == []
    assert [(p.line, p.kind) for p in check_session_bytes(b"\n\n", origin="f")] == [
        (0, "no_header")
    ]


def test_missing_parent_and_missing_targets_are_warnings() -> None:
    label = b'{"type":"label","id":"l","parentId":"a","timestamp":"t","targetId":"zz","label":"x"}'
    edit = (
        b'{"type":"context_edit","id":"e","parentId":"l","timestamp":"t",'
        b'"targetId":"yy","replacement":null}'
    )
    parsed = parse(file_of(HEADER, entry("a", "gone"), label, edit))
    assert kinds(parsed) == [
        (2, "missing_parent", "warning"),
        (3, "missing_target", "warning"),
        (4, "missing_target", "warning"),
    ]
    assert "context edit e refers to missing target yy" in parsed.problems[2].message


def test_newer_version_is_read_with_a_warning() -> None:
    header = HEADER.replace(b'"version":3', b'"version":4')
    parsed = parse(file_of(header, entry("a", None)))
    assert kinds(parsed) == [(1, "newer_version", "warning")]
    assert [e.id for e in parsed.entries] == ["a"]


def test_version_2_files_migrate_and_keep_unchanged_lines_bytes() -> None:
    header = HEADER.replace(b'"version":3', b'"version":2')
    hook = orjson.dumps(
        {
            "type": "message",
            "id": "h",
            "parentId": "a",
            "timestamp": "t",
            "message": {
                "role": "hookMessage",
                "customType": "x",
                "content": "c",
                "display": True,
                "timestamp": 1,
            },
        }
    )
    parsed = parse(file_of(header, entry("a", None), hook))
    assert parsed.migrated and parsed.problems == []
    assert parsed.header is not None and parsed.header.version == 3
    assert parsed.entries[0].raw == entry("a", None)
    assert orjson.loads(parsed.entries[1].raw)["message"]["role"] == "custom"
    assert parsed.entries[1].role == "custom"


def test_version_1_files_get_ids_and_a_chain() -> None:
    header = b'{"type":"session","id":"s","timestamp":"t","cwd":"/"}'
    lines = [
        b'{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}',
        b"garbage in a v1 file",
        b'{"type":"compaction","timestamp":"t","summary":"s","firstKeptEntryIndex":1,"tokensBefore":1}',
    ]
    parsed = parse(file_of(header, *lines))
    assert parsed.migrated
    assert kinds(parsed) == [(3, "malformed", "error")]
    first, compaction = parsed.entries
    assert first.parent_id is None and compaction.parent_id == first.id
    assert orjson.loads(compaction.raw)["firstKeptEntryId"] == first.id
    assert [e.line for e in parsed.entries] == [2, 4]


def test_the_parsers_inlined_message_entry_is_the_one_read_makes() -> None:
    # The block parser builds pi's usual message line without calling TailMessageEntry.read
    # (48,000 calls on a long resume): every slot must be set as read() sets it, so a slot
    # added there and not here fails this.
    from pitrio.actors.session_store.stored import TailMessageEntry

    data = file_of(HEADER, entry("a", None), entry("b", "a"))
    parsed = parse_lines(iter([data]), origin="f.jsonl")
    slots = {name for cls in TailMessageEntry.__mro__ for name in getattr(cls, "__slots__", ())}
    missing = object()
    for line, stored in enumerate(parsed.entries, start=2):
        assert type(stored) is TailMessageEntry
        made = TailMessageEntry.read(
            "message",
            stored.id,
            stored.parent_id,
            stored.timestamp,
            stored.raw,
            "user",
            line,
            "f.jsonl",
        )
        for name in sorted(slots - {"__weakref__"}):
            assert getattr(stored, name, missing) == getattr(made, name, missing), name
