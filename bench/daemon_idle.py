"""Idle memory per session in one ``pitrio serve`` process: live sessions, then evicted ones.

A ``pitrio serve`` process (``bench/daemon_proc.py``: its own agent dir, faux model, eviction
off) and this process as its client, over the daemon's websocket API only:

1. **live**: ``--sessions`` N sessions are created on ``/v1/host`` and each is prompted once
   on ``/v1/sessions/<id>`` (so it holds a real turn and has its file), the client detaches and
   the session stays in memory, idle. Per live session: (RSS with N - RSS with 0) / N, with 0
   read after the daemon answered its first ``list`` (so the figure includes what the first
   session loads, imports and caches, spread over N); ``warm`` also gives (RSS with N - RSS
   after ``--warm`` sessions) / (N - warm), which leaves that out.
2. **evicted**: every session is closed (``close``: stopped, unloaded, its file kept, the host
   still knows it): (RSS then - RSS with 0) / N. Freed memory is not always given back to the
   system, so this is an upper bound of what an evicted session holds.
3. **indexed**: a new daemon on the same agent dir lists them (``list``: found on disk,
   nothing started): (RSS after - RSS before) / N.

    .venv/bin/python bench/daemon_idle.py --sessions 10000 \\
        --out bench/results/raw/pitrio_daemon-idle.json

Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.daemon_proc import (  # noqa: E402
    DaemonProcess,
    HostClient,
    cpu_of,
    fresh_agent_dir,
    prompt_and_settle,
    settle_rss,
    start_daemon,
    stop_daemon,
)

KB = 1024


async def create_prompted(
    daemon: DaemonProcess, host: HostClient, count: int, at_once: int, start: int
) -> list[str]:
    """``count`` sessions created and prompted once, ``at_once`` at a time; their ids."""
    ids: list[str] = []
    limiter = trio.CapacityLimiter(at_once)

    async def one(index: int) -> None:
        async with limiter:
            created = await host.call({"type": "create"})
            session_id = created["data"]["sessionId"]
            async with daemon.session(session_id) as ws:
                await prompt_and_settle(ws, f"hello {index}")
            ids.append(session_id)

    async with trio.open_nursery() as nursery:
        for index in range(start, start + count):
            nursery.start_soon(one, index)
    return ids


async def close_all(host: HostClient, ids: list[str], at_once: int) -> None:
    """Evict every session in ``ids`` (``close``: stopped, file kept)."""
    limiter = trio.CapacityLimiter(at_once)

    async def one(session_id: str) -> None:
        async with limiter:
            await host.call({"type": "close", "sessionId": session_id})

    async with trio.open_nursery() as nursery:
        for session_id in ids:
            nursery.start_soon(one, session_id)


def per(delta: int, count: int) -> float:
    """KB per item."""
    return delta / count / KB if count else 0.0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """The three phases against one agent dir; the figures."""
    agent, work = fresh_agent_dir("pitrio-idle-")
    result: dict[str, Any] = {"sessions": args.sessions, "warm": args.warm}
    try:
        daemon = start_daemon(
            agent, work, "--model", args.model, *shlex.split(args.serve_args), source=args.source
        )
        try:
            async with daemon.host() as host:
                await host.call({"type": "list"})
                zero = await settle_rss(daemon)
                started = time.perf_counter()
                cpu0 = cpu_of(daemon.pid)
                ids = await create_prompted(daemon, host, args.warm, args.at_once, 0)
                warm = await settle_rss(daemon)
                ids += await create_prompted(
                    daemon, host, args.sessions - args.warm, args.at_once, args.warm
                )
                create_s = time.perf_counter() - started
                create_cpu = cpu_of(daemon.pid) - cpu0
                live = await settle_rss(daemon, 2.0)
                stats = (await host.call({"type": "stats"}))["data"]
                listed = (await host.call({"type": "list"}))["data"]["sessions"]
                live_rows = sum(1 for row in listed if row.get("status") == "live")
                await close_all(host, ids, args.at_once)
                evicted = await settle_rss(daemon, 2.0)
        finally:
            stop_daemon(daemon)
        result["live"] = {
            "rss_zero_mb": zero / 2**20,
            "rss_warm_mb": warm / 2**20,
            "rss_live_mb": live / 2**20,
            "live_sessions_listed": live_rows,
            "kb_per_session": per(live - zero, args.sessions),
            "kb_per_session_after_warm": per(live - warm, args.sessions - args.warm),
            "create_and_prompt_s": create_s,
            "daemon_cpu_s": create_cpu,
            "host_stats": stats,
        }
        result["evicted"] = {
            "rss_mb": evicted / 2**20,
            "kb_per_session": per(evicted - zero, args.sessions),
            "kb_freed_per_session": per(live - evicted, args.sessions),
        }
        # Indexed: a new daemon finds them on disk and lists them, none started.
        daemon = start_daemon(
            agent, work, "--model", args.model, *shlex.split(args.serve_args), source=args.source
        )
        try:
            async with daemon.host() as host:
                before = await settle_rss(daemon)
                listed = (await host.call({"type": "list"}))["data"]["sessions"]
                after = await settle_rss(daemon)
        finally:
            stop_daemon(daemon)
        result["indexed"] = {
            "listed": len(listed),
            "rss_before_mb": before / 2**20,
            "rss_after_mb": after / 2**20,
            "kb_per_session": per(after - before, len(listed)),
        }
    finally:
        if not args.keep:
            shutil.rmtree(agent, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    """Run and write the JSON results."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=10000)
    parser.add_argument("--warm", type=int, default=100, help="sessions before the warm reading")
    parser.add_argument("--at-once", type=int, default=32, help="creates in flight")
    parser.add_argument("--model", default="faux/echo")
    parser.add_argument("--keep", action="store_true", help="keep the agent dir")
    parser.add_argument(
        "--serve-args", default="", help="more pitrio serve arguments, e.g. '--workers 2'"
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--source",
        type=Path,
        help="run the daemon from this directory's copy of the package (the code before a change)",
    )
    args = parser.parse_args(argv)
    if not 0 < args.warm < args.sessions:
        parser.error("--warm must be between 0 and --sessions")
    figures = trio.run(run, args)
    result = {
        "meta": {
            "cpus": os.cpu_count(),
            "loadavg_end": os.getloadavg(),
            "model": args.model,
            "serve_args": args.serve_args,
        },
        "workloads": {"daemon_idle": figures},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    live, evicted, indexed = figures["live"], figures["evicted"], figures["indexed"]
    print(
        f"{args.sessions} live idle sessions: {live['kb_per_session']:.1f} KB each from 0 "
        f"({live['kb_per_session_after_warm']:.1f} after {args.warm}), RSS "
        f"{live['rss_zero_mb']:.0f} -> {live['rss_live_mb']:.0f} MB, created in "
        f"{live['create_and_prompt_s']:.0f} s; evicted: {evicted['kb_per_session']:.1f} KB each "
        f"({evicted['kb_freed_per_session']:.1f} freed); indexed: "
        f"{indexed['kb_per_session']:.1f} KB each ({indexed['listed']} listed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
