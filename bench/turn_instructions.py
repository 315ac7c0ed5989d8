"""Instructions per turn of one or more builds, counted by valgrind's callgrind.

Wall time and CPU seconds on this shared VM move by several per cent from one run to the next,
so a change worth 1-3% of a turn cannot be told from noise with ``bench/ab_turns.py`` alone.
Instruction counts barely move (the same build twice: within ±0.5%). For each build this
starts the agent under ``valgrind --tool=callgrind --instr-atstart=no`` on the harness's mock
LLM (``../shared/tools/bench_rpc.py``), sends ``--warmup`` prompts uncounted, switches the
counting on (``callgrind_control -i on``), sends ``--turns`` prompts of the workload, dumps
the counts and prints the instructions per turn. The agent's own process only: the mock, the
kernel's side of system calls and waiting are not counted, so this is the CPU work a turn
costs, not its latency. Batching of events still depends a little on timing, hence the ±0.5%.

    .venv/bin/python -m bench.turn_instructions /tmp/before /tmp/after --turns 100

Each argument is a directory holding a ``pitrio`` package (e.g. ``git archive`` of a commit).
A build takes about a minute. Not part of the test run.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from bench.ab_turns import PYTHON, WORKLOADS, _mock_config
from bench.session_length import _harness_module


def _total(dump: Path) -> int:
    out = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    match = re.search(r"^([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", out, re.M) or re.search(
        r"^([\d,]+)\s+PROGRAM TOTALS", out, re.M
    )
    if match is None:
        raise SystemExit(f"{dump}: no totals in callgrind_annotate's output")
    return int(match.group(1).replace(",", ""))


def measure(source: Path, workload: str, turns: int, warmup: int, work: Path) -> float:
    """Instructions per timed turn of the build in ``source``."""
    tools = _harness_module()
    out = work / f"callgrind-{source.name}-{workload}.out"
    prefix = work / "vgdb"
    command = (
        f"env PYTHONPATH={source} PITRIO_AGENT_DIR={{agent_dir}} valgrind --tool=callgrind "
        f"--instr-atstart=no --vgdb-prefix={prefix} --callgrind-out-file={out} "
        f"{PYTHON} -m pitrio.transports.cli --mode rpc"
    )
    options = SimpleNamespace(
        tmp_root=None,
        pi_cli=None,
        agent_cmd=command,
        label="instructions",
        transcripts="",
        pass_env=[],
        keep_tmp=False,
    )
    harness = tools.Harness(options)
    control = ["callgrind_control", f"--vgdb-prefix={prefix}"]
    try:
        config, prompt = _mock_config(tools, workload)
        harness.mock.reset(**config)
        agent, _ = harness.start_ready(harness.sandbox("instructions"), [], timeout=600.0)
        for index in range(warmup):
            harness.prompt_turn(agent, f"warm-up {index + 1}", 600.0)
        subprocess.run([*control, "-i", "on", str(agent.pid)], check=True, capture_output=True)
        for index in range(turns):
            harness.prompt_turn(agent, prompt.format(i=index + 1), 600.0)
        subprocess.run([*control, "-d", str(agent.pid)], check=True, capture_output=True)
        agent.close()
    finally:
        harness.close()
    dumps = sorted(out.parent.glob(out.name + ".*"))
    if not dumps:
        raise SystemExit(f"{source}: callgrind wrote no dump")
    return _total(dumps[0]) / turns


def main(argv: list[str] | None = None) -> int:
    """Measure each build given, print instructions per turn."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sources", nargs="+", type=Path, help="directories holding pitrio")
    parser.add_argument("--workload", choices=WORKLOADS, default="turns50")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pitrio-instructions-") as work:
        for source in args.sources:
            source = source.resolve()
            if not (source / "pitrio" / "__init__.py").is_file():
                raise SystemExit(f"{source} holds no pitrio package")
            started = time.monotonic()
            per_turn = measure(source, args.workload, args.turns, args.warmup, Path(work))
            print(
                f"{source} {args.workload}: {per_turn / 1e6:.3f} M instructions a turn "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
