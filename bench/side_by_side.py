"""pitrio against pi 0.73.1 on the shared RPC harness, workload by workload (issue 7).

    PI_CLI=<prefix>/node_modules/@mariozechner/pi-coding-agent/dist/cli.js \\
        python3 bench/side_by_side.py

Runs ``../shared/tools/bench_rpc.py`` once per workload (and per stream size) for pi, then at
once for pitrio, so both see the same machine state; every invocation stays well under ten
minutes. The raw result of each invocation goes to ``bench/results/raw/``; the merged results
to ``bench/results/pi.json`` and ``bench/results/pitrio.json`` (what ``report.py`` renders),
and the ratios against the issue's targets to ``bench/results/ratios.md``. Transcripts are
not written (``--transcripts ''``). ``--extra-label`` adds a pitrio configuration measured the
same way (e.g. ``--extra-label fsync-batch`` writes a project ``.pitrio/settings.json`` with
``{"session": {"fsync": "batch"}}`` first; results in ``pitrio-fsync-batch.json``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT.parent / "shared" / "tools"
RESULTS = ROOT / "bench" / "results"
PITRIO = ROOT / ".venv" / "bin" / "pitrio"

PITRIO_CMD = f"env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
EXTRA_CMDS = {
    # The project settings file sits in the sandbox's work dir (the agent's cwd); braces are
    # doubled for the harness's placeholder formatting.
    "fsync-batch": "sh -c "
    + shlex.quote(
        'mkdir -p .pitrio && printf \'%s\' \'{{"session": {{"fsync": "batch"}}}}\' '
        f"> .pitrio/settings.json && exec env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
        ' "$@"'
    )
    + " sh",  # $0; what the harness appends (``--session FILE``) becomes "$@"
}

STREAMS = ["2000x4", "10000x4", "20000x1", "20000x4", "20000x4@0.001"]
WORKLOADS = ["cold_start", "turns50", "tool_bash", "tool_read", "stream", "resume"]


def run_harness(label: str, cmd: str, workload: str, extra: list[str], out: Path) -> None:
    argv = [sys.executable, str(TOOLS / "bench_rpc.py"), "--label", label, "--transcripts", ""]
    argv += ["--out", str(out), "-w", workload, *extra]
    if cmd.startswith("--pi-cli="):
        if cmd != "--pi-cli=":
            argv.append(cmd)  # else $PI_CLI
    else:
        argv += ["--agent-cmd", cmd]
    started = time.monotonic()
    print(f"== {label} {workload} {' '.join(extra)}", file=sys.stderr, flush=True)
    subprocess.run(argv, check=False, cwd=ROOT)
    print(f"   ({time.monotonic() - started:.0f} s)", file=sys.stderr, flush=True)


def merge(parts: list[Path]) -> dict[str, Any]:
    merged: dict[str, Any] = {"meta": {}, "workloads": {}}
    for part in parts:
        if not part.exists():
            continue
        data = json.loads(part.read_text())
        meta = data.get("meta", {})
        if not merged["meta"]:
            merged["meta"] = dict(meta)
        merged["meta"]["loadavg_end"] = meta.get("loadavg_end")
        for name, value in data.get("workloads", {}).items():
            if name == "stream" and "stream" in merged["workloads"]:
                merged["workloads"]["stream"]["sizes"].update(value.get("sizes", {}))
            else:
                merged["workloads"][name] = value
    return merged


def _median(summary: dict[str, Any] | None) -> float | None:
    if not summary or not summary.get("n"):
        return None
    return float(summary["median"])


def ratios(pi: dict[str, Any], pitrio: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(target, pi, pitrio, ratio pitrio/pi, verdict) rows."""
    rows: list[tuple[str, str, str, str, str]] = []
    a, b = pi["workloads"], pitrio["workloads"]

    def row(name: str, p: float | None, q: float | None, goal: str, unit: str) -> None:
        if p is None or q is None:
            rows.append((name, _fmt(p, unit), _fmt(q, unit), "-", "not measured"))
            return
        ratio = q / p
        if not goal:
            rows.append((name, _fmt(p, unit), _fmt(q, unit), f"{ratio:.2f} (no target)", "-"))
            return
        bound = float(goal[2:])
        met = ratio <= bound if goal.startswith("<=") else ratio >= bound
        rows.append(
            (
                name,
                _fmt(p, unit),
                _fmt(q, unit),
                f"{ratio:.2f} (target {goal})",
                "met" if met else "NOT met",
            )
        )

    if "cold_start" in a and "cold_start" in b:
        row(
            "cold start → first get_state, ms",
            _median(a["cold_start"]["summary"]["startup_ms"]),
            _median(b["cold_start"]["summary"]["startup_ms"]),
            "<=0.3",
            " ms",
        )
    for key, name in (
        ("turns50", "per-turn overhead (turns50), ms/turn"),
        ("tool_bash", "bash tool turn, ms/turn"),
        ("tool_read", "read tool turn, ms/turn"),
    ):
        if key in a and key in b:
            row(
                name,
                _median(a[key]["summary"]["turn_ms"]),
                _median(b[key]["summary"]["turn_ms"]),
                "<=0.5",
                " ms",
            )
    sa, sb = a.get("stream", {}).get("sizes", {}), b.get("stream", {}).get("sizes", {})
    for spec in STREAMS:
        if spec not in sa or spec not in sb:
            continue
        pa, pb = sa[spec], sb[spec]
        name = f"stream {spec}: deltas/s"
        if pa.get("crashed_runs"):
            done = [r for r in pb["runs"] if not r.get("crashed")]
            got = [r["deltas_received"] for r in pb["runs"]]
            rows.append(
                (
                    name,
                    f"CRASH {pa['crashed_runs']}/{len(pa['runs'])} runs",
                    f"{_fmt(_median(pb['summary']['deltas_per_s']), '')} "
                    f"({len(done)}/{len(pb['runs'])} runs complete, "
                    f"{min(got)}-{max(got)} delta events)",
                    "- (target: completes)",
                    "met" if len(done) == len(pb["runs"]) else "NOT met",
                )
            )
            continue
        goal = ">=2" if "@" not in spec else ""  # a paced stream measures the mock, not the agent
        row(
            name,
            _median(pa["summary"]["deltas_per_s"]),
            _median(pb["summary"]["deltas_per_s"]),
            goal,
            "",
        )
    ra, rb = a.get("resume", {}).get("sizes", {}), b.get("resume", {}).get("sizes", {})
    for size in ("10", "2000", "20000"):
        if size in ra and size in rb:
            goal = "<=0.5" if size == "20000" else ""
            row(
                f"resume {size} turns → first get_state, ms",
                _median(ra[size]["summary"]["get_state_ms"]),
                _median(rb[size]["summary"]["get_state_ms"]),
                goal,
                " ms",
            )
    return rows


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}{unit}" if value >= 100 else f"{value:.2f}{unit}"


def render(rows: list[tuple[str, str, str, str, str]]) -> str:
    lines = ["| target | pi 0.73.1 | pitrio | pitrio/pi | |", "|---|---|---|---|---|"]
    lines += [f"| {' | '.join(r)} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--pi-cli", help="pi's dist/cli.js (else $PI_CLI)")
    p.add_argument("-w", "--workload", action="append", choices=WORKLOADS, help="default: all")
    p.add_argument("--stream", nargs="+", default=STREAMS)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--skip-pi", action="store_true", help="reuse the raw pi results already there")
    p.add_argument("--skip-pitrio", action="store_true", help="reuse the raw pitrio results")
    p.add_argument("--merge-only", action="store_true", help="only merge the raw results")
    p.add_argument("--extra-label", choices=sorted(EXTRA_CMDS), action="append", default=[])
    p.add_argument("--results", type=Path, default=RESULTS, help="default: bench/results")
    args = p.parse_args()
    results = args.results
    raw = results / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    agents: list[tuple[str, str]] = []
    if not args.skip_pi:
        agents.append(("pi", f"--pi-cli={args.pi_cli or ''}"))
    if not args.skip_pitrio:
        agents.append(("pitrio", PITRIO_CMD))
    agents += [(f"pitrio-{label}", EXTRA_CMDS[label]) for label in args.extra_label]
    runs = ["--runs", str(args.runs)]
    for workload in [] if args.merge_only else args.workload or WORKLOADS:
        jobs: list[tuple[str, list[str]]] = [(workload, runs)]
        if workload == "stream":
            jobs = [(f"stream-{spec}", [*runs, "--stream", spec]) for spec in args.stream]
        for name, extra in jobs:
            for label, cmd in agents:
                run_harness(label, cmd, workload, extra, raw / f"{label}_{name}.json")
    labels = ["pi", "pitrio", *(f"pitrio-{label}" for label in args.extra_label)]
    for label in labels:
        parts = sorted(raw.glob(f"{label}_*.json"), key=lambda part: part.stat().st_mtime)
        parts = [part for part in parts if part.name.split("_", 1)[0] == label]
        (results / f"{label}.json").write_text(json.dumps(merge(parts), indent=1) + "\n")
    pi = json.loads((results / "pi.json").read_text())
    table = ""
    for label in labels[1:]:
        other = json.loads((results / f"{label}.json").read_text())
        table += f"\n{label}:\n\n" + render(ratios(pi, other))
    (results / "ratios.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
