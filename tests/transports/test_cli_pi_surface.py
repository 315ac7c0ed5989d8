"""Flags of pi 1.6.0's command line that ``docs/pi-1.6-surface.md`` calls the same in pitrio
and no other test runs: ``--`` ends the options, ``--offline`` is taken (pitrio makes no
start-up network request either way); ``-c``, ``--fork`` and ``--session`` end to end."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.transports.test_cli_args import run


def test_double_dash_makes_a_dash_prompt_a_message(tmp_path: Path) -> None:
    result = run(tmp_path, "--no-session", "-p", "--", "- Summarize these points")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        b"- Summarize these points\n",
        b"",
    )


def test_offline_is_accepted(tmp_path: Path) -> None:
    result = run(tmp_path, "--offline", "--no-session", "-p", "hi")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"hi\n", b"")


def user_texts(path: Path) -> list[str]:
    """The texts of a session file's user messages, in order."""
    texts = []
    for line in path.read_bytes().splitlines():
        entry = orjson.loads(line)
        message = entry.get("message") or {}
        if entry.get("type") == "message" and message.get("role") == "user":
            content = message["content"]
            texts.append(content if isinstance(content, str) else content[0]["text"])
    return texts


def test_continue_fork_and_session_as_pi(tmp_path: Path) -> None:
    assert run(tmp_path, "-p", "one").returncode == 0
    [first] = sorted((tmp_path / "agent" / "sessions").rglob("*.jsonl"))
    # -c: the directory's most recent session goes on.
    assert run(tmp_path, "-c", "-p", "two").returncode == 0
    assert sorted((tmp_path / "agent" / "sessions").rglob("*.jsonl")) == [first]
    assert user_texts(first) == ["one", "two"]
    # --fork: a new session holding the old one's messages; the old one is left as it was.
    assert run(tmp_path, "--fork", str(first), "-p", "three").returncode == 0
    [fork] = [p for p in (tmp_path / "agent" / "sessions").rglob("*.jsonl") if p != first]
    assert user_texts(fork) == ["one", "two", "three"]
    assert user_texts(first) == ["one", "two"]
    # --session: a session by its id (or its path) goes on.
    session_id = first.stem.rsplit("_", 1)[1]
    assert run(tmp_path, "--session", session_id, "-p", "four").returncode == 0
    assert user_texts(first) == ["one", "two", "four"]
