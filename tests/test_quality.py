"""The code base stays ruff- and mypy-clean: both run as part of the test suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_is_clean() -> None:
    result = run(str(BIN / "ruff"), "check", "pitrio", "tests", "bench", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
