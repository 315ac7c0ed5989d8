"""``bench/interleave.py``: single runs combine into the result one invocation would write."""

from __future__ import annotations

from typing import Any

import pytest

from bench.interleave import combine


def turn_run(totals: list[float], cpu: float) -> dict[str, Any]:
    turns = [{"total": t, "ack": 0.1, "pre": t / 2, "llm": 0.2, "post": t / 4} for t in totals]
    turns[-1]["req_bytes_last"] = 100
    return {
        "turns": turns,
        "cpu_s_per_turn": cpu,
        "cpu_s_per_turn_after_turn1": cpu,
        "peak_rss_mb": 40.0,
    }


def part(workload: str, value: dict[str, Any], load: list[float]) -> dict[str, Any]:
    return {"meta": {"label": "x", "loadavg_end": load}, "workloads": {workload: value}}


def test_per_turn_runs_combine_with_medians_over_every_turn() -> None:
    first = {"n_turns": 3, "mock": {}, "runs": [turn_run([1.0, 2.0, 9.0], 0.002)], "summary": {}}
    second = {**first, "runs": [turn_run([3.0, 4.0, 5.0], 0.004)]}
    combined = combine("turns50", [part("turns50", first, [1.0]), part("turns50", second, [2.0])])
    value = combined["workloads"]["turns50"]
    assert len(value["runs"]) == 2 and value["n_turns"] == 3
    summary = value["summary"]
    assert summary["turn_ms"] == {"n": 6, "median": 3.5, "min": 1.0, "max": 9.0, "mean": 4.0}
    assert summary["turn1_ms"]["median"] == 2.0  # first turns: 1.0 and 3.0
    assert summary["cpu_ms_per_turn"]["median"] == pytest.approx(3.0)
    assert summary["last_request_bytes"]["n"] == 2
    assert "between_llm_calls_ms" not in summary
    assert combined["meta"]["interleaved_runs"] == 2
    assert combined["meta"]["loadavg_end"] == [2.0]


def test_tool_turns_keep_their_two_request_columns() -> None:
    run = turn_run([5.0], 0.01)
    run["turns"][0].update(between=1.5, tool_exec=0.5)
    value = {"n_turns": 1, "runs": [run], "summary": {"between_llm_calls_ms": {}}}
    summary = combine("tool_bash", [part("tool_bash", value, [0.0])])["workloads"]["tool_bash"]
    assert summary["summary"]["between_llm_calls_ms"]["median"] == 1.5
    assert summary["summary"]["tool_exec_ms"]["median"] == 0.5


def test_cold_starts_combine() -> None:
    runs = [{"startup_s": s, "cpu_s": 0.3, "peak_rss_mb": 39.0} for s in (0.25, 0.2, 0.3)]
    parts = [part("cold_start", {"runs": [run], "summary": {}}, [0.0]) for run in runs]
    summary = combine("cold_start", parts)["workloads"]["cold_start"]["summary"]
    assert summary["startup_ms"]["median"] == 250.0 and summary["startup_ms"]["n"] == 3


def test_nothing_to_combine_is_an_error() -> None:
    with pytest.raises(ValueError, match="no runs of turns50"):
        combine("turns50", [])
