"""Where the long stream's time goes, phase by phase, for pi and pitrio taking turns.

    PITRIO_SHARED_DIR=/work/shared .venv/bin/python -m bench.stream_phases --rounds 5 \\
        --pi-cli "$PI/node_modules/@earendil-works/pi-coding-agent/dist/cli.js" [--before DIR]

Runs the shared harness's stream workload in-process (its ``Harness``, ``Mock`` and
``prompt_turn``: the same mock, sandboxes and client as ``bench_rpc.py -w stream``) and joins
the client's timestamps with the mock's request log (both ``time.monotonic``, one clock for
every process on the machine), so the time to the first delta splits into:

- ``ack``, ``agent_start``: the prompt written → the prompt's response line, ``agent_start``;
- ``to_request``: the prompt written → the mock's handler starts (the agent's own: prompt
  handling, the request's build, connection set-up, the first request's imports);
- ``body``: the handler starts → the request body read (the agent's send and the mock's read);
- ``mock_build``: the body read → the mock's first byte (the mock's parse and its building of
  the whole streamed body, before anything is written: the mock's alone);
- ``to_first_delta``: the mock's first byte → the first ``text_delta`` line read by the
  client (the first 256 KB written, the agent's read, parse and first line);
- ``stream``: the first delta → ``agent_end``; ``after_mock``: the mock's last byte →
  ``agent_end`` (what the agent still had to do once the whole body was sent).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from types import SimpleNamespace

from bench import ab_agents
from bench.side_by_side import TOOLS

PHASES = (
    "ack",
    "agent_start",
    "to_request",
    "body",
    "mock_build",
    "to_first_delta",
    "first_delta",
    "stream",
    "after_mock",
    "total",
    "cpu_s",
    "stdout_mb",
)


def phases(tr: dict, log: dict, cpu: float, stdout_mb: float) -> dict[str, float]:
    """One run's phases in ms (CPU in s, stdout in MB)."""

    def ms(seconds: float) -> float:
        return round(seconds * 1000, 1)

    return {
        "ack": ms(tr["t_ack"] - tr["t_send"]),
        "agent_start": ms(tr["t_agent_start"] - tr["t_send"]),
        "to_request": ms(log["t_recv"] - tr["t_send"]),
        "body": ms(log["t_body"] - log["t_recv"]),
        "mock_build": ms(log["t_first_byte"] - log["t_body"]),
        "to_first_delta": ms(tr["t_first_delta"] - log["t_first_byte"]),
        "first_delta": ms(tr["t_first_delta"] - tr["t_send"]),
        "stream": ms(tr["t_agent_end"] - tr["t_first_delta"]),
        "after_mock": ms(tr["t_agent_end"] - log["t_done"]),
        "total": ms(tr["t_agent_end"] - tr["t_send"]),
        "cpu_s": round(cpu, 3),
        "stdout_mb": round(stdout_mb, 2),
    }


def main() -> int:
    """Run the rounds, print each run's phases and the medians."""
    parser = argparse.ArgumentParser(description=__doc__)
    ab_agents.add_arguments(parser)
    args = parser.parse_args()
    sys.path.insert(0, str(TOOLS))
    import bench_rpc  # type: ignore[import-not-found]  # the shared harness, read-only

    cmds = ab_agents.agents(args, lambda pi: f"{pi} --mode rpc")
    count, text, _delay = bench_rpc.Harness.parse_stream_spec(args.stream)
    harness_args = SimpleNamespace(
        tmp_root=None,
        pi_cli=str(args.pi_cli or ""),
        agent_cmd="true",
        label="phases",
        transcripts="",
        pass_env=["NODE_COMPILE_CACHE"],
        stream_timeout=300.0,
        keep_tmp=False,
    )
    harness = bench_rpc.Harness(harness_args)
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in cmds}
    try:
        for index in range(args.rounds):
            for label, cmd in cmds:
                harness.agent_cmd_template = cmd
                usage = {"prompt_tokens": 1000, "completion_tokens": count}
                harness.mock.reset(default=bench_rpc.text_spec(count, text, usage=usage))
                sandbox = harness.sandbox(f"phases-{label}-{index}")
                agent, _ = harness.start_ready(sandbox)
                cpu0, out0 = agent.cpu_seconds(), agent.bytes_out
                tr = harness.prompt_turn(agent, f"stream {count} deltas", 300.0)
                cpu = agent.cpu_seconds() - cpu0
                out = (agent.bytes_out - out0) / 1e6
                agent.close()
                log = harness.mock.log()[-1]
                row = phases(tr, log, cpu, out)
                runs[label].append(row)
                shown = " ".join(f"{k} {v}" for k, v in row.items())
                print(f"round {index + 1} {label:6} {shown}", file=sys.stderr, flush=True)
    finally:
        harness.close()
    medians = {
        label: {p: statistics.median(r[p] for r in rows) for p in PHASES}
        for label, rows in runs.items()
    }
    print(json.dumps(medians, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
