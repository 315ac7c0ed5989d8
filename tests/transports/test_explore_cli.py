"""``pitrio explore`` (issue 39): listing, running, exit codes, and a failing seed's report
and trace, which ``pitrio trace timeline`` reads."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pitrio.transports.cli import main
from pitrio.transports.explore_cli import run_explore_command
from pitrio.transports.trace_cli import run_trace_command
from tests.actors.explore_planted import sticky_follow_ups


@pytest.fixture(autouse=True)
def pitrio_log_level() -> Iterator[None]:
    """The command quietens pitrio's log; the level is put back for the other tests."""
    logger = logging.getLogger("pitrio")
    level = logger.level
    yield
    logger.setLevel(level)


def test_list_names_every_scenario_and_invariant(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explore_command(["--list"]) == 0
    out = capsys.readouterr().out
    for name in ("abort-tool-batch", "two-clients", "random-clients", "foreign-append-during-run"):
        assert name in out
    for name in ("answered-once", "one-settle-per-run", "resources-released"):
        assert name in out


def test_unusable_input_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_explore_command(["no-such-scenario"]) == 2
    assert "no scenario 'no-such-scenario'" in capsys.readouterr().err
    assert run_explore_command(["two-clients", "--seeds", "0"]) == 2
    with pytest.raises(SystemExit) as exited:
        run_explore_command(["two-clients", "--strategy", "fifo"])
    assert exited.value.code == 2
    assert run_explore_command([]) == 2  # no scenario: the list, and a usage exit


def test_a_passing_scenario_prints_its_figures_and_exits_0(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["explore", "prompt-at-settle", "--seeds", "2", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("prompt-at-settle: 2 schedules (random), 2 distinct interleavings")
    assert list(tmp_path.iterdir()) == []  # nothing failed: no trace
    assert run_explore_command(["prompt-at-settle", "--seed", "7", "--strategy", "pct"]) == 0
    assert "1 schedules (pct)" in capsys.readouterr().out


def test_a_failing_seed_is_reported_with_its_trace(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sticky_follow_ups(monkeypatch)  # a planted bug
    code = run_explore_command(
        ["steer-follow-up-during-retry", "--seeds", "3", "--out", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL steer-follow-up-during-retry seed 0 (--strategy random): idle-at-end" in out
    assert "shortest failing prefix" in out
    assert (
        "reproduce: pitrio explore steer-follow-up-during-retry --seed 0 --strategy random" in out
    )
    trace = tmp_path / "explore-steer-follow-up-during-retry-random-0.jsonl"
    assert f"trace: {trace}" in out
    assert run_trace_command(["timeline", str(trace)]) == 0
    timeline = capsys.readouterr().out
    assert "input follow_up" in timeline and "agent_settled" in timeline
