"""Shared test configuration.

Hypothesis runs without a per-example deadline: the codec builds its cattrs hooks lazily on
first use, which would make the first example of a property look slow.

Under pytest-xdist, lines a worker leaves in ``workeroutput["pi_interop_summary"]`` (the
differential harness's counts, see ``tests/interop/conftest.py``) are printed by the controller.
"""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("pitrio", deadline=None)
settings.load_profile("pitrio")

_WORKER_LINES: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Let the suite's pitrio processes keep their bytecode and attrs cache.

    The suite starts pitrio as a subprocess several hundred times. Under
    ``PYTHONDONTWRITEBYTECODE`` every one of them compiles every module from source and
    rebuilds every attrs class: 2.8 s of CPU a start instead of 1.2 s on this machine, most of
    what those tests cost. The variable is dropped for the run (the workers and every
    subprocess inherit that), and the controller warms both caches with one import first, so
    no two workers compile the same modules at once.
    """
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is None:
        return
    if not hasattr(config, "workerinput"):  # the controller, or a run without workers
        subprocess.run([sys.executable, "-c", "import pitrio.transports.cli"], check=False)


@pytest.fixture
def isolated_dirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Keep a test away from the real home, agent dir and session dir (modules that start
    sessions with default paths use it for every test: ``pytest.mark.usefixtures``)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return tmp_path


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Keep a worker's harness summary for the controller's terminal summary."""
    line = getattr(node, "workeroutput", {}).get("pi_interop_summary")
    if line:
        _WORKER_LINES.append(line)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the summaries the workers handed over."""
    for line in _WORKER_LINES:
        terminalreporter.write_line(line)
