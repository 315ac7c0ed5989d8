"""The differential harness's counts at the end of a test run that ran it."""

from __future__ import annotations

from typing import Any


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line: scenarios, identical, documented, pending-fix, undocumented (and the time)."""
    from tests.interop import test_pi_differential as harness

    if harness.RESULTS:
        c = harness.counts(harness.RESULTS)
        took = harness.TIMES.get("<all>")
        line = ", ".join(f"{k} {v}" for k, v in c.items())
        terminalreporter.write_line(
            f"pi 0.73.1 differential harness: {line}" + (f" ({took:.0f} s)" if took else "")
        )
