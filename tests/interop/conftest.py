"""The differential harness's counts at the end of a test run that ran it.

Under pytest-xdist the harness runs in one worker (``--dist loadfile`` keeps a module's tests
together, so its module fixture runs once);
the worker hands its line to the controller through ``workeroutput``, and the root
``conftest.py`` prints it there.
"""

from __future__ import annotations

import sys
from typing import Any

SUMMARY_KEY = "pi_interop_summary"


def summary_line() -> str | None:
    """One line: scenarios, identical, documented, pending-fix, undocumented (and the time)."""
    harness = sys.modules.get("tests.interop.test_pi_differential")
    if harness is None or not harness.RESULTS:
        return None
    c = harness.counts(harness.RESULTS)
    took = harness.TIMES.get("<all>")
    line = ", ".join(f"{k} {v}" for k, v in c.items())
    return f"pi 1.6.0 differential harness: {line}" + (f" ({took:.0f} s)" if took else "")


def pytest_sessionfinish(session: Any) -> None:
    """In an xdist worker: pass the line on to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    line = summary_line()
    if workeroutput is not None and line:
        workeroutput[SUMMARY_KEY] = line


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Without xdist: print the line here."""
    line = summary_line()
    if line and not hasattr(terminalreporter.config, "workeroutput"):
        terminalreporter.write_line(line)
