"""The examples run as real programs, offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_sdk_offline_example(tmp_path: Path) -> None:
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent"), "HOME": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "sdk_offline.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "event: agent_start"
    assert "user: hello from the SDK" in lines
    assert "assistant: a second prompt" in lines
    assert any(line.startswith("session file: ") and line.endswith(".jsonl") for line in lines)
