"""``pitrio sessions check|repair|list`` (pitrio/transports/sessions_cli.py, maintenance.py)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.paths import encode_cwd
from pitrio.transports.sessions_cli import run_sessions_command

HEADER = orjson.dumps(
    {
        "type": "session",
        "version": 3,
        "id": "s-1",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/p",
    }
)


def entry(entry_id: str, parent: str | None) -> bytes:
    return orjson.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": f"text {entry_id}", "timestamp": 1},
        }
    )


def damaged(tmp_path: Path) -> tuple[Path, bytes]:
    good = [HEADER, entry("a", None), entry("b", "a")]
    data = b"\n".join([good[0], good[1], b"not json", good[2], entry("b", "a"), b'{"type":"mes'])
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    return path, b"\n".join(good) + b"\n"


def test_check_lists_every_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = damaged(tmp_path)
    assert run_sessions_command(["check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}:3: error: malformed JSON: " + out[0].split("malformed JSON: ")[1]
    assert out[1] == f"{path}:5: error: duplicate entry id b"
    assert out[2] == f"{path}:6: warning: torn last line (an interrupted write)"
    assert out[3] == f"{path}: 2 error(s), 1 warning(s)"


def test_check_a_clean_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_bytes(HEADER + b"\n" + entry("a", None) + b"\n")
    assert run_sessions_command(["check", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_repair_moves_bad_lines_aside(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, kept = damaged(tmp_path)
    assert run_sessions_command(["repair", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}:3: moved to {path}.rejected: malformed JSON" in out
    assert f"{path}: repaired (3 line(s) moved)" in out
    assert path.read_bytes() == kept
    rejected = (tmp_path / "s.jsonl.rejected").read_bytes()
    assert rejected == b"not json\n" + entry("b", "a") + b'\n{"type":"mes\n'
    assert parse_session_bytes(path.read_bytes(), origin="x").problems == []
    assert run_sessions_command(["repair", str(path)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert run_sessions_command(["check", str(path)]) == 0


def test_repair_refuses_while_a_writer_holds_the_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = damaged(tmp_path)
    before = path.read_bytes()
    lease = Lease.acquire(path)
    try:
        assert run_sessions_command(["repair", str(path)]) == 1
    finally:
        lease.release()
    assert "is being written by pid" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_repair_of_a_file_without_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"junk\n" + entry("a", None) + b"\n")
    assert run_sessions_command(["repair", str(path)]) == 1
    assert "cannot repair" in capsys.readouterr().err


def test_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_sessions_command([]) == 2
    assert run_sessions_command(["check", str(tmp_path / "missing.jsonl")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    directory = tmp_path / "agent" / "sessions" / encode_cwd("/p")
    directory.mkdir(parents=True)
    (directory / "one.jsonl").write_bytes(HEADER + b"\n" + entry("a", None) + b"\n")
    assert run_sessions_command(["list", "--cwd", "/p"]) == 0
    line = capsys.readouterr().out.strip()
    assert "s-1" in line and "text a" in line and str(directory / "one.jsonl") in line
    assert run_sessions_command(["list", "--all", "--json"]) == 0
    listed = orjson.loads(capsys.readouterr().out)
    assert listed["id"] == "s-1" and listed["messageCount"] == 1 and listed["cwd"] == "/p"
