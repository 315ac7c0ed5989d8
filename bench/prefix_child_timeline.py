"""When could a child running pitrio's own code have a resumed session's first request ready?
(issue 38, item 1: "resume 20,000 turns, first turn after").

A budget, measured before building the prepared prefix on the idle core (DESIGN-NOTES,
helper "firstturn3"). Each round, in turns (order reversed every other round):

- **parent**: ``pitrio --mode rpc --session FILE`` (this checkout's console script, with its
  parsing child) on the shared harness's file of ``--turns`` turns; ``get_state`` and
  ``get_messages`` sent together, as ``bench_rpc -w resume`` sends them, then the prompt at
  once. Recorded: the wall time and the process tree's CPU when the ``get_messages`` reply
  is in (when that workload's prompt is sent), the first turn's wall and CPU, and the
  second turn's (what a first turn costs when its encoded prefix is ready and nothing is
  left to decode, the 8.3 MB request still sent);
- **child**: a fresh interpreter (``--child FILE``) doing what such a child must, with pitrio's
  functions: import them, read the file (``read_session``), project the last leaf's branch,
  decode its messages, convert them as the session does (``PrefixConverter``), feed them to
  the Chat Completions builder and pickle its state. Recorded: wall and CPU at each step,
  from the interpreter's start (a child forked before the parent's imports starts no later).

The child is ready in time only if its ``ready`` comes before the parent's ``get_messages``.
Medians as JSON; each run on stderr. Not part of the test run.

    PITRIO_SHARED_DIR=/work/shared nice -n 19 .venv/bin/python bench/prefix_child_timeline.py
"""

from __future__ import annotations

import time

_T0, _C0 = time.monotonic(), time.process_time()

import argparse  # noqa: E402  (the child's clock starts before any import)
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from types import SimpleNamespace  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared") / "tools"


def _mark(marks: dict[str, float], label: str) -> None:
    marks[f"{label}_wall_ms"] = round(1000 * (time.monotonic() - _T0))
    marks[f"{label}_cpu_ms"] = round(1000 * (time.process_time() - _C0))


def child(path: Path) -> dict[str, float]:
    """The child's steps on ``path``, timed from this interpreter's start."""
    import gc
    import pickle

    marks: dict[str, float] = {}
    from pitrio.actors.model_router.providers.openai_compat import compat_of
    from pitrio.actors.model_router.providers.openai_completions_request import ChatMessages
    from pitrio.actors.session_store.projection import Projection
    from pitrio.actors.session_store.storage import read_session
    from pitrio.actors.session_store.tree import SessionTree
    from pitrio.messages.convert import PrefixConverter
    from pitrio.messages.model import Model, ModelCost

    _mark(marks, "imports")
    gc.disable()  # as the store's bulk loads do
    parsed = read_session(path)
    assert parsed is not None
    tree = SessionTree(parsed.header, parsed.entries, new_id=lambda: "x", index=parsed.index)
    stored = Projection(tree.path()).context().messages
    _mark(marks, "read")
    decoded = tuple(stored)
    _mark(marks, "decode")
    converted = PrefixConverter().convert(decoded)
    zero = ModelCost(input=0, output=0, cache_read=0, cache_write=0)
    model = Model(
        id="mock",
        name="mock",
        api="openai-completions",
        provider="mock",
        base_url="http://127.0.0.1/v1",
        reasoning=False,
        input=("text",),
        cost=zero,
        context_window=128000,
        max_tokens=4096,
    )
    builder = ChatMessages(model, compat_of(model), encoded=True)
    for message in converted:
        builder.feed(message)
    _mark(marks, "encode")
    state = (builder.entries, builder.images, builder.last_role, builder.preparer.pending)
    marks["state_bytes"] = len(pickle.dumps(state, protocol=5))
    _mark(marks, "ready")
    return marks


def _parent(harness: Any, tools: Any, data: bytes, name: str) -> dict[str, float]:
    from bench.first_turn_ab import start_resumed

    agent = start_resumed(harness, tools, data, name)
    try:
        agent.send({"id": "st", "type": "get_state"})
        agent.send({"id": "gm", "type": "get_messages"})
        got: dict[str, Any] = {}
        while len(got) < 2:
            event = agent.wait_for(lambda e: e.type == "response", 180)
            got[event.obj.get("id")] = event
        cpu = agent.cpu_seconds()
        turn = harness.prompt_turn(agent, "continue after resume", 180)
        turn_cpu = agent.cpu_seconds() - cpu
        before = agent.cpu_seconds()
        second = harness.prompt_turn(agent, "and once more", 180)
        second_cpu = agent.cpu_seconds() - before
    finally:
        agent.close()
    return {
        "get_messages_wall_ms": round(1000 * (got["gm"].t - agent.t_spawn)),
        "get_messages_cpu_ms": round(1000 * cpu),
        "first_turn_wall_ms": round(1000 * (turn["t_agent_end"] - turn["t_send"])),
        "first_turn_cpu_ms": round(1000 * turn_cpu),
        "second_turn_wall_ms": round(1000 * (second["t_agent_end"] - second["t_send"])),
        "second_turn_cpu_ms": round(1000 * second_cpu),
    }


def main() -> int:
    """Run the rounds and print the medians (each run on stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return 0
    sys.path[:0] = [str(TOOLS), str(ROOT)]  # the harness; this checkout's bench package
    tools = importlib.import_module("bench_rpc")
    script = ROOT / ".venv" / "bin" / "pitrio"
    options = SimpleNamespace(
        tmp_root=None,
        pi_cli=None,
        agent_cmd=f"env PITRIO_AGENT_DIR={{agent_dir}} {script} --mode rpc",
        label="prefix-child",
        transcripts="",
        pass_env=[],
        keep_tmp=False,
    )
    harness = tools.Harness(options)
    runs: dict[str, list[dict[str, float]]] = {"parent": [], "child": []}
    loads = [os.getloadavg()[0]]
    try:
        from bench.first_turn_ab import generated_session

        path = generated_session(harness, args.turns)
        data = path.read_bytes()
        for index in range(args.rounds + 1):
            order = ["parent", "child"] if index % 2 else ["child", "parent"]
            for name in order:
                if name == "parent":
                    result = _parent(harness, tools, data, f"parent{index}")
                else:
                    command = [sys.executable, __file__, "--child", str(path)]
                    out = subprocess.run(command, capture_output=True, text=True, check=True)
                    result = json.loads(out.stdout)
                loads.append(os.getloadavg()[0])
                if index:  # round 0 warms the bytecode caches
                    runs[name].append(result)
                print(index, name, result, file=sys.stderr, flush=True)
    finally:
        harness.close()
    report: dict[str, Any] = {
        name: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
        for name, rs in runs.items()
    }
    report["load"] = [min(loads), max(loads)]
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
