"""Shared test configuration.

Hypothesis runs without a per-example deadline: the codec builds its cattrs hooks lazily on
first use, which would make the first example of a property look slow.

Under pytest-xdist, lines a worker leaves in ``workeroutput["pi_interop_summary"]`` (the
differential harness's counts, see ``tests/interop/conftest.py``) are printed by the controller.
"""

from typing import Any

import pytest
from hypothesis import settings

settings.register_profile("pitrio", deadline=None)
settings.load_profile("pitrio")

_WORKER_LINES: list[str] = []


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
