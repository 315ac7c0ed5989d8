"""The cost of starting ``pitrio serve``: wall time from launch to the address line, CPU of the
whole process tree by then (``/proc``) and in all once stopped (``RUSAGE_CHILDREN``), and
each worker's memory (``smaps_rollup``: resident, proportional, shared). Variants take turns
each round (``--variant name='@DIR --workers 2'``: DIR's package copy, as in
:mod:`bench.daemon_load`); medians at the end, as JSON.

    nice -n 19 python -m bench.workers_start --rounds 9 \\
        --variant 'old2=@/tmp/before --workers 2' --variant 'new2=--workers 2'
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.daemon_load import OTHER_SOURCE
from bench.daemon_proc import family

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """User plus system CPU seconds of ``pid`` and every process under it, so far."""
    total = 0
    for member in family(pid):
        try:
            fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def memory(pid: int) -> dict[str, int]:
    """``smaps_rollup``'s resident, proportional, shared and private sizes of ``pid``, in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0])
    return {
        "rss": fields["Rss"],
        "pss": fields["Pss"],
        "shared": fields["Shared_Clean"] + fields["Shared_Dirty"],
        "private": fields["Private_Clean"] + fields["Private_Dirty"],
    }


def one_start(root: Path, extra: list[str], source: Path | None) -> dict[str, Any]:
    """Start, wait for the address line, measure, stop (SIGTERM), measure again."""
    agent, work = root / "agent", root / "work"
    work.mkdir(parents=True)
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent), "HOME": str(root)}
    env["PITRIO_TELEMETRY"] = "0"
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # users have their bytecode
    launcher = [str(Path(sys.executable).with_name("pitrio"))]
    if source is not None:
        launcher = [sys.executable, "-c", OTHER_SOURCE.format(source=str(source))]
        env["PYTHONPATH"] = os.pathsep.join([str(source), *filter(None, [env.get("PYTHONPATH")])])
    argv = [*launcher, "serve", "--port", "0", "--no-auth", "--idle", "0", "--cwd", str(work)]
    argv += ["--log-level", "warning", "--model", "faux/echo", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, cwd=work)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    wall = time.perf_counter() - started
    if "listening on" not in line:
        raise SystemExit(f"the daemon did not start: {line!r}")
    cpu = tree_cpu(process.pid)
    members = family(process.pid)
    workers = [memory(pid) for pid in members[1:] if _is_worker(pid)] or [memory(process.pid)]
    process.send_signal(signal.SIGTERM)
    process.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu_serving": cpu, "cpu_total": total, "workers": workers}


def _is_worker(pid: int) -> bool:
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return name.startswith("pitrio-worker") or b"--worker-slot" in cmdline


def parse_variant(spec: str) -> tuple[str, list[str], Path | None]:
    """``name=[@DIR ]words``."""
    name, _, rest = spec.partition("=")
    words = rest.split()
    source = None
    if words and words[0].startswith("@"):
        source = Path(words.pop(0)[1:])
    return name, words, source


def main() -> None:
    """Run the rounds and print every start and the medians as JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--variant", action="append", required=True)
    args = parser.parse_args()
    variants = [parse_variant(spec) for spec in args.variant]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds + 1):  # round 0 warms the bytecode: not counted
            for name, extra, source in variants:
                result = one_start(Path(tmp) / f"{name}-{round_}", extra, source)
                if round_:
                    runs[name].append(result)
                    print(json.dumps({"variant": name, **result}), file=sys.stderr)
    medians = {
        name: {
            key: round(statistics.median(run[key] for run in results), 3)
            for key in ("wall", "cpu_serving", "cpu_total")
        }
        | {
            f"worker_{key}_kib": statistics.median(
                statistics.mean(worker[key] for worker in run["workers"]) for run in results
            )
            for key in ("rss", "pss", "shared", "private")
        }
        for name, results in runs.items()
    }
    print(json.dumps({"load": os.getloadavg(), "medians": medians}, indent=1))


if __name__ == "__main__":
    main()
