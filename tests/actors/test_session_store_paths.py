"""Where session files live (pitrio/actors/session_store/paths.py; spec pi-behavior §4.1)."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.paths import (
    AGENT_DIR_ENV,
    SESSION_DIR_ENV,
    agent_dir,
    encode_cwd,
    open_session_file,
    session_dir,
    session_file_name,
)
from pitrio.actors.session_store.storage import READ_BUFFER, read_session


@pytest.mark.parametrize(
    ("cwd", "encoded"),
    [
        ("/home/u/proj", "--home-u-proj--"),  # the spec's example
        ("/", "----"),
        ("/home/u/proj/", "--home-u-proj---"),
        ("//srv/x", "---srv-x--"),  # only one leading separator is dropped
        ("C:\\Users\\u\\proj", "--C--Users-u-proj--"),  # colon and backslashes
        ("\\\\server\\share\\dir", "---server-share-dir--"),  # UNC: one leading \ dropped
        ("D:/mixed\\seps", "--D--mixed-seps--"),
        ("relative/dir", "--relative-dir--"),
        ("/with space/and.dot", "--with space-and.dot--"),  # nothing else is touched
    ],
)
def test_encode_cwd(cwd: str, encoded: str) -> None:
    assert encode_cwd(cwd) == encoded


def test_agent_dir_from_env_mapping() -> None:
    assert agent_dir({AGENT_DIR_ENV: "/opt/agent"}) == Path("/opt/agent")


def test_agent_dir_reads_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(AGENT_DIR_ENV, str(tmp_path / "agent"))
    assert agent_dir() == tmp_path / "agent"


def test_agent_dir_default_is_under_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert agent_dir({}) == tmp_path / ".pitrio" / "agent"
    # An empty variable counts as unset (as in pi, where "" is falsy).
    assert agent_dir({AGENT_DIR_ENV: ""}) == tmp_path / ".pitrio" / "agent"


def test_agent_dir_expands_tilde(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert agent_dir({AGENT_DIR_ENV: "~/agent"}) == tmp_path / "agent"


def test_session_dir_default_is_encoded_cwd_under_agent_dir() -> None:
    env = {AGENT_DIR_ENV: "/opt/agent"}
    assert session_dir("/home/u/proj", env=env) == Path("/opt/agent/sessions/--home-u-proj--")


def test_session_dir_env_beats_default() -> None:
    env = {AGENT_DIR_ENV: "/opt/agent", SESSION_DIR_ENV: "/env/sessions"}
    assert session_dir("/home/u/proj", env=env) == Path("/env/sessions")


def test_session_dir_override_beats_env() -> None:
    env = {AGENT_DIR_ENV: "/opt/agent", SESSION_DIR_ENV: "/env/sessions"}
    assert session_dir("/home/u/proj", override="/cli/sessions", env=env) == Path("/cli/sessions")


def test_session_dir_override_beats_default() -> None:
    env = {AGENT_DIR_ENV: "/opt/agent"}
    assert session_dir("/x", override="/cli/sessions", env=env) == Path("/cli/sessions")


def test_session_dir_empty_env_counts_as_unset() -> None:
    env = {AGENT_DIR_ENV: "/opt/agent", SESSION_DIR_ENV: ""}
    assert session_dir("/home/u/proj", env=env) == Path("/opt/agent/sessions/--home-u-proj--")


def test_session_dir_expands_tilde(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert session_dir("/p", override="~/s", env={}) == tmp_path / "s"
    assert session_dir("/p", env={SESSION_DIR_ENV: "~/e"}) == tmp_path / "e"


def test_session_dir_reads_process_environment_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(AGENT_DIR_ENV, str(tmp_path / "agent"))
    monkeypatch.delenv(SESSION_DIR_ENV, raising=False)
    assert session_dir("/a/b") == tmp_path / "agent" / "sessions" / "--a-b--"
    monkeypatch.setenv(SESSION_DIR_ENV, str(tmp_path / "env"))
    assert session_dir("/a/b") == tmp_path / "env"


def test_session_file_name_replaces_colons_and_dots() -> None:
    assert (
        session_file_name("2024-12-03T14:00:00.000Z", "01a2b3c4-0000-7000-8000-000000000000")
        == "2024-12-03T14-00-00-000Z_01a2b3c4-0000-7000-8000-000000000000.jsonl"
    )


def test_session_file_name_leaves_the_id_alone() -> None:
    # Only the timestamp is rewritten: an id is used verbatim.
    assert session_file_name("2024-01-01T00:00:00.5Z", "a.b:c") == (
        "2024-01-01T00-00-00-5Z_a.b:c.jsonl"
    )


def test_a_session_file_is_opened_with_the_read_buffer_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"x\n")
    unbuffered = open_session_file(path, buffering=0)
    assert unbuffered is not None
    with unbuffered:
        assert isinstance(unbuffered, io.FileIO)  # no buffer at all: the size was honoured
    buffered = open_session_file(path)
    assert buffered is not None
    with buffered:
        assert isinstance(buffered, io.BufferedReader)


def test_a_session_read_through_a_large_buffer_parses_as_the_bytes_do(tmp_path: Path) -> None:
    # Lines longer than the buffer and lines across its boundary, a torn last line: the load
    # reads the file in READ_BUFFER chunks and must see the lines the bytes hold.
    header = (
        b'{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/w"}'
    )
    lines = [header]
    parent = None
    for index in range(40):
        text = "y" * (READ_BUFFER // 3 if index % 5 == 0 else 100 + index)
        entry = {
            "type": "message",
            "id": f"e{index}",
            "parentId": parent,
            "timestamp": "2025-01-01T00:00:01Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        }
        lines.append(orjson.dumps(entry))
        parent = f"e{index}"
    data = b"\n".join(lines) + b'\n{"type":"message","id":"torn'
    path = tmp_path / "big.jsonl"
    path.write_bytes(data)
    assert len(data) > 2 * READ_BUFFER
    parsed = read_session(path)
    expected = parse_session_bytes(data, origin=str(path))
    assert parsed is not None
    assert [(e.id, e.parent_id, e.raw) for e in parsed.entries] == [
        (e.id, e.parent_id, e.raw) for e in expected.entries
    ]
    assert len(parsed.entries) == 40
    assert parsed.problems == expected.problems
    assert [p.kind for p in parsed.problems] == ["torn"]
