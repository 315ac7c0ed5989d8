"""Interleaved long-stream runs: pi 1.6.0, pitrio before and pitrio after, taking turns.

    git archive REV pitrio | tar -x -C /tmp/before
    .venv/bin/python -m bench.stream_ab --before /tmp/before --rounds 5 --stream 20000x4 \\
        --pi-cli "$PI/node_modules/@earendil-works/pi-coding-agent/dist/cli.js"

(``$PI``: ``~/.cache/pitrio-interop/pi-1.6.0`` once the interop tests installed it.)

Each round runs one stream of the shared harness (``bench_rpc.py -w stream --runs 1``) for
each agent in turn, so a phase of this shared machine hits all of them; ``--before DIR`` is an
older ``pitrio`` package run with this checkout's interpreter (``PYTHONPATH``). Prints each
run's total time, the agent's CPU (from ``/proc``, as the harness reads it) and stdout size,
then the medians and the ratios to pi.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.side_by_side import PITRIO, TOOLS, harness_argv, use_node_beside, use_pi_bin

FIELDS = ("total_ms", "cpu_s", "stdout_mb")


def one_run(label: str, cmd: str, stream: str, out: Path) -> dict[str, float]:
    """One stream of ``stream`` (``NxM``) for one agent; the harness's median row."""
    argv = harness_argv(label, cmd, "stream", ["--stream", stream, "--runs", "1"], out)
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    row = result["workloads"]["stream"]["sizes"][stream]["summary"]
    return {field: float(row[field]["median"]) for field in FIELDS if row.get(field)}


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pi-cli", type=Path)
    parser.add_argument("--before", type=Path, help="an older pitrio package's parent dir")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stream", default="20000x4")
    args = parser.parse_args()
    agents: list[tuple[str, str]] = []
    if args.pi_cli:
        use_node_beside(args.pi_cli)
        agents.append(("pi", f"--pi-cli={use_pi_bin(args.pi_cli)}"))
    if args.before:
        agents.append(
            (
                "before",
                f"env PYTHONPATH={args.before} PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc",
            )
        )
    agents.append(("after", f"env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"))
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in agents}
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.rounds):
            for label, cmd in agents:
                row = one_run(label, cmd, args.stream, Path(tmp) / f"{label}-{index}.json")
                runs[label].append(row)
                shown = "  ".join(f"{k} {v:.3f}" for k, v in row.items())
                print(f"round {index + 1} {label:7} {shown}", file=sys.stderr, flush=True)
    medians = {
        label: {f: statistics.median(r[f] for r in rows if f in r) for f in FIELDS}
        for label, rows in runs.items()
        if rows
    }
    print(json.dumps({"tools": str(TOOLS), "stream": args.stream, "medians": medians}, indent=1))
    if "pi" in medians:
        for label in medians:
            ratios = {f: medians[label][f] / medians["pi"][f] for f in ("total_ms", "cpu_s")}
            print(f"{label}: total {ratios['total_ms']:.2f} of pi, CPU {ratios['cpu_s']:.2f} of pi")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
