"""Per-turn overhead against session length: the same few turns on sessions of 1 to 10,000 turns.

The shared harness's ``turns50`` workload starts every session empty, so it cannot show whether
a turn's cost grows with the session. This driver reuses the harness's pieces (its mock LLM,
sandboxes, agent process wrapper and synthetic pi v3 session files, imported from
``../shared/tools/bench_rpc.py``):

1. for each size N, writes a session file of N turns (every fifth with a bash tool call, as
   ``resume`` does) and starts the agent with ``--session FILE``: one process per size, all
   alive at once, on one mock LLM;
2. sends each ``--warmup`` prompts that are not counted (the first turn of a process pays for
   connections and lazy imports);
3. times prompts in rounds: each size in turn gets a block of ``--block`` prompts, the order
   of the sizes reversed every other round, until every size has ``--turns`` timed ones. The
   first prompt of a block (the caches still hold the previous size's process) is not
   counted. This VM's speed drifts in phases of tens of seconds: measured one size after the
   other, a 10% phase could pass for growth; taking turns, every size meets the same phases.

Each prompt is answered by the mock with one delta and a fixed usage of 1,000 prompt tokens (so
no agent compacts). Per turn it records prompt written → ``agent_end`` read (the harness's
turn), the part the mock spent serving the request, the request's size, and the agent's CPU
per timed turn. The model request of a long session is big (the whole context travels every
turn, for both agents), so the mock's share and the transfer grow with N for any agent;
``agent_ms`` (turn minus mock server time) is what the agent itself adds.

    .venv/bin/python bench/session_length.py --label pitrio --out bench/results/raw/x.json
    PI_CLI=... .venv/bin/python bench/session_length.py --label pi --out ...

Unless ``--no-send-floor`` is given, the run ends with the floor of sending each size's request:
the CPU and wall time of a bare blocking ``sendall`` of a body of that size (its median request
size) to a loopback reader in another process, which acknowledges each body once read, taken
``--floor-reps`` times in rounds over the sizes. A loopback send copies the body and runs the
receiving side's TCP work in the sender's call, so this is what any agent pays per turn for
the body alone; the summary gives each size's CPU per turn and agent part net of it.

``bench/side_by_side.py`` runs it for both agents. Not part of the test run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TOOLS = Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared") / "tools"
PITRIO = ROOT / ".venv" / "bin" / "pitrio"
PITRIO_CMD = f"env PITRIO_AGENT_DIR={{agent_dir}} {PITRIO} --mode rpc"
PI_CMD = "node {pi_cli} --mode rpc"
SIZES = [1, 10, 100, 1000, 10000]


def _harness_module() -> Any:
    """``bench_rpc`` from the shared tools (a script folder, not a package)."""
    if str(TOOLS) not in sys.path:
        sys.path.insert(0, str(TOOLS))
    return importlib.import_module("bench_rpc")


CONTROL_MARK = "[idle-control]"
"""In the control agent's prompts: the mock's rule for them delays the answer."""


@dataclass
class Length:
    """One size's agent process and what its timed turns gave."""

    size: int
    session: Path
    info: dict[str, Any]
    mark: str = ""  # appended to its prompts (the idle control's)
    agent: Any = None
    startup: float = 0.0
    cpu: float = 0.0
    prompts: int = 0  # timed-phase prompts made, the uncounted first of each block included
    turns: list[tuple[dict[str, Any], int]] = field(default_factory=list)  # (turn, log index)
    error: str | None = None


def _start(harness: Any, tools: Any, length: Length, sandbox: Any, warmup: int) -> None:
    try:
        extra = ["--session", str(length.session)]
        length.agent, length.startup = harness.start_ready(sandbox, extra, timeout=180.0)
        for index in range(warmup):
            harness.prompt_turn(length.agent, f"warm-up {index + 1}{length.mark}", 120.0)
    except tools.AgentError as exc:
        length.error = str(exc)


def measure_sizes(
    harness: Any,
    tools: Any,
    sizes: list[int],
    warmup: int,
    turns: int,
    block: int,
    idle_control: bool = True,
) -> dict[str, Any]:
    """Time ``turns`` prompts per size, the sizes taking turns (see the module docstring).

    With ``idle_control``, one more agent on a one-turn session takes part, whose mock answers
    come only after the time the mock spent serving the largest size's warm-up requests:
    what a turn costs after the process waited that long, with nothing else grown.
    """
    usage = {"prompt_tokens": 1000, "completion_tokens": 1}
    answer = tools.text_spec(1, "ok", usage=usage)
    harness.mock.reset(default=answer)
    lengths: list[Length] = []
    warmups: list[dict[str, Any]] = []
    for size in sizes:
        sandbox = harness.sandbox(f"length{size}")
        session = sandbox.root / "session.jsonl"
        length = Length(size, session, harness.make_session_file(session, sandbox.work, size))
        lengths.append(length)
        served = len(harness.mock.log())
        _start(harness, tools, length, sandbox, warmup)
        warmups = harness.mock.log(served)
    control: Length | None = None
    delay = 0.0
    if idle_control and len(sizes) > 1 and warmups and lengths[-1].error is None:
        # The largest size's warm-ups (the last ones made): the mock's median serving time,
        # the first left out when there are others (it pays for the mock's first parse).
        steady = warmups[1:] or warmups
        delay = statistics.median(r["t_done"] - r["t_recv"] for r in steady)
        rule = {"if": {"last_text_contains": CONTROL_MARK}, "then": {**answer}}
        rule["then"]["first_delay"] = delay
        harness.mock.config(rules=[rule])
        sandbox = harness.sandbox("length-control")
        session = sandbox.root / "session.jsonl"
        info = harness.make_session_file(session, sandbox.work, 1)
        control = Length(1, session, info, mark=f" {CONTROL_MARK}")
        _start(harness, tools, control, sandbox, warmup)
        lengths.append(control)
    try:
        requests = 0  # the mock log's length, counted: each prompt makes one request
        since = len(harness.mock.log())
        round_index = 0
        while True:
            live = [x for x in lengths if x.error is None and len(x.turns) < turns]
            if not live:
                break
            for length in live if round_index % 2 == 0 else reversed(live):
                before = length.agent.cpu_seconds()
                for offset in range(min(block, turns - len(length.turns) + 1)):
                    try:
                        text = f"turn {offset + 1}{length.mark}"
                        turn = harness.prompt_turn(length.agent, text, 120.0)
                    except tools.AgentError as exc:
                        length.error = str(exc)
                        break
                    requests += 1
                    length.prompts += 1
                    if offset > 0:  # the block's first prompt is not counted
                        length.turns.append((turn, requests - 1))
                length.cpu += length.agent.cpu_seconds() - before
            round_index += 1
        log = harness.mock.log(since)
        checked = log if len(log) == requests else None
        results: dict[str, Any] = {
            str(x.size): _summary(tools, x, checked, block) for x in lengths if x is not control
        }
        if control is not None:
            results["idle_control"] = {
                **_summary(tools, control, checked, block),
                "mock_delay_ms": round(delay * 1000, 2),
                "like_turns_in_file": sizes[-1],
            }
        return results
    finally:
        for length in lengths:
            if length.agent is not None:
                length.agent.close()


_READER = """
import socket, sys
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
connection = server.accept()[0]
buffer = memoryview(bytearray(1 << 20))
while True:
    head = connection.recv(8, socket.MSG_WAITALL)
    if len(head) < 8:
        break
    left = int.from_bytes(head, "big")
    while left:
        got = connection.recv_into(buffer, min(left, len(buffer)))
        if not got:
            sys.exit()
        left -= got
    connection.sendall(b"k")
"""
"""The loopback reader of :func:`send_floor`: reads each length-prefixed body, answers a byte."""


def send_floor(sizes: dict[str, int], reps: int) -> dict[str, dict[str, float]]:
    """Median CPU (this thread's) and wall of sending a ``sizes[name]``-byte body with one
    blocking ``sendall`` over loopback TCP to a reader process, until the reader has it all
    (its acknowledgement read): the floor of a turn's request. Rounds over the sizes."""
    reader = subprocess.Popen([sys.executable, "-c", _READER], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout is not None
        port = int(reader.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            bodies = {name: b"x" * size for name, size in sizes.items()}
            samples: dict[str, list[tuple[float, float]]] = {name: [] for name in sizes}
            for _ in range(reps + 1):  # the first round warms the connection up
                for name, body in bodies.items():
                    cpu, wall = time.thread_time(), time.perf_counter()
                    sock.sendall(len(body).to_bytes(8, "big"))
                    sock.sendall(body)
                    sock.recv(1)
                    samples[name].append((time.thread_time() - cpu, time.perf_counter() - wall))
    finally:
        reader.kill()
        reader.wait()
    return {
        name: {
            "bytes": sizes[name],
            "cpu_ms": round(statistics.median(c for c, _ in rows[1:]) * 1000, 3),
            "wall_ms": round(statistics.median(w for _, w in rows[1:]) * 1000, 3),
        }
        for name, rows in samples.items()
    }


def _net_of_floor(sizes: dict[str, Any], floor: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Each size's CPU per turn and agent part (median) less the CPU floor of its request.

    The floor's CPU, not its wall time, comes off the agent part: the mock's clock starts
    once it has read the request's head, before the body, so the transfer is mostly in the
    mock's time already; what stays in the agent's is the CPU of its own send."""
    out: dict[str, Any] = {}
    for name, result in sizes.items():
        if name not in floor or "error" in result:
            continue
        agent = result["summary"].get("agent_ms", {}).get("median")
        out[name] = {
            "cpu_ms_per_turn_net": round(result["cpu_ms_per_turn"] - floor[name]["cpu_ms"], 3),
            "agent_ms_net": None if agent is None else round(agent - floor[name]["cpu_ms"], 3),
        }
    return out


def _summary(
    tools: Any, length: Length, log: list[dict[str, Any]] | None, block: int
) -> dict[str, Any]:
    if length.error is not None:
        return {"error": length.error}
    mem = length.agent.mem_stats()
    rows: list[dict[str, float]] = []
    for turn, index in length.turns:
        total = turn["t_agent_end"] - turn["t_send"]
        row = {"turn_ms": total * 1000}
        if log is not None:
            request = log[index]
            server = request["t_done"] - request["t_recv"]
            row["mock_ms"] = server * 1000
            row["agent_ms"] = (total - server) * 1000
            row["pre_llm_ms"] = (request["t_body"] - turn["t_send"]) * 1000
            row["request_mb"] = request["body_bytes"] / 1e6
        rows.append(row)
    keys = ("turn_ms", "agent_ms", "mock_ms", "pre_llm_ms", "request_mb")
    return {
        "turns_in_file": length.size,
        "file_mb": round(length.session.stat().st_size / 1e6, 2),
        "entries": length.info.get("entries"),
        "startup_ms": round(length.startup * 1000, 1),
        # CPU over every prompt of its blocks (the uncounted first ones too), per prompt.
        "cpu_ms_per_turn": round(length.cpu * 1000 / max(1, length.prompts), 2),
        "turns": rows,
        # The harness's own summary (n, median, min, max, mean), as its workloads report.
        "summary": {k: tools.summarize([r[k] for r in rows if k in r]) for k in keys},
        **mem,
    }


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
    parser.add_argument("--turns", type=int, default=20, help="timed prompts per size")
    parser.add_argument("--block", type=int, default=5, help="prompts per size in a row")
    parser.add_argument(
        "--no-idle-control",
        dest="idle_control",
        action="store_false",
        help="leave out the one-turn session whose answers wait as long as the largest's",
    )
    parser.add_argument(
        "--no-send-floor",
        dest="send_floor",
        action="store_false",
        help="leave out the floor of sending each size's request (a bare loopback sendall)",
    )
    parser.add_argument("--floor-reps", type=int, default=30, help="sends per size")
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
        pass_env=["NODE_COMPILE_CACHE"],
        keep_tmp=False,
    )
    if args.block < 2:
        parser.error("--block must be at least 2 (a block's first prompt is not counted)")
    harness = tools.Harness(options)
    started = time.monotonic()
    try:
        results = measure_sizes(
            harness, tools, args.sizes, args.warmup, args.turns, args.block, args.idle_control
        )
        control = results.pop("idle_control", None)
        sizes: dict[str, Any] = results
        for size, result in sizes.items():
            summary = result.get("summary", {}).get("turn_ms", {})
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
    meta.update(
        warmup=args.warmup,
        timed_turns=args.turns,
        block=args.block,
        interleaved=True,
        loadavg_end=os.getloadavg(),
    )
    workload: dict[str, Any] = {"sizes": sizes}
    if control is not None:
        workload["idle_control"] = control
    if args.send_floor:
        requests = {
            name: round(result["summary"]["request_mb"]["median"] * 1e6)
            for name, result in sizes.items()
            if result.get("summary", {}).get("request_mb", {}).get("n")
        }
        floor = send_floor(requests, args.floor_reps)
        workload["send_floor"] = floor
        workload["net_of_send_floor"] = net = _net_of_floor(sizes, floor)
        for name, row in net.items():
            print(
                f"  {args.label} {name} turns: send floor {floor[name]['cpu_ms']:.2f} ms CPU, "
                f"{floor[name]['wall_ms']:.2f} ms wall; net CPU/turn "
                f"{row['cpu_ms_per_turn_net']:.2f} ms, net agent part {row['agent_ms_net']} ms",
                file=sys.stderr,
                flush=True,
            )
    out = {"meta": meta, "workloads": {"session_length": workload}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(harness.sanitize(json.dumps(out, indent=1)) + "\n")
    return 0 if all("error" not in v for v in sizes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
