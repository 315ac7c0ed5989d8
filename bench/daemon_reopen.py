"""Evict and reopen a long session in a ``pitrio serve`` process: the time a client waits.

A session file of ``--turns`` turns (``../shared/tools/make_session.py``: pi v3, a bash tool
call every 5th turn, model ``mock/mock-model``, which ``models.json`` declares) is put where
the daemon finds it; this process is the daemon's websocket client. Each of ``--runs`` rounds:

* ``open``: from sending ``open`` on ``/v1/host`` to its response (the session is live: file
  read, tree and context built, actors started);
* ``first_response``: from the same send, through attaching on ``/v1/sessions/<id>`` and a
  ``get_state``, to that response (what a client that reopens a session to look at it waits);
* then ``close`` (evicted: stopped, unloaded, its file kept) and the next round.

The first round is reported apart (it loads the modules and caches a first session needs).
With ``--background N`` the daemon first holds N live idle sessions (created and prompted as
``daemon_idle.py`` does), so the reopen runs in a process with a large heap, as in a busy daemon.

    .venv/bin/python bench/daemon_reopen.py \\
        --out bench/results/raw/pitrio_daemon-reopen.json

``--variant NAME=@DIR`` (repeatable) runs one daemon per variant, the package copy in DIR
(``git archive main pitrio | tar -x -C DIR``) or, for ``NAME`` alone, this checkout; the
variants take turns round by round, so a before/after comparison shares the machine's load.
``--profile FILE`` runs this checkout's daemon under cProfile.

Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.daemon_idle import create_prompted  # noqa: E402
from bench.daemon_proc import (  # noqa: E402
    HostClient,
    fresh_agent_dir,
    start_daemon,
    stop_daemon,
)
from pitrio.actors.session_store.paths import session_dir, session_file_name  # noqa: E402
from tests.shared_dir import find_shared_dir  # noqa: E402

MAKE_SESSION = find_shared_dir() / "tools" / "make_session.py"
"""``$PITRIO_SHARED_DIR`` or ``shared/`` beside the checkout (a worktree has none beside it)."""
MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "http://127.0.0.1:9/v1",  # never called: nothing is prompted
            "api": "openai-completions",
            "apiKey": "mock-key",
            "models": [{"id": "mock-model", "name": "Mock Model", "contextWindow": 128000}],
        }
    }
}


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(values: list[float]) -> dict[str, Any]:
    """Median, p99, min and max (ms), and the five slowest (at 100 rounds the nearest-rank
    p99 is the slowest: one stall, a full collection say, sets it)."""
    return {
        "n": len(values),
        "median": statistics.median(values),
        "p99": percentile(values, 0.99),
        "min": min(values),
        "max": max(values),
        "slowest": sorted(values)[-5:],
    }


def write_session(agent: Path, work: Path, turns: int) -> tuple[str, Path]:
    """A ``turns``-turn session file where the daemon looks for ``work``'s sessions."""
    directory = session_dir(str(work), env={"PITRIO_AGENT_DIR": str(agent)})
    directory.mkdir(parents=True, exist_ok=True)
    scratch = directory / "new.jsonl.tmp"
    subprocess.run(
        [sys.executable, str(MAKE_SESSION), str(turns), str(scratch), "--cwd", str(work)],
        check=True,
        capture_output=True,
    )
    with scratch.open() as file:
        header = json.loads(file.readline())
    path = directory / session_file_name(header["timestamp"], header["id"])
    scratch.rename(path)
    return header["id"], path


class Target:
    """One daemon under test: its agent dir, the session it reopens, its times so far."""

    def __init__(
        self,
        name: str,
        source: Path | None,
        turns: int,
        profile: Path | None,
        serve_args: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.agent, work = fresh_agent_dir(f"pitrio-reopen-{name}-")
        (self.agent / "models.json").write_text(json.dumps(MODELS))
        self.session_id, self.path = write_session(self.agent, work, turns)
        self.daemon = start_daemon(
            self.agent, work, "--model", "faux/echo", *serve_args, source=source, profile=profile
        )
        self.times: dict[str, list[float]] = {"open": [], "first_response": []}

    def close(self) -> None:
        """Stop the daemon and remove its agent dir."""
        try:
            stop_daemon(self.daemon)
        finally:
            shutil.rmtree(self.agent, ignore_errors=True)


async def one_round(target: Target, host: HostClient) -> None:
    """Open, attach + get_state, close; the two times appended to ``target.times``."""
    daemon, session_id = target.daemon, target.session_id
    started = time.perf_counter()
    await host.call({"type": "open", "sessionId": session_id})
    target.times["open"].append((time.perf_counter() - started) * 1000)
    async with daemon.session(session_id) as ws:
        await ws.send_message(json.dumps({"id": "s", "type": "get_state"}))
        while True:
            frame = json.loads(await ws.get_message())
            if frame.get("type") == "response" and frame.get("id") == "s":
                break
    target.times["first_response"].append((time.perf_counter() - started) * 1000)
    if frame["data"].get("messageCount", 0) < 1:
        raise RuntimeError(f"the reopened session is empty: {frame['data']}")
    await host.call({"type": "close", "sessionId": session_id})


async def rounds(targets: list[Target], runs: int, background: int) -> None:
    """``runs`` rounds on every target, the targets taking turns within each round."""
    async with AsyncExitStack() as stack:
        hosts = [await stack.enter_async_context(t.daemon.host()) for t in targets]
        for target, host in zip(targets, hosts, strict=True):
            await host.call({"type": "list"})
            if background:
                await create_prompted(target.daemon, host, background, 32, 0)
        for _ in range(runs):
            for target, host in zip(targets, hosts, strict=True):
                await one_round(target, host)


def figures(target: Target, args: argparse.Namespace) -> dict[str, Any]:
    """One target's figures (the first round reported apart)."""
    times = target.times
    return {
        "turns": args.turns,
        "file_bytes": target.path.stat().st_size,
        "runs": args.runs,
        "background_sessions": args.background,
        "first_round_ms": {name: values[0] for name, values in times.items()},
        "open_ms": summary(times["open"][1:]),
        "first_response_ms": summary(times["first_response"][1:]),
        "daemon_rss_mb": target.daemon.rss() / 2**20,
    }


async def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Start one daemon per variant, run the rounds; each variant's figures."""
    targets: list[Target] = []
    try:
        for name, source in parse_variants(args.variant):
            serve_args = tuple(shlex.split(args.serve_args))
            targets.append(Target(name, source, args.turns, args.profile, serve_args))
        await rounds(targets, args.runs + 1, args.background)
        return {target.name: figures(target, args) for target in targets}
    finally:
        for target in targets:
            target.close()


def parse_variants(specs: list[str]) -> list[tuple[str, Path | None]]:
    """``NAME=@DIR`` (the package copy in DIR) or ``NAME`` (this checkout); none: one."""
    if not specs:
        return [("default", None)]
    variants: list[tuple[str, Path | None]] = []
    for spec in specs:
        name, _, rest = spec.partition("=")
        variants.append((name, Path(rest[1:]).resolve() if rest.startswith("@") else None))
    return variants


def main(argv: list[str] | None = None) -> int:
    """Run and write the JSON results."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--background", type=int, default=0, help="live idle sessions first")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=@DIR: a daemon running the package copy in DIR (NAME alone: this "
        "checkout); several take turns round by round",
    )
    parser.add_argument(
        "--profile", type=Path, help="run this checkout's daemon under cProfile, stats here"
    )
    parser.add_argument(
        "--serve-args", default="", help="more pitrio serve arguments, e.g. '--workers 2'"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    by_variant = trio.run(run, args)
    # One variant keeps the old layout; several are keyed by name.
    work = by_variant["default"] if list(by_variant) == ["default"] else by_variant
    result = {
        "meta": {
            "cpus": os.cpu_count(),
            "loadavg_end": os.getloadavg(),
            "serve_args": args.serve_args,
        },
        "workloads": {"daemon_reopen": work},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for name, figs in by_variant.items():
        opened, first = figs["open_ms"], figs["first_response_ms"]
        print(
            f"[{name}] reopen at {args.turns} turns ({figs['file_bytes'] / 2**20:.1f} MB), "
            f"{args.background} other sessions live, "
            f"{args.runs} rounds: open p50 {opened['median']:.1f} / p99 {opened['p99']:.1f} ms; "
            f"open + attach + get_state p50 {first['median']:.1f} / p99 {first['p99']:.1f} ms "
            f"(first round {figs['first_round_ms']['first_response']:.0f} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
