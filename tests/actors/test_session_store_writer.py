"""The session writer (pitrio/actors/session_store/writer.py; spec pi-behavior §4.2, §4.3, §4.6)."""

from __future__ import annotations

import itertools
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.writer import SessionWriter, new_header
from pitrio.messages.agent import AssistantMessage, Usage, user_message
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import TextContent
from pitrio.messages.entries import (
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    ThinkingLevelChangeEntry,
)

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ENTRY_ID = re.compile(r"^[0-9a-f]{8}$")


def assistant(text: str = "reply") -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1_700_000_000_000,
    )


def read_lines(path: Path) -> list[dict[str, Any]]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [orjson.loads(line) for line in data.split(b"\n")[:-1]]


def test_new_header_shape() -> None:
    header = new_header("/home/u/proj")
    assert header.type == "session"
    assert header.version == 3
    assert header.cwd == "/home/u/proj"
    assert UUID7.match(header.id), header.id
    assert ISO.match(header.timestamp), header.timestamp
    assert header.parent_session is None
    assert to_json(header) == {
        "type": "session",
        "version": 3,
        "id": header.id,
        "timestamp": header.timestamp,
        "cwd": "/home/u/proj",
    }
    forked = new_header("/p", parent_session="/s/old.jsonl")
    assert to_json(forked)["parentSession"] == "/s/old.jsonl"
    assert forked.id != header.id


def test_no_file_until_the_first_assistant_message(tmp_path: Path) -> None:
    path = tmp_path / "sessions" / "--p--" / "s.jsonl"
    writer = SessionWriter(new_header("/p"), path)
    writer.append_model_change("faux", "faux-1")
    writer.append_thinking_level_change("off")
    writer.append_message(user_message("hello"))
    writer.append_message(user_message("again"))
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # not even the directory is created
    assert len(writer.entries) == 4

    writer.append_message(assistant())

    lines = read_lines(path)
    assert [line["type"] for line in lines] == [
        "session",
        "model_change",
        "thinking_level_change",
        "message",
        "message",
        "message",
    ]
    assert lines[0] == to_json(writer.header)
    assert lines[1:] == [to_json(entry) for entry in writer.entries]


def test_later_entries_are_appended_one_line_each(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(new_header("/p"), path)
    writer.append_message(user_message("hello"))
    writer.append_message(assistant("hi"))
    first = path.read_bytes()

    writer.append_message(user_message("more"))
    second = path.read_bytes()
    assert second.startswith(first)
    added = second[len(first) :]
    assert added.count(b"\n") == 1 and added.endswith(b"\n")
    assert orjson.loads(added) == to_json(writer.entries[-1])

    writer.append_thinking_level_change("high")
    writer.append_model_change("faux", "faux-think")
    third = path.read_bytes()
    assert third.startswith(second)
    assert [line["type"] for line in read_lines(path)][-2:] == [
        "thinking_level_change",
        "model_change",
    ]
    # The header is written once only.
    assert sum(line["type"] == "session" for line in read_lines(path)) == 1


def test_only_a_user_session_never_creates_a_file(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(new_header("/p"), path)
    for i in range(5):
        writer.append_message(user_message(f"u{i}"))
    assert not path.exists()


def test_path_none_never_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    writer = SessionWriter(new_header(str(tmp_path)), None)
    writer.append_model_change("faux", "faux-1")
    writer.append_message(user_message("hello"))
    writer.append_message(assistant())
    writer.append_message(user_message("more"))
    assert writer.path is None
    assert len(writer.entries) == 4
    assert list(tmp_path.iterdir()) == []


def test_ids_are_eight_hex_digits_and_unique() -> None:
    writer = SessionWriter(new_header("/p"), None)
    for i in range(300):
        writer.append_message(user_message(str(i)))
    ids = [entry.id for entry in writer.entries]
    assert all(ENTRY_ID.match(entry_id) for entry_id in ids)
    assert len(set(ids)) == len(ids)


def test_colliding_ids_are_regenerated(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: Iterator[str] = iter(["aaaaaaaa", "aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda _n: next(drawn))
    writer = SessionWriter(new_header("/p"), None)
    first = writer.append_model_change("faux", "faux-1")
    second = writer.append_thinking_level_change("off")
    assert (first.id, second.id) == ("aaaaaaaa", "bbbbbbbb")


def test_parent_chain(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(new_header("/p"), path)
    writer.append_model_change("faux", "faux-1")
    writer.append_thinking_level_change("off")
    writer.append_message(user_message("hello"))
    writer.append_message(assistant())
    writer.append_message(user_message("more"))
    lines = read_lines(path)[1:]
    assert lines[0]["parentId"] is None  # written, as null, not omitted
    for previous, line in itertools.pairwise(lines):
        assert line["parentId"] == previous["id"]
    assert [e.parent_id for e in writer.entries] == [None, *[e.id for e in writer.entries[:-1]]]


def test_returned_entries_and_their_fields() -> None:
    writer = SessionWriter(new_header("/p"), None)
    model = writer.append_model_change("faux", "faux-1")
    level = writer.append_thinking_level_change("medium")
    message = writer.append_message(user_message("hello"))
    assert isinstance(model, ModelChangeEntry)
    assert (model.provider, model.model_id) == ("faux", "faux-1")
    assert isinstance(level, ThinkingLevelChangeEntry)
    assert level.thinking_level == "medium"
    assert isinstance(message, MessageEntry)
    assert message.message == writer.entries[-1].message  # type: ignore[union-attr]
    assert all(ISO.match(entry.timestamp) for entry in writer.entries)
    assert to_json(model) == {
        "type": "model_change",
        "id": model.id,
        "parentId": None,
        "timestamp": model.timestamp,
        "provider": "faux",
        "modelId": "faux-1",
    }
    assert to_json(level)["thinkingLevel"] == "medium"


def test_lines_decode_back_to_the_same_entries(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    writer = SessionWriter(new_header("/home/u/proj"), path)
    writer.append_model_change("faux", "faux-1")
    writer.append_thinking_level_change("off")
    writer.append_message(user_message("hello"))
    writer.append_message(assistant("hi there"))
    writer.append_message(user_message("ünïcode ✓ \u2028 line"))
    raw = path.read_bytes().split(b"\n")[:-1]
    assert from_json(orjson.loads(raw[0]), SessionHeader) == writer.header
    decoded = [from_json(orjson.loads(line), SessionEntry) for line in raw[1:]]  # type: ignore[arg-type]
    assert decoded == writer.entries
    # And the bytes are exactly what the codec writes (no re-formatting, one line each).
    assert raw[1:] == [orjson.dumps(to_json(entry)) for entry in writer.entries]
