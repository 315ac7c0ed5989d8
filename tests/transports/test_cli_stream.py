"""``--faux-chunk-delay`` on the main command (issue 24, item 5): the faux model's reply
streams at a visible pace, so the README's quick start shows streaming."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

TIMEOUT = 60
PROMPT = "a reply long enough to come in several chunks, one after another"


def pitrio(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PITRIO_")}
    env.update(HOME=str(tmp_path), PITRIO_AGENT_DIR=str(tmp_path / "agent"))
    return subprocess.run(
        [sys.executable, "-m", "pitrio.transports.cli", *args],
        cwd=tmp_path,
        env=env,
        input=b"",
        capture_output=True,
        timeout=TIMEOUT,
        check=False,
    )


def text_deltas(stdout: bytes) -> list[str]:
    events = [orjson.loads(line) for line in stdout.splitlines()]
    return [
        e["assistantMessageEvent"]["delta"]
        for e in events
        if e["type"] == "message_update" and e["assistantMessageEvent"]["type"] == "text_delta"
    ]


def test_the_faux_reply_streams_with_the_delay_between_chunks(tmp_path: Path) -> None:
    started = time.monotonic()
    result = pitrio(
        tmp_path, "--mode", "json", "--no-session", "--faux-chunk-delay", "0.05", PROMPT
    )
    elapsed = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    deltas = text_deltas(result.stdout)
    assert "".join(deltas) == PROMPT
    assert len(deltas) >= 5
    # A lower bound only (a sleep never ends early): each chunk waited its 50 ms.
    assert elapsed >= 0.05 * len(deltas)


def test_print_mode_takes_the_delay_too(tmp_path: Path) -> None:
    result = pitrio(tmp_path, "--no-session", "--faux-chunk-delay", "0.01", "-p", "hi there")
    assert (result.returncode, result.stdout, result.stderr) == (0, b"hi there\n", b"")


def test_the_delay_is_checked(tmp_path: Path) -> None:
    result = pitrio(tmp_path, "--faux-chunk-delay", "soon", "-p", "hi")
    assert (result.returncode, result.stdout) == (1, b"")
    assert result.stderr == b"Error: argument --faux-chunk-delay: invalid float value: 'soon'\n"
