"""Interleaved side-by-side runs: one harness run of each agent in turn, combined afterwards.

This VM's speed drifts in phases of tens of seconds (the same build's ``turns50`` median moved
between 2.0 and 4.0 ms within one hour). Measured as all of pi's runs and then all of
pitrio's, a ratio depends on which phase each agent met. ``bench/side_by_side.py`` therefore
runs the per-turn and cold-start workloads one run at a time, pi and pitrio alternately, each
run its own ``bench_rpc.py --runs 1`` (or ``--cold-runs 1``) invocation, and combines the
runs of each agent here into the result one invocation with all the runs would have written:
the runs listed in order and the summary recomputed from them as the harness computes it
(medians and ranges over every turn of every run).
"""

from __future__ import annotations

import statistics
from typing import Any

INTERLEAVED = ("cold_start", "turns50", "tool_bash", "tool_read")
"""The workloads measured run by run, alternating the agents."""

_TURN_KEYS_MS = ("total", "ack", "pre", "llm", "post", "between", "tool_exec")


def summarize(values: list[Any]) -> dict[str, Any]:
    """The harness's summary of a list of numbers (``None`` skipped)."""
    kept = [value for value in values if value is not None]
    if not kept:
        return {"n": 0}
    return {
        "n": len(kept),
        "median": statistics.median(kept),
        "min": min(kept),
        "max": max(kept),
        "mean": statistics.fmean(kept),
    }


def combine(workload: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result file from single-run result files of ``workload``, in run order."""
    if not parts:
        raise ValueError(f"no runs of {workload} to combine")
    combined: dict[str, Any] = {"meta": dict(parts[0].get("meta", {})), "workloads": {}}
    combined["meta"]["interleaved_runs"] = len(parts)
    if parts[-1].get("meta", {}).get("loadavg_end"):
        combined["meta"]["loadavg_end"] = parts[-1]["meta"]["loadavg_end"]
    results = [
        part["workloads"][workload] for part in parts if workload in part.get("workloads", {})
    ]
    runs = [run for result in results for run in result.get("runs", [])]
    if workload == "cold_start":
        combined["workloads"][workload] = {"runs": runs, "summary": cold_start_summary(runs)}
    else:
        value = dict(results[0])
        value["runs"] = runs
        per_turn_requests = 2 if workload.startswith("tool_") else 1  # the call, then the answer
        value["summary"] = multi_turn_summary(runs, int(value.get("n_turns", 0)), per_turn_requests)
        combined["workloads"][workload] = value
    return combined


def cold_start_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The cold-start summary of the harness over ``runs``."""
    return {
        "startup_ms": summarize([round(run["startup_s"] * 1000.0, 3) for run in runs]),
        "cpu_s": summarize([run["cpu_s"] for run in runs]),
        "peak_rss_mb": summarize([run["peak_rss_mb"] for run in runs]),
    }


def multi_turn_summary(
    runs: list[dict[str, Any]], n_turns: int, per_turn_requests: int
) -> dict[str, Any]:
    """The per-turn workloads' summary of the harness over ``runs`` (turn values in ms)."""

    def col(key: str, lo: int = 0, hi: int | None = None) -> list[Any]:
        return [turn.get(key) for run in runs for turn in run["turns"][lo:hi]]

    last10 = max(0, n_turns - 10)
    summary = {
        "turn_ms": summarize(col("total")),
        "turn_ms_first10": summarize(col("total", 0, 10)),
        "turn_ms_last10": summarize(col("total", last10)),
        "turn1_ms": summarize(col("total", 0, 1)),
        "ack_ms": summarize(col("ack")),
        "pre_llm_ms": summarize(col("pre")),
        "mock_server_ms": summarize(col("llm")),
        "post_llm_ms": summarize(col("post")),
        "pre_llm_ms_first10": summarize(col("pre", 0, 10)),
        "pre_llm_ms_last10": summarize(col("pre", last10)),
        "post_llm_ms_first10": summarize(col("post", 0, 10)),
        "post_llm_ms_last10": summarize(col("post", last10)),
        "cpu_ms_per_turn": summarize([run["cpu_s_per_turn"] * 1000 for run in runs]),
        "cpu_ms_per_turn_after_turn1": summarize(
            [run["cpu_s_per_turn_after_turn1"] * 1000 for run in runs]
        ),
        "peak_rss_mb": summarize([run["peak_rss_mb"] for run in runs]),
        "last_request_bytes": summarize([run["turns"][-1].get("req_bytes_last") for run in runs]),
    }
    if per_turn_requests > 1:
        summary["between_llm_calls_ms"] = summarize(col("between"))
        summary["tool_exec_ms"] = summarize(col("tool_exec"))
    return summary
