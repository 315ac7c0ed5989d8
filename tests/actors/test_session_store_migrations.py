"""Session-file migrations v1 -> v2 -> v3 (spec §4.10) against pi's own rewrites."""

from __future__ import annotations

import copy
import re
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.migrations import (
    migrate_to_current,
    migrate_v1_to_v2,
    migrate_v2_to_v3,
    session_version,
)
from pitrio.messages.codec import from_json
from pitrio.messages.entries import CompactionEntry, FileLine
from tests.shared_dir import SESSIONS

HEX8 = re.compile(r"[0-9a-f]{8}")


def read_lines(name: str) -> list[dict[str, Any]]:
    path = SESSIONS / name
    assert path.is_file(), f"fixture missing: {path}"
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def raw_lines(name: str) -> list[bytes]:
    return [line for line in (SESSIONS / name).read_bytes().splitlines() if line.strip()]


def counter_ids() -> Any:
    """A deterministic id factory that also checks it is told which ids are taken."""
    made: list[str] = []

    def new_id(taken: set[str]) -> str:
        assert set(made) <= taken
        made.append(f"{len(made):08x}")
        return made[-1]

    return new_id


# --- legacy_v1: ids are random, so compare structure ----------------------------------------


def test_v1_fixture_migrates_to_pis_structure() -> None:
    source = read_lines("legacy_v1.jsonl")
    expected = read_lines("legacy_v1.migrated.jsonl")
    migrated, changed = migrate_to_current(source)
    assert changed is True
    assert len(migrated) == len(expected) == len(source)

    # the header is deterministic: version appended at the end
    assert migrated[0] == expected[0]
    assert list(migrated[0]) == list(expected[0])
    assert list(migrated[0])[-1] == "version"

    ours = [line["id"] for line in migrated[1:]]
    theirs = [line["id"] for line in expected[1:]]
    assert all(HEX8.fullmatch(entry_id) for entry_id in ours)
    assert len(set(ours)) == len(ours)
    # a linear chain, in both
    for lines, ids in ((migrated, ours), (expected, theirs)):
        assert [line["parentId"] for line in lines[1:]] == [None, *ids[:-1]]

    # with our ids renamed to pi's (by position) every line is byte-identical to pi's rewrite
    rename = dict(zip(ours, theirs, strict=True))
    for ours_line, pi_line, pi_bytes in zip(
        migrated, expected, raw_lines("legacy_v1.migrated.jsonl"), strict=True
    ):
        assert list(ours_line) == list(pi_line)  # same keys, same order
        renamed = {
            key: rename.get(value, value)
            if key in ("id", "parentId", "firstKeptEntryId")
            else value
            for key, value in ours_line.items()
        }
        assert renamed == pi_line
        assert orjson.dumps(renamed) == pi_bytes


def test_v1_compaction_index_becomes_the_id_of_that_file_line() -> None:
    source = read_lines("legacy_v1.jsonl")
    (position,) = [i for i, line in enumerate(source) if line["type"] == "compaction"]
    index = source[position]["firstKeptEntryIndex"]
    assert index == 9  # per the fixtures README: the user message on line 10

    migrated, _ = migrate_to_current(source)
    compaction = migrated[position]
    assert "firstKeptEntryIndex" not in compaction
    assert compaction["firstKeptEntryId"] == migrated[index]["id"]
    assert list(compaction)[-3:] == ["id", "parentId", "firstKeptEntryId"]
    assert migrated[index]["message"]["content"] == "Summarize notes.txt."

    expected = read_lines("legacy_v1.migrated.jsonl")
    assert expected[position]["firstKeptEntryId"] == expected[index]["id"]


def test_v1_migration_result_decodes() -> None:
    migrated, _ = migrate_to_current(read_lines("legacy_v1.jsonl"))
    decoded = [from_json(line, FileLine) for line in migrated]
    compactions = [line for line in decoded if isinstance(line, CompactionEntry)]
    assert len(compactions) == 1
    assert all(not getattr(line, "extra", None) for line in decoded)


def test_v1_ids_are_fresh_each_time() -> None:
    source = read_lines("legacy_v1.jsonl")
    first, _ = migrate_to_current(source)
    second, _ = migrate_to_current(source)
    assert [line.get("id") for line in first[1:]] != [line.get("id") for line in second[1:]]


# --- legacy_v2: deterministic, must match exactly -------------------------------------------


def test_v2_fixture_migrates_exactly_like_pi() -> None:
    migrated, changed = migrate_to_current(read_lines("legacy_v2.jsonl"))
    assert changed is True
    assert migrated == read_lines("legacy_v2.migrated.jsonl")
    assert [orjson.dumps(line) for line in migrated] == raw_lines("legacy_v2.migrated.jsonl")


def test_v2_hook_message_is_renamed_in_place() -> None:
    source = read_lines("legacy_v2.jsonl")
    migrated = migrate_v2_to_v3(source)
    (position,) = [
        i for i, line in enumerate(source)
        if line["type"] == "message" and line["message"]["role"] == "hookMessage"
    ]  # fmt: skip
    assert migrated[position]["message"]["role"] == "custom"
    assert list(migrated[position]["message"]) == list(source[position]["message"])
    assert migrated[0]["version"] == 3
    assert list(migrated[0]) == list(source[0])  # version stays where it was


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in SESSIONS.glob("*.jsonl") if not p.name.startswith("legacy_v"))
    or ["<no session fixtures found>"],
)
def test_current_files_are_left_alone(name: str) -> None:
    source = read_lines(name)
    assert session_version(source[0]) == 3
    migrated, changed = migrate_to_current(source)
    assert changed is False
    assert migrated == source


@pytest.mark.parametrize("name", ["legacy_v1.migrated.jsonl", "legacy_v2.migrated.jsonl"])
def test_migrated_files_need_no_second_migration(name: str) -> None:
    source = read_lines(name)
    assert migrate_to_current(source) == (source, False)


# --- purity and edge cases ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["legacy_v1.jsonl", "legacy_v2.jsonl"])
def test_input_is_not_modified(name: str) -> None:
    source = read_lines(name)
    before = copy.deepcopy(source)
    migrate_to_current(source)
    assert source == before
    assert [list(line) for line in source] == [list(line) for line in before]


def header(**fields: Any) -> dict[str, Any]:
    return {"type": "session", "id": "s", "timestamp": "t", "cwd": "/", **fields}


def test_session_version() -> None:
    assert session_version(header()) == 1
    assert session_version(header(version=1)) == 1
    assert session_version(header(version=2)) == 2
    assert session_version(header(version=3)) == 3
    assert session_version(header(version=None)) == 1


def test_v1_to_v2_with_a_deterministic_id_factory() -> None:
    lines = [
        header(provider="p"),
        {
            "type": "message",
            "timestamp": "t1",
            "message": {"role": "user", "content": "a", "timestamp": 1},
        },
        {"type": "thinking_level_change", "timestamp": "t2", "thinkingLevel": "low"},
        {
            "type": "compaction",
            "timestamp": "t3",
            "summary": "s",
            "firstKeptEntryIndex": 2,
            "tokensBefore": 5,
        },
    ]
    migrated = migrate_v1_to_v2(lines, new_id=counter_ids())
    assert migrated[0] == {**header(provider="p"), "version": 2}
    assert [(line["id"], line["parentId"]) for line in migrated[1:]] == [
        ("00000000", None), ("00000001", "00000000"), ("00000002", "00000001"),
    ]  # fmt: skip
    assert migrated[3] == {
        "type": "compaction", "timestamp": "t3", "summary": "s", "tokensBefore": 5,
        "id": "00000002", "parentId": "00000001", "firstKeptEntryId": "00000001",
    }  # fmt: skip
    assert list(migrated[3]) == [
        "type", "timestamp", "summary", "tokensBefore", "id", "parentId", "firstKeptEntryId",
    ]  # fmt: skip


@pytest.mark.parametrize("index", [0, 4, 99, -1, "2", None, True])
def test_a_compaction_index_that_names_no_entry_yields_no_id(index: Any) -> None:
    lines = [
        header(),
        {
            "type": "message",
            "timestamp": "t",
            "message": {"role": "user", "content": "a", "timestamp": 1},
        },
        {
            "type": "compaction",
            "timestamp": "t",
            "summary": "s",
            "firstKeptEntryIndex": index,
            "tokensBefore": 5,
        },
    ]
    migrated = migrate_v1_to_v2(lines, new_id=counter_ids())
    assert "firstKeptEntryIndex" not in migrated[2]
    assert "firstKeptEntryId" not in migrated[2]


def test_a_whole_float_index_is_an_index() -> None:
    lines = [
        header(),
        {"type": "custom", "timestamp": "t", "customType": "x"},
        {
            "type": "compaction",
            "timestamp": "t",
            "summary": "s",
            "firstKeptEntryIndex": 1.0,
            "tokensBefore": 5,
        },
    ]
    migrated = migrate_v1_to_v2(lines, new_id=counter_ids())
    assert migrated[2]["firstKeptEntryId"] == migrated[1]["id"]


def test_explicit_version_1_header_keeps_the_key_in_place() -> None:
    lines = [header(version=1), {"type": "custom", "timestamp": "t", "customType": "x"}]
    migrated, changed = migrate_to_current(lines, new_id=counter_ids())
    assert changed
    assert list(migrated[0]) == ["type", "id", "timestamp", "cwd", "version"]
    assert migrated[0]["version"] == 3


def test_v1_hook_message_goes_through_both_steps() -> None:
    lines = [
        header(),
        {"type": "message", "timestamp": "t",
         "message": {"role": "hookMessage", "customType": "c", "content": "x", "display": True,
                     "timestamp": 1}},
    ]  # fmt: skip
    migrated, changed = migrate_to_current(lines, new_id=counter_ids())
    assert changed
    assert migrated[0]["version"] == 3
    assert migrated[1]["message"]["role"] == "custom"
    assert migrated[1]["id"] == "00000000"
    assert migrated[1]["parentId"] is None
    assert lines[1]["message"]["role"] == "hookMessage"


def test_hook_message_rename_touches_only_message_entries() -> None:
    lines = [
        header(version=2),
        {
            "type": "custom",
            "id": "a",
            "parentId": None,
            "timestamp": "t",
            "customType": "x",
            "data": {"role": "hookMessage"},
        },
    ]
    migrated, _ = migrate_to_current(lines)
    assert migrated[1] == lines[1]


def test_header_only_and_empty_files() -> None:
    assert migrate_to_current([]) == ([], False)
    migrated, changed = migrate_to_current([header()])
    assert changed
    assert migrated == [{**header(), "version": 3}]


def test_a_first_line_that_is_not_a_header_is_refused() -> None:
    with pytest.raises(ValueError, match="header"):
        migrate_to_current([{"type": "message", "timestamp": "t"}])


def test_future_versions_are_not_touched() -> None:
    lines = [header(version=4), {"type": "future", "id": "a", "parentId": None}]
    assert migrate_to_current(lines) == (lines, False)
