"""PNG charts of the side-by-side results (matplotlib, ``pip install -e '.[bench]'``).

Each function takes the merged result files (``bench/results/<label>.json``: the harness's
shape, plus ``session_length`` and ``daemon_latency`` workloads) and writes one chart:

* per-turn overhead against session length (1 to 10,000 turns), both agents;
* stream throughput against reply length (unpaced streams), both agents, pi's crashes marked;
* resume time (start → first ``get_state``) against session file size, both agents;
* daemon event latency (p50, p99) against sessions streaming at once, pitrio only;
* the daemon under load from client processes (``bench/daemon_load.py``), pitrio only.

Points are medians; bars span min to max. ``.venv/bin/python -m bench.charts`` redraws them
from the results already in ``bench/results/`` (``side_by_side`` calls :func:`draw_all`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CHARTS = RESULTS / "charts"
COLOURS = {"pi": "#d62728", "pitrio": "#1f77b4"}

Results = dict[str, Any]


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only backend (no display on a server)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars(summary: dict[str, Any]) -> tuple[float, float, float] | None:
    """(median, distance down to min, distance up to max) of a summary, if it has samples."""
    if not summary or not summary.get("n") or summary.get("median") is None:
        return None
    median = float(summary["median"])
    return median, median - float(summary["min"]), float(summary["max"]) - median


def _series(
    points: list[tuple[float, dict[str, Any]]],
) -> tuple[list[float], list[float], list[list[float]]]:
    xs: list[float] = []
    ys: list[float] = []
    low: list[float] = []
    high: list[float] = []
    for x, summary in sorted(points, key=lambda p: p[0]):
        bars = _bars(summary)
        if bars is None:
            continue
        xs.append(x)
        ys.append(bars[0])
        low.append(bars[1])
        high.append(bars[2])
    return xs, ys, [low, high]


def _finish_axes(
    fig: Any,
    ax: Any,
    path: Path,
    *,
    drawn: bool,
    title: str,
    xlabel: str,
    ylabel: str,
    log_y: bool = True,
) -> Path | None:
    """Label a log-x (and by default log-y) chart and save it; ``None`` if nothing was drawn."""
    if not drawn:
        _pyplot().close(fig)
        return None
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    return _finish(fig, ax, path, title)


def _finish(fig: Any, ax: Any, path: Path, title: str) -> Path:
    ax.set_title(title, fontsize=11)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def per_turn_vs_length(agents: dict[str, Results], out: Path) -> Path | None:
    """Median per-turn time (prompt → agent_end) at each session length, log-log."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    for label, results in agents.items():
        sizes = results.get("workloads", {}).get("session_length", {}).get("sizes", {})
        for key, style, name in (("turn_ms", "-o", "turn"), ("agent_ms", "--^", "agent part")):
            points = [
                (float(size), value["summary"].get(key, {}))
                for size, value in sizes.items()
                if "summary" in value
            ]
            xs, ys, err = _series(points)
            if not xs:
                continue
            ax.errorbar(
                xs,
                ys,
                yerr=err,
                fmt=style,
                color=COLOURS.get(label),
                capsize=3,
                label=f"{label}: {name}",
                alpha=1.0 if key == "turn_ms" else 0.6,
            )
            drawn = True
        control = results.get("workloads", {}).get("session_length", {}).get("idle_control")
        if control and "summary" in control:
            # Drawn where it belongs: beside the largest size, whose waiting it copies.
            xs, ys, err = _series(
                [(float(control["like_turns_in_file"]), control["summary"].get("agent_ms", {}))]
            )
            if xs:
                ax.errorbar(
                    xs,
                    ys,
                    yerr=err,
                    fmt="x",
                    markersize=9,
                    color=COLOURS.get(label),
                    capsize=3,
                    label=f"{label}: agent part, 1-turn session waiting as long",
                )
    return _finish_axes(
        fig,
        ax,
        out,
        drawn=drawn,
        title="Per-turn overhead against session length",
        xlabel="turns already in the session (resumed file)",
        ylabel="ms per turn (median, min-max)",
    )


def stream_throughput(agents: dict[str, Results], out: Path) -> Path | None:
    """Deltas per second against the number of 4-character deltas in one reply (unpaced)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    for label, results in agents.items():
        sizes = results.get("workloads", {}).get("stream", {}).get("sizes", {})
        points: list[tuple[float, dict[str, Any]]] = []
        crashes: list[float] = []
        for spec, value in sizes.items():
            if "@" in spec or not spec.endswith("x4") or "summary" not in value:
                continue
            deltas = float(value.get("deltas") or spec.split("x", 1)[0])
            runs = value.get("runs", [])
            if runs and value.get("crashed_runs", 0) == len(runs):
                crashes.append(deltas)
                continue
            points.append((deltas, value["summary"].get("deltas_per_s", {})))
        xs, ys, err = _series(points)
        colour = COLOURS.get(label)
        if xs:
            ax.errorbar(xs, ys, yerr=err, fmt="-o", color=colour, capsize=3, label=label)
            drawn = True
        if crashes:
            floor = min(ys) if ys else 1000.0
            ax.scatter(
                crashes,
                [floor / 2] * len(crashes),
                marker="x",
                s=80,
                color=colour,
                label=f"{label}: crashed (no agent_end)",
            )
            drawn = True
    return _finish_axes(
        fig,
        ax,
        out,
        drawn=drawn,
        title="Stream throughput against reply length (RPC, full updates)",
        xlabel="reply length: text deltas of 4 characters (unpaced mock)",
        ylabel="deltas/s, first → last delta read",
    )


def resume_vs_size(agents: dict[str, Results], out: Path) -> Path | None:
    """Start → first ``get_state`` against the resumed file's size."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    for label, results in agents.items():
        sizes = results.get("workloads", {}).get("resume", {}).get("sizes", {})
        points = [
            (
                float((value.get("session_file") or {}).get("bytes", 0)) / 1e6,
                value["summary"].get("get_state_ms", {}),
            )
            for value in sizes.values()
            if "summary" in value
        ]
        xs, ys, err = _series(points)
        if xs:
            ax.errorbar(
                xs, ys, yerr=err, fmt="-o", color=COLOURS.get(label), capsize=3, label=label
            )
            drawn = True
    return _finish_axes(
        fig,
        ax,
        out,
        drawn=drawn,
        title="Resume time against session file size",
        xlabel="session file, MB",
        ylabel="ms from spawn to the first get_state response",
        log_y=False,
    )


def daemon_latency(results: Results, out: Path) -> Path | None:
    """p50 and p99 event latency against the number of sessions streaming at once."""
    steps = results.get("workloads", {}).get("daemon_latency", {}).get("steps", [])
    steps = [s for s in steps if s.get("latency_ms", {}).get("n")]
    if not steps:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [s["streams"] for s in steps]
    for key, style in (("median", "-o"), ("p99", "--s"), ("max", ":v")):
        ax.plot(xs, [s["latency_ms"][key] for s in steps], style, label=f"pitrio: {key}")
    meta = results.get("meta_by_workload", {}).get("daemon_latency") or results.get("meta", {})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(
        f"sessions streaming at once ({meta.get('chunks')} chunks each, "
        f"{float(meta.get('delay_s', 0)) * 1000:g} ms apart)"
    )
    ax.set_ylabel("chunk handed to stream → frame at client, ms")
    return _finish(fig, ax, out, "Daemon event latency against concurrent sessions")


def daemon_load(results: Results, out: Path) -> Path | None:
    """``bench/daemon_load.py``: latency p50/p99 and the daemon's CPU against the sessions
    streaming, clients in other processes; one line per daemon variant measured."""
    steps = results.get("workloads", {}).get("daemon_load", {}).get("steps", [])
    steps = [s for s in steps if s.get("latency_ms", {}).get("n")]
    if not steps:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    cpu = ax.twinx()
    variants = list(dict.fromkeys(s.get("variant", "default") for s in steps))
    for variant in variants:
        mine = sorted(
            (s for s in steps if s.get("variant", "default") == variant),
            key=lambda s: s["sessions"],
        )
        xs = [s["sessions"] for s in mine]
        name = "" if len(variants) == 1 else f"{variant}: "
        for key, style in (("median", "-o"), ("p99", "--s")):
            ax.plot(xs, [s["latency_ms"][key] for s in mine], style, label=f"{name}latency {key}")
        cpu.plot(xs, [s["daemon_cpu_share"] * 100 for s in mine], ":x", alpha=0.6)
    ax.axhline(100, color="grey", linewidth=0.8, linestyle=":", label="p99 target 100 ms")
    cpu.set_ylabel("daemon CPU, % of one core (dotted)")
    meta = results.get("meta_by_workload", {}).get("daemon_load") or results.get("meta", {})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"sessions, each streaming {meta.get('rate', 50):g} chunks/s between prompts")
    ax.set_ylabel("chunk handed off → frame read by client, ms")
    return _finish(fig, ax, out, "Daemon under load from separate client processes")


def draw_all(pi: Results | None, pitrio: Results, charts: Path = CHARTS) -> dict[str, Path]:
    """Every chart the results allow; the name of each chart → its file."""
    agents = {"pi": pi, "pitrio": pitrio} if pi is not None else {"pitrio": pitrio}
    jobs: dict[str, Callable[[], Path | None]] = {
        "per-turn overhead vs session length": lambda: per_turn_vs_length(
            agents, charts / "per-turn-vs-session-length.png"
        ),
        "stream throughput vs reply length": lambda: stream_throughput(
            agents, charts / "stream-throughput-vs-reply-length.png"
        ),
        "resume time vs file size": lambda: resume_vs_size(
            agents, charts / "resume-time-vs-file-size.png"
        ),
        "daemon event latency vs concurrent sessions": lambda: daemon_latency(
            pitrio, charts / "daemon-latency-vs-sessions.png"
        ),
        "daemon under load from client processes": lambda: daemon_load(
            pitrio, charts / "daemon-load-vs-sessions.png"
        ),
    }
    drawn: dict[str, Path] = {}
    for name, job in jobs.items():
        path = job()
        if path is not None:
            drawn[name] = path
    return drawn


def main() -> int:
    """Redraw every chart from ``bench/results/pi.json`` and ``pitrio.json``."""
    pi_path = RESULTS / "pi.json"
    pi = json.loads(pi_path.read_text()) if pi_path.exists() else None
    pitrio = json.loads((RESULTS / "pitrio.json").read_text())
    for name, path in draw_all(pi, pitrio).items():
        print(f"{name}: {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
