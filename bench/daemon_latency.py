"""Daemon event latency against the number of sessions streaming at once (pitrio only).

One in-process daemon on 127.0.0.1 (as ``bench_daemon.py``, whose faux model and client it
reuses): ``--sessions`` sessions (1,000, the daemon issue's size) are created and prompted
once, so they are live and idle, then for each M of
``--streams`` M of them are prompted at the same time, one websocket client each, every reply
``--chunks`` chunks of 8 characters ``--delay`` seconds apart. Latency is from the faux
provider handing a chunk to the stream to the client holding the frame that carries it (one
clock). Clients run in the same process, so their CPU is counted with the daemon's.

    .venv/bin/python bench/daemon_latency.py --out bench/results/raw/pitrio_daemon-latency.json

``bench/side_by_side.py`` runs it; pi has no daemon. Not part of the test run.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_daemon import (  # noqa: E402
    TimedFaux,
    bench_configs,
    check_stream,
    create_sessions,
    prompt_once,
)
from pitrio.actors.model_router.actor import RouterConfig  # noqa: E402
from pitrio.transports.serve import Daemon, open_daemon  # noqa: E402

STREAMS = [1, 10, 50, 100, 200]


def percentile(values: list[float], fraction: float) -> float:
    """The value below which ``fraction`` of the sorted ``values`` lie (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def one_step(daemon: Daemon, faux: TimedFaux, ids: list[str], step: int) -> dict[str, Any]:
    """``len(ids)`` sessions stream at once; latency, throughput, CPU and loss."""
    results: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    tags = {session_id: f"stream {step} {session_id}" for session_id in ids}

    async def stream(session_id: str) -> None:
        results[session_id] = await prompt_once(daemon, session_id, tags[session_id])

    cpu0, wall0 = time.process_time(), time.perf_counter()
    async with trio.open_nursery() as nursery:
        for session_id in ids:
            nursery.start_soon(stream, session_id)
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    latencies: list[float] = []
    lost = gaps = frames_total = 0
    for session_id, frames in results.items():
        frames_total += len(frames)
        reply = faux.replies[tags[session_id]]
        missing, complete, delays = check_stream(frames, reply, faux.sent[id(reply)])
        gaps += missing
        lost += not complete
        latencies.extend(delay * 1000 for delay in delays)
    return {
        "streams": len(ids),
        "latency_ms": {
            "n": len(latencies),
            "median": statistics.median(latencies) if latencies else None,
            "p99": percentile(latencies, 0.99) if latencies else None,
            "min": min(latencies) if latencies else None,
            "max": max(latencies) if latencies else None,
        },
        "events_per_s": frames_total / wall,
        "cpu_share": cpu / wall,
        "wall_s": wall,
        "lost_replies": lost,
        "seq_gaps": gaps,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every step of ``args.streams`` against one daemon."""
    daemon_config, host_config = bench_configs("pitrio-latency-")
    faux = TimedFaux(args.chunks, args.delay)
    steps: list[dict[str, Any]] = []
    async with open_daemon(
        daemon_config, host_config, faux=faux, router_config=RouterConfig(agent_dir=None)
    ) as daemon:
        ids = await create_sessions(daemon, max(args.sessions, *args.streams), at_once=16)
        for step, count in enumerate(args.streams):
            gc.collect()
            result = await one_step(daemon, faux, ids[:count], step)
            steps.append(result)
            latency = result["latency_ms"]
            print(
                f"  {count} streams: p50 {latency['median']:.1f} ms, p99 {latency['p99']:.1f} ms, "
                f"{result['events_per_s']:.0f} events/s, CPU {result['cpu_share'] * 100:.0f} %, "
                f"lost {result['lost_replies']}",
                file=sys.stderr,
                flush=True,
            )
    return {
        "meta": {
            "chunks": args.chunks,
            "delay_s": args.delay,
            "loadavg_end": os.getloadavg(),
            "cpus": os.cpu_count(),
        },
        "workloads": {"daemon_latency": {"sessions": len(ids), "steps": steps}},
    }


def main(argv: list[str] | None = None) -> int:
    """Run and write the JSON results."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=1000, help="live sessions")
    parser.add_argument("--streams", type=int, nargs="+", default=STREAMS)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds between chunks")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    result = trio.run(run, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
