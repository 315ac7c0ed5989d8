"""``pitrio serve`` tunes the cyclic garbage collector (issue 27: full collections of every
session's objects stalled streaming daemons for hundreds of milliseconds)."""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
from pathlib import Path

import pytest

from pitrio.transports.serve import DAEMON_GC_THRESHOLDS, gc_thresholds, positive_seconds
from tests.transports.test_serve_logs import PITRIO, daemon, write_agent


def test_thresholds_are_three_positive_integers_or_python() -> None:
    assert gc_thresholds("50000,20,10") == (50_000, 20, 10)
    assert gc_thresholds(" 700, 10 ,10") == (700, 10, 10)
    assert gc_thresholds("python") is None and gc_thresholds("Python") is None
    for bad in ("", "1,2", "1,2,3,4", "0,10,10", "-5,10,10", "a,b,c", "1.5,2,3"):
        with pytest.raises(argparse.ArgumentTypeError, match="three positive integers"):
            gc_thresholds(bad)


def test_a_handshake_timeout_is_a_positive_finite_number_of_seconds() -> None:
    assert positive_seconds("2") == 2.0 and positive_seconds("0.5") == 0.5
    for bad in ("", "0", "-1", "inf", "nan", "ten"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive number of seconds"):
            positive_seconds(bad)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [((), list(DAEMON_GC_THRESHOLDS)), (("--gc-threshold", "python"), list(gc.get_threshold()))],
)
async def test_the_daemon_applies_and_logs_its_thresholds(
    tmp_path: Path, extra: tuple[str, ...], expected: list[int]
) -> None:
    write_agent(tmp_path / "agent", 9)  # no model is asked: the mock is never reached
    cwd = tmp_path / "work"
    cwd.mkdir()
    async with daemon(tmp_path / "agent", cwd, *extra) as (_process, log, _url):
        started = log.events("daemon_started")[0]["fields"]
    assert started["gc_threshold"] == expected


def test_a_bad_threshold_is_refused_before_anything_starts(tmp_path: Path) -> None:
    result = subprocess.run(
        [PITRIO, "serve", "--port", "0", "--gc-threshold", "1,2"],
        capture_output=True,
        text=True,
        env={**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent")},
        timeout=30,
    )
    assert result.returncode == 2
    assert "--gc-threshold" in result.stderr and "'1,2'" in result.stderr
    assert not (tmp_path / "agent" / "daemon-token").exists()
