"""Per-turn overhead against session length: the same few turns on sessions of 1 to 10,000 turns.

The shared harness's ``turns50`` workload starts every session empty, so it cannot show whether
a turn's cost grows with the session. This driver reuses the harness's pieces (its mock LLM,
sandboxes, agent process wrapper and synthetic pi v3 session files, imported from
``../shared/tools/bench_rpc.py``) and, for each size N:

1. writes a session file of N turns (every fifth with a bash tool call, as ``resume`` does);
2. starts the agent with ``--session FILE`` and waits for its first ``get_state``;
3. sends ``--warmup`` prompts that are not counted (the first turn of a process pays for
   connections and lazy imports), then ``--turns`` timed prompts, each answered by the mock
   with one delta and a fixed usage of 1,000 prompt tokens (so no agent compacts).

Per turn it records prompt written → ``agent_end`` read (the harness's turn), the part the mock
spent serving the request, the request's size, and the agent's CPU per timed turn. The model
request of a long session is big (the whole context travels every turn, for both agents), so
the mock's share and the transfer grow with N for any agent; ``agent_ms`` (turn minus mock
server time) is what the agent itself adds.

    .venv/bin/python bench/session_length.py --label pitrio --out bench/results/raw/x.json
    PI_CLI=... .venv/bin/python bench/session_length.py --label pi --out ...

``bench/side_by_side.py`` runs it for both agents. Not part of the test run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = ROOT.parent / "shared" / "tools"
PITRIO = ROOT / ".venv" / "bin" / "pitrio"
PITRIO_CMD = f"env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
PI_CMD = "node {pi_cli} --mode rpc"
SIZES = [1, 10, 100, 1000, 10000]


def _harness_module() -> Any:
    """``bench_rpc`` from the shared tools (a script folder, not a package)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module("bench_rpc")


def measure_size(harness: Any, tools: Any, size: int, warmup: int, turns: int) -> dict[str, Any]:
    """Start the agent on an N-turn session and time ``turns`` prompts after ``warmup``."""
    usage = {"prompt_tokens": 1000, "completion_tokens": 1}
    harness.mock.reset(default=tools.text_spec(1, "ok", usage=usage))
    sandbox = harness.sandbox(f"length{size}")
    session = sandbox.root / "session.jsonl"
    info = harness.make_session_file(session, sandbox.work, size)
    agent, startup = harness.start_ready(sandbox, ["--session", str(session)], timeout=180.0)
    try:
        for index in range(warmup):
            harness.prompt_turn(agent, f"warm-up {index + 1}", 120.0)
        since = len(harness.mock.log())
        cpu_before = agent.cpu_seconds()
        timed = [harness.prompt_turn(agent, f"turn {i + 1}", 120.0) for i in range(turns)]
        cpu_after = agent.cpu_seconds()
        log = harness.mock.log(since)
        mem = agent.mem_stats()
    finally:
        code = agent.close()
    rows: list[dict[str, float]] = []
    for index, turn in enumerate(timed):
        total = turn["t_agent_end"] - turn["t_send"]
        row = {"turn_ms": total * 1000}
        if len(log) == len(timed):
            request = log[index]
            server = request["t_done"] - request["t_recv"]
            row["mock_ms"] = server * 1000
            row["agent_ms"] = (total - server) * 1000
            row["pre_llm_ms"] = (request["t_body"] - turn["t_send"]) * 1000
            row["request_mb"] = request["body_bytes"] / 1e6
        rows.append(row)
    keys = ("turn_ms", "agent_ms", "mock_ms", "pre_llm_ms", "request_mb")
    result: dict[str, Any] = {
        "turns_in_file": size,
        "file_mb": round(session.stat().st_size / 1e6, 2),
        "entries": info.get("entries"),
        "startup_ms": round(startup * 1000, 1),
        "cpu_ms_per_turn": round((cpu_after - cpu_before) * 1000 / max(1, turns), 2),
        "exit_code": code,
        "turns": rows,
        # The harness's own summary (n, median, min, max, mean), as its workloads report.
        "summary": {k: tools.summarize([r[k] for r in rows if k in r]) for k in keys},
        **mem,
    }
    return result


def main(argv: list[str] | None = None) -> int:
    """Measure every size for one agent and write the results as JSON."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--label", default="pitrio", help="pi, pitrio, or any name")
    parser.add_argument("--agent-cmd", help="default: pitrio's, or pi's for --label pi")
    parser.add_argument("--pi-cli", help="pi's dist/cli.js (else $PI_CLI)")
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    tools = _harness_module()
    command = args.agent_cmd or (PI_CMD if args.label == "pi" else PITRIO_CMD)
    options = SimpleNamespace(
        tmp_root=None,
        pi_cli=args.pi_cli,
        agent_cmd=command,
        label=args.label,
        transcripts="",
        pass_env=[],
        keep_tmp=False,
    )
    harness = tools.Harness(options)
    sizes: dict[str, Any] = {}
    started = time.monotonic()
    try:
        for size in args.sizes:
            try:
                sizes[str(size)] = measure_size(harness, tools, size, args.warmup, args.turns)
            except tools.AgentError as exc:
                sizes[str(size)] = {"error": str(exc)}
            summary = sizes[str(size)].get("summary", {}).get("turn_ms", {})
            print(
                f"  {args.label} {size} turns: "
                + (f"{summary['median']:.2f} ms/turn" if summary.get("n") else "failed"),
                file=sys.stderr,
                flush=True,
            )
        meta = dict(harness.results["meta"])
    finally:
        harness.close()
    meta["elapsed_s"] = round(time.monotonic() - started, 1)
    meta.update(warmup=args.warmup, timed_turns=args.turns, loadavg_end=os.getloadavg())
    out = {"meta": meta, "workloads": {"session_length": {"sizes": sizes}}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(harness.sanitize(json.dumps(out, indent=1)) + "\n")
    return 0 if all("error" not in v for v in sizes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
