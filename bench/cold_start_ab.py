"""Cold start to the first ``get_state`` answer, several start commands taking turns.

    V=$PWD/.venv/bin
    nice -n 19 $V/python -m bench.cold_start_ab --rounds 12 --config \\
        "B=$V/pitrio --mode rpc" \\
        "A=env PYTHONPATH=/tmp/base $V/python -m pitrio.transports.cli --mode rpc" \\
        "trio=$V/python -c 'import trio'" "pass=$V/python -c pass"

Each command runs in a fresh agent directory (``PITRIO_AGENT_DIR`` and ``PI_CODING_AGENT_DIR``),
home and working directory, is sent one ``get_state`` line, and is timed from ``Popen`` to its
first output line (for a command that prints nothing, to its end); its CPU (user + system) is
read from ``wait4``. Commands run in the fresh working directory: give absolute paths. One
that exits with a failure stops the run. The order alternates each round (forwards, then
backwards), so every command meets the same phases of a loaded machine.
``PYTHONDONTWRITEBYTECODE`` is dropped from the environment: users have their bytecode (and
the attrs method cache beside it).
``--config`` writes the harness's ``models.json`` and ``settings.json`` (a provider of its own,
made the default) into each agent directory, as ``bench_rpc.py`` does.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "mock-key",
            "models": [{"id": "mock-model", "contextWindow": 128000}],
        }
    }
}
SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}


def sandbox(prefix: str, config: bool) -> tuple[Path, dict[str, str]]:
    """A fresh directory with ``agent``, ``work`` and ``home`` (the mock's models and settings
    in ``agent`` with ``config``), and the environment of an agent started in it (no
    ``PITRIO_`` variable of the caller's). The caller removes the directory."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    for name in ("agent", "work", "home"):
        (root / name).mkdir()
    if config:
        (root / "agent" / "models.json").write_text(json.dumps(MODELS))
        (root / "agent" / "settings.json").write_text(json.dumps(SETTINGS))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PITRIO_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        PITRIO_AGENT_DIR=str(root / "agent"),
        PI_CODING_AGENT_DIR=str(root / "agent"),
        HOME=str(root / "home"),
    )
    return root, env


def run_once(command: str, config: bool) -> tuple[float, float]:
    """One start: (milliseconds to the first output line, CPU seconds of the process)."""
    root, env = sandbox("cold-ab-", config)
    try:
        start = time.perf_counter()
        process = subprocess.Popen(
            command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=root / "work",
            env=env,
        )
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(b'{"type":"get_state","id":"1"}\n')
        process.stdin.flush()
        process.stdout.readline()
        elapsed = time.perf_counter() - start
        process.stdin.close()
        _, status, usage = os.wait4(process.pid, 0)
        process.stdout.close()
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{command!r} failed (exit status {status}); absolute paths?")
        return elapsed * 1000, usage.ru_utime + usage.ru_stime
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Run the commands in turns and print each one's median and minimum wall and CPU."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commands", nargs="+", help="NAME=shell command")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--config", action="store_true", help="the harness's config files")
    args = parser.parse_args()
    commands = dict(spec.partition("=")[::2] for spec in args.commands)
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    load_before = os.getloadavg()
    for round_ in range(args.warmup + args.rounds):
        order = list(commands) if round_ % 2 == 0 else list(reversed(commands))
        for name in order:
            measured = run_once(commands[name], args.config)
            if round_ >= args.warmup:
                results[name].append(measured)
    load_after = os.getloadavg()
    print(
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}; "
        f"{args.rounds} rounds, config={args.config}"
    )
    print("| command | wall median ms (min-max) | CPU median ms (min-max) |")
    print("|---|---|---|")
    for name, runs in results.items():
        wall = [w for w, _ in runs]
        cpu = [c * 1000 for _, c in runs]
        print(
            f"| {name} | {statistics.median(wall):.0f} ({min(wall):.0f}-{max(wall):.0f}) "
            f"| {statistics.median(cpu):.0f} ({min(cpu):.0f}-{max(cpu):.0f}) |"
        )


if __name__ == "__main__":
    main()
