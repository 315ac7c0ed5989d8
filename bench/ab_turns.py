"""Two builds (or two agents) compared turn by turn: blocks of turns, A B B A, on one mock LLM.

Whole runs taking turns (``bench/interleave.py``) still differ by about ±10% from one pair to
the next on this VM, whose speed drifts in phases of seconds to minutes, so a change worth
2-5% cannot be seen that way. This driver starts both agents at once on the harness's mock
LLM (``../shared/tools/bench_rpc.py``: its sandboxes, agent wrapper and timing of a turn) and
sends prompts in blocks of ``--block`` turns, in the order A B B A, so both meet the same
phases. Each turn of A is paired with B's turn at the same place of the same round (the first
two turns of a block, after the other agent ran, are left out) and the report gives the
median of B's time over A's. The same build against itself gives 0.97-1.00 here.

    .venv/bin/python -m bench.ab_turns --a-src /tmp/before --b-src . --turns 100
    .venv/bin/python -m bench.ab_turns --a-src /tmp/before --b-src . --session-turns 10000

``--a-session-turns``/``--b-session-turns`` give the two sides different lengths: the same
build on a fresh and on a long session, turn by turn, is the flatness of a turn's cost
without the phases of this VM in the way.

``--a-src``/``--b-src`` name a directory holding a ``pitrio`` package (e.g. ``git archive``
of a commit) run with the project's interpreter; ``--a-cmd``/``--b-cmd`` take any agent
command instead (``{agent_dir}`` is filled in, as the harness does). ``--session-turns N``
resumes both agents on copies of one synthetic N-turn session (``bench/session_length.py``'s
files); the report then also gives the agent's part of a turn, the turn minus the mock's own
time. Absolute times are higher than the harness's, as two processes take turns in the CPU
caches; only the ratio is the result. Not part of the test run.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.session_length import ROOT, _harness_module

PYTHON = ROOT / ".venv" / "bin" / "python"
WORKLOADS = ("turns50", "bash", "read")


@dataclass
class Side:
    """One agent of the comparison and what its timed turns took."""

    name: str
    command: str
    agent: Any = None
    turns: list[float] = field(default_factory=list)  # seconds, prompt -> agent_end
    parts: list[float] = field(default_factory=list)  # the same minus the mock's serving time
    cpu_start: float = 0.0
    cpu_per_turn: float = 0.0


def _source_command(source: str) -> str:
    path = Path(source).resolve()
    if not (path / "pitrio" / "__init__.py").is_file():
        raise SystemExit(f"{path} holds no pitrio package")
    return (
        f"env PYTHONPATH={path} PITRIO_AGENT_DIR={{agent_dir}} {PYTHON} "
        "-m pitrio.transports.cli --mode rpc"
    )


def _mock_config(tools: Any, workload: str) -> tuple[dict[str, Any], str]:
    usage = {"prompt_tokens": 1000, "completion_tokens": 1}
    if workload == "turns50":
        return {"default": tools.text_spec(1, "ok", usage=usage)}, "turn {i}: reply with ok"
    name, arguments = {
        "bash": ("bash", {"command": "echo hi"}),
        "read": ("read", {"path": "hello.txt"}),
    }[workload]
    rule = {
        "if": {"last_role": "user"},
        "then": {"kind": "tool_call", "name": name, "arguments": arguments},
    }
    config = {"default": tools.text_spec(1, "done", usage=usage), "rules": [rule]}
    return config, "turn {i}: use the tool"


def compare(args: argparse.Namespace) -> dict[str, Any]:
    """Run the comparison; returns the figures the report prints."""
    tools = _harness_module()
    sides = [Side("A", args.a_cmd or _source_command(args.a_src))]
    sides.append(Side("B", args.b_cmd or _source_command(args.b_src)))
    options = SimpleNamespace(
        tmp_root=None,
        pi_cli=args.pi_cli,
        agent_cmd=sides[0].command,
        label="ab",
        transcripts="",
        pass_env=[],
        keep_tmp=False,
    )
    harness = tools.Harness(options)
    requests_per_turn = 1 if args.workload == "turns50" else 2
    try:
        config, prompt = _mock_config(tools, args.workload)
        harness.mock.reset(**config)
        sessions: dict[int, Path] = {}
        for side, turns in zip(sides, (args.a_session_turns, args.b_session_turns), strict=True):
            harness.agent_cmd_template = side.command
            sandbox = harness.sandbox(f"ab-{side.name}")
            extra: list[str] = []
            if turns:
                copy = sandbox.root / "session.jsonl"
                if turns not in sessions:
                    harness.make_session_file(copy, sandbox.work, turns)
                    sessions[turns] = copy
                else:
                    shutil.copyfile(sessions[turns], copy)
                extra = ["--session", str(copy)]
            side.agent, _ = harness.start_ready(sandbox, extra, timeout=180.0)
        for side in sides:
            for index in range(args.warmup):
                harness.prompt_turn(side.agent, f"warm-up {index + 1}", 120.0)
            side.cpu_start = side.agent.cpu_seconds()
        since = len(harness.mock.log())
        order: list[tuple[Side, bool, float]] = []
        for start in range(0, args.turns, args.block):
            for side in (sides[0], sides[1], sides[1], sides[0]):
                for offset in range(args.block):
                    text = prompt.format(i=start + offset + 1)
                    turn = harness.prompt_turn(side.agent, text, 120.0)
                    order.append((side, offset >= 2, turn["t_agent_end"] - turn["t_send"]))
        for side in sides:
            timed = sum(1 for entry in order if entry[0] is side)
            side.cpu_per_turn = (side.agent.cpu_seconds() - side.cpu_start) / timed
        log = harness.mock.log(since)
    finally:
        for side in sides:
            if side.agent is not None:
                side.agent.close()
        harness.close()
    aligned = len(log) == requests_per_turn * len(order)
    for index, (side, counted, total) in enumerate(order):
        if not counted:
            continue
        side.turns.append(total)
        if aligned:
            requests = log[index * requests_per_turn : (index + 1) * requests_per_turn]
            side.parts.append(total - sum(r["t_done"] - r["t_recv"] for r in requests))
    a, b = sides
    result: dict[str, Any] = {
        "pairs": len(a.turns),
        "a_ms": statistics.median(a.turns) * 1000,
        "b_ms": statistics.median(b.turns) * 1000,
        "ratio": statistics.median(y / x for x, y in zip(a.turns, b.turns, strict=True)),
        "a_cpu_ms": a.cpu_per_turn * 1000,
        "b_cpu_ms": b.cpu_per_turn * 1000,
    }
    if aligned:
        result["a_part_ms"] = statistics.median(a.parts) * 1000
        result["b_part_ms"] = statistics.median(b.parts) * 1000
        result["part_ratio"] = statistics.median(
            y / x for x, y in zip(a.parts, b.parts, strict=True)
        )
    return result


def main(argv: list[str] | None = None) -> int:
    """Parse the options, compare, print the figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    for name in ("a", "b"):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument(f"--{name}-src", help="a directory holding a pitrio package")
        group.add_argument(f"--{name}-cmd", help="an agent command ({agent_dir} filled in)")
    parser.add_argument("--workload", choices=WORKLOADS, default="turns50")
    parser.add_argument("--turns", type=int, default=100, help="per agent, in blocks")
    parser.add_argument("--block", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--session-turns", type=int, default=0)
    parser.add_argument(
        "--a-session-turns", type=int, help="A's session length (default: --session-turns)"
    )
    parser.add_argument(
        "--b-session-turns", type=int, help="B's session length (default: --session-turns)"
    )
    parser.add_argument("--pi-cli", help="pi's dist/cli.js, for a command naming {pi_cli}")
    args = parser.parse_args(argv)
    for name in ("a_session_turns", "b_session_turns"):
        if getattr(args, name) is None:
            setattr(args, name, args.session_turns)
    if args.block < 3:
        parser.error("--block must be at least 3 (two turns of each block are not counted)")
    result = compare(args)
    print(
        f"{result['pairs']} pairs: A {result['a_ms']:.3f} ms, B {result['b_ms']:.3f} ms, "
        f"B/A {result['ratio']:.3f}; CPU per turn A {result['a_cpu_ms']:.2f} ms, "
        f"B {result['b_cpu_ms']:.2f} ms"
    )
    if "part_ratio" in result:
        print(
            f"the agent's part (turn minus the mock's serving time): A {result['a_part_ms']:.3f}"
            f" ms, B {result['b_part_ms']:.3f} ms, B/A {result['part_ratio']:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
