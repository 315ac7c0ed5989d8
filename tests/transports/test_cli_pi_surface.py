"""Flags of pi 1.6.0's command line that ``docs/pi-1.6-surface.md`` calls the same in pitrio
and no other test runs: ``--`` ends the options, ``--offline`` is taken (pitrio makes no
start-up network request either way)."""

from __future__ import annotations

from pathlib import Path

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
