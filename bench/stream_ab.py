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

``--every-delta`` runs both pitrio trees with subscriber buffers that never coalesce (a
``sitecustomize`` on ``PYTHONPATH`` lifts their count and byte bounds): how much a buffer
merges depends on how far pitrio's own writer falls behind its pump, so it moves with the
code being measured; with it off, every run of either tree writes all the deltas, the same
bytes, and the figures compare the same work.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import ab_agents
from bench.side_by_side import TOOLS, harness_argv

FIELDS = ("total_ms", "first_delta_ms", "cpu_s", "stdout_mb")

EVERY_DELTA = """\
from pitrio.actors.session import fanout

_init = fanout.SubscriberBuffer.__init__


def _never_merging(self, capacity, max_bytes=0):
    _init(self, 1 << 30, 1 << 60)


fanout.SubscriberBuffer.__init__ = _never_merging
"""
"""The ``sitecustomize`` of ``--every-delta`` (bench only: a client that holds every event)."""


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
    ab_agents.add_arguments(parser)
    parser.add_argument("--every-delta", action="store_true", help="no coalescing (see above)")
    args = parser.parse_args()
    site = Path(tempfile.mkdtemp(prefix="stream-ab-site-"))
    (site / "sitecustomize.py").write_text(EVERY_DELTA)
    agents = ab_agents.agents(
        args, lambda pi: f"--pi-cli={pi}", pythonpath=str(site) if args.every_delta else ""
    )
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
