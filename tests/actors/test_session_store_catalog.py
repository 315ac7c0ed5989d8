"""Finding sessions on disk (pitrio/actors/session_store/catalog.py).

Spec §4.11, §4.12 (forkFrom); scenarios S137-S143 (continue recent) and S148 (modified time).
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.session_store.catalog import (
    fork_from,
    list_all_sessions,
    list_sessions,
    most_recent_session,
    read_session_info,
    resolve_session_arg,
)
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.paths import encode_cwd
from pitrio.errors import SessionFileError, SessionNotFoundError

UTC = datetime.UTC


def header(
    session_id: str, *, cwd: str = "/p", ts: str = "2026-01-01T00:00:00.000Z", **extra: Any
) -> dict[str, Any]:
    return {"type": "session", "version": 3, "id": session_id, "timestamp": ts, "cwd": cwd, **extra}


def message(entry_id: str, parent: str | None, role: str, content: Any, ms: int) -> dict[str, Any]:
    body: dict[str, Any] = {"role": role, "content": content, "timestamp": ms}
    if role == "assistant":
        body.update(api="a", provider="p", model="m", usage={}, stopReason="stop")
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": body,
    }


def write(path: Path, *values: dict[str, Any], tail: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(orjson.dumps(value) + b"\n" for value in values) + tail)
    return path


def ms(year: int, minute: int = 0) -> int:
    return int(datetime.datetime(year, 1, 1, 0, minute, tzinfo=UTC).timestamp() * 1000)


def test_session_info_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.jsonl",
        header("id-a", parentSession="/old.jsonl"),
        message("1", None, "user", [{"type": "text", "text": "first question"}], ms(2026, 5)),
        message("2", "1", "assistant", [{"type": "text", "text": "an answer"}], ms(2026, 6)),
        {"type": "session_info", "id": "3", "parentId": "2", "timestamp": "t", "name": " Named "},
        message(
            "4", "3", "toolResult", [{"type": "text", "text": "not counted as text"}], ms(2030)
        ),
        tail=b'{"type":"mess',
    )
    info = read_session_info(path)
    assert info is not None
    assert (info.path, info.id, info.cwd, info.name) == (path, "id-a", "/p", "Named")
    assert info.parent_session_path == "/old.jsonl"
    assert info.created == datetime.datetime(2026, 1, 1, tzinfo=UTC)
    assert info.modified == datetime.datetime(2026, 1, 1, 0, 6, tzinfo=UTC)  # user/assistant only
    assert info.message_count == 3
    assert info.first_message == "first question"
    assert info.all_messages_text == "first question an answer"


def test_modified_is_the_last_message_not_the_file_time(tmp_path: Path) -> None:  # S148
    path = write(
        tmp_path / "a.jsonl", header("x"), message("1", None, "assistant", "hi", ms(2026, 30))
    )
    os.utime(path, (0, 0))
    info = read_session_info(path)
    assert info is not None and info.modified == datetime.datetime(2026, 1, 1, 0, 30, tzinfo=UTC)
    empty = write(tmp_path / "b.jsonl", header("y", ts="2025-06-01T00:00:00.000Z"))
    info = read_session_info(empty)
    assert info is not None and info.modified == info.created
    assert info.first_message == "(no messages)" and info.message_count == 0


def test_listing_one_directory_newest_first(tmp_path: Path) -> None:
    write(tmp_path / "old.jsonl", header("old"), message("1", None, "user", "o", ms(2025)))
    write(tmp_path / "new.jsonl", header("new"), message("1", None, "user", "n", ms(2027)))
    write(tmp_path / "bad.jsonl", {"type": "message"})
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "new.jsonl.lock").write_text("{}")
    assert [info.id for info in list_sessions(tmp_path)] == ["new", "old"]
    assert list_sessions(tmp_path / "missing") == []


def test_listing_every_project(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    write(
        root / encode_cwd("/a") / "1.jsonl",
        header("one", cwd="/a"),
        message("1", None, "user", "x", ms(2025)),
    )
    write(
        root / encode_cwd("/b") / "2.jsonl",
        header("two", cwd="/b"),
        message("1", None, "user", "y", ms(2026)),
    )
    assert [(info.id, info.cwd) for info in list_all_sessions(root)] == [
        ("two", "/b"),
        ("one", "/a"),
    ]
    assert list_all_sessions(tmp_path / "none") == []


def test_continue_picks_the_newest_valid_file(tmp_path: Path) -> None:  # S137-S143
    assert most_recent_session(tmp_path) is None
    assert most_recent_session(tmp_path / "missing") is None
    (tmp_path / "a.txt").write_text("{}")
    (tmp_path / "b.json").write_text("{}")
    assert most_recent_session(tmp_path) is None
    invalid = write(tmp_path / "invalid.jsonl", {"type": "message", "id": "x"})
    assert most_recent_session(tmp_path) is None
    older = write(tmp_path / "older.jsonl", header("older"))
    assert most_recent_session(tmp_path) == older
    newer = write(tmp_path / "newer.jsonl", header("newer"))
    os.utime(older, (1000, 1000))
    os.utime(newer, (2000, 2000))
    os.utime(invalid, (3000, 3000))
    assert most_recent_session(tmp_path) == newer


def test_resolving_a_session_argument(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    here = root / encode_cwd("/proj")
    there = root / encode_cwd("/other")
    mine = write(
        here / "m.jsonl",
        header("0199aaaa-1111", cwd="/proj"),
        message("1", None, "user", "x", ms(2026)),
    )
    theirs = write(there / "t.jsonl", header("0199bbbb-2222", cwd="/other"))
    found = resolve_session_arg("0199aa", cwd="/proj", directory=here, sessions_root=root)
    assert found.path == mine and not found.other_project and found.info is not None
    found = resolve_session_arg("0199bb", cwd="/proj", directory=here, sessions_root=root)
    assert found.path == theirs and found.other_project
    assert resolve_session_arg("0199", cwd="/proj", directory=here, sessions_root=root).path == mine
    assert resolve_session_arg("x/y.jsonl", cwd="/proj").path == Path("/proj/x/y.jsonl")
    assert resolve_session_arg("/abs/s.jsonl", cwd="/proj").path == Path("/abs/s.jsonl")
    assert resolve_session_arg("name.jsonl", cwd="/proj").path == Path("/proj/name.jsonl")
    with pytest.raises(SessionNotFoundError, match="No session found matching 'zzz'"):
        resolve_session_arg("zzz", cwd="/proj", directory=here, sessions_root=root)


def test_fork_into_another_project(tmp_path: Path) -> None:
    entries = [
        message("1", None, "user", "q", ms(2026)),
        {"type": "future_kind", "id": "2", "parentId": "1", "timestamp": "t", "x": [1]},
    ]
    source = write(tmp_path / "src.jsonl", header("src", cwd="/from"), *entries)
    target_dir = tmp_path / "target"
    path = fork_from(source, "/to", directory=target_dir)
    assert path.parent == target_dir
    written = path.read_bytes().splitlines()
    new_header = orjson.loads(written[0])
    assert new_header["cwd"] == "/to" and new_header["parentSession"] == str(source)
    assert new_header["id"] != "src" and path.name.endswith(f"_{new_header['id']}.jsonl")
    assert written[1:] == source.read_bytes().splitlines()[1:]
    assert parse_session_bytes(path.read_bytes(), origin="x").problems == []


def test_fork_from_an_unusable_source(tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.jsonl")
    with pytest.raises(SessionFileError, match="empty or invalid"):
        fork_from(empty, "/to", directory=tmp_path)
    with pytest.raises(SessionFileError, match="empty or invalid"):
        fork_from(tmp_path / "missing.jsonl", "/to", directory=tmp_path)
    headless = write(tmp_path / "headless.jsonl", message("1", None, "user", "q", 1))
    with pytest.raises(SessionFileError, match="has no header"):
        fork_from(headless, "/to", directory=tmp_path)
