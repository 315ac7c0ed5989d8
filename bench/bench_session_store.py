"""Session store figures: resuming a long session, the cost of an append, the cost of a context.

1. **Resume**: a 20,000-turn session (48,002 entries, ~22 MB) written by
   ``../shared/tools/make_session.py``, opened through the actor and its context built. Each
   run is a fresh process, so its peak RSS (``ru_maxrss``) is the workload's own. Two figures:
   *context ready* (tree and projection built, messages decoded when read) and *context
   decoded* (every message decoded into its typed object, what a first model request needs).
   pi 0.73.1 on this machine: about 1.8 s and 310 MB; the target is half of both.
2. **Append**: one ``append_message`` awaited at a time, and 8 appenders at once (group commit),
   with ``session.fsync`` ``always``, ``batch`` and ``never``.
3. **Context cost by session size**: 100, 10,000 and 100,000 entries on the current branch;
   the time of ``context()`` through the actor and of one more append + ``context()``. Flat
   means the same at every size.

Run on demand: ``.venv/bin/python bench/bench_session_store.py [--runs N] [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from pitrio.actors.session_store import (
    SessionSeed,
    SessionStore,
    SessionStoreHandle,
    StoreOptions,
    new_header,
    open_store,
    start_store,
)
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.tree import SessionTree
from pitrio.messages.agent import AssistantMessage, Usage, user_message
from pitrio.messages.content import TextContent
from pitrio.messages.entries import MessageEntry, iso_now

ROOT = Path(__file__).resolve().parents[1]
MAKE_SESSION = (
    Path(os.environ.get("PITRIO_SHARED_DIR") or ROOT.parent / "shared")
    / "tools"
    / "make_session.py"
)
PI_SECONDS, PI_MB = 1.8, 310.0

RESUME_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import trio
from pitrio.actors.session_store import open_store
t_import = time.perf_counter()

async def main(path):
    async with trio.open_nursery() as nursery:
        start = time.perf_counter()
        store = await open_store(nursery, path)
        context = await store.context()
        ready = time.perf_counter()
        count = len(context.messages)
        messages = context.messages.materialize()
        decoded = time.perf_counter()
        await store.aclose()
    assert len(messages) == count
    return ready - start, decoded - start, count

ready, decoded, count = trio.run(main, sys.argv[1])
print(json.dumps({"ready": ready, "decoded": decoded, "messages": count,
                  "imports": t_import - t0, "total": time.perf_counter() - t0,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

BASELINE_CHILD = r"""
import json, resource
import trio
from pitrio.actors.session_store import open_store
print(json.dumps({"maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def answer(text: str) -> AssistantMessage:
    """A typical short assistant message."""
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="openai-completions",
        provider="mock",
        model="mock-model",
        usage=Usage(input=1000, output=50, total_tokens=1050),
        stop_reason="stop",
        timestamp=1_767_225_602_100,
    )


def median_ms(samples: list[float]) -> str:
    """Median and p95 of samples in seconds, as milliseconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"median {statistics.median(ordered) * 1000:8.3f} ms   p95 {p95 * 1000:8.3f} ms"


# -- 1. resume ------------------------------------------------------------------------------------


def resume(directory: Path, runs: int, turns: int) -> None:
    path = directory / f"session-{turns}.jsonl"
    made = subprocess.run(
        [sys.executable, str(MAKE_SESSION), str(turns), str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    print(f"\n== resume: {made.stdout.strip()}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    baseline = json.loads(
        subprocess.run(
            [sys.executable, "-c", BASELINE_CHILD],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
    )
    results = []
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", RESUME_CHILD, str(path)],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        ).stdout
        results.append(json.loads(out))

    def med(key: str) -> float:
        return float(statistics.median(result[key] for result in results))

    ready, decoded, rss = med("ready"), med("decoded"), med("maxrss_mb")
    print(f"runs: {runs}, messages in the context: {results[0]['messages']}")
    print(f"context ready (open + tree + projection): {ready:6.3f} s")
    print(
        f"context decoded (+ every message typed):  {decoded:6.3f} s   "
        f"= {decoded / PI_SECONDS:.2f} x pi's {PI_SECONDS} s"
    )
    print(f"process wall time incl. interpreter and imports: {med('total'):6.3f} s")
    print(
        f"peak RSS of the process: {rss:6.1f} MB   = {rss / PI_MB:.2f} x pi's {PI_MB:.0f} MB   "
        f"(interpreter + imports alone: {baseline['maxrss_mb']:.1f} MB)"
    )


# -- 2. appends -----------------------------------------------------------------------------------


async def appender(store: SessionStoreHandle, n: int, count: int) -> None:
    """Append ``count`` messages, each awaited before the next."""
    for i in range(count):
        await store.append_message(answer(f"reply {n}-{i}"))


async def appends(directory: Path, count: int) -> None:
    print(f"\n== append cost ({count} appends of a ~400-byte assistant message)")
    for policy in ("always", "batch", "never"):
        for concurrency in (1, 8):
            path = directory / f"append-{policy}-{concurrency}.jsonl"
            options = StoreOptions(fsync=policy, lazy_create=False)
            async with trio.open_nursery() as nursery:
                store = await open_store(nursery, path, options=options)
                await store.append_message(answer("warm up"))
                per_task = count // concurrency
                start = time.perf_counter()

                async with trio.open_nursery() as group:
                    for n in range(concurrency):
                        group.start_soon(appender, store, n, per_task)
                elapsed = time.perf_counter() - start
                status = await store.status()
                await store.aclose()
            done = per_task * concurrency
            print(
                f"fsync {policy:6s} x{concurrency}: {elapsed / done * 1e6:8.1f} us per append   "
                f"({status.writes} writes, {status.syncs} fsyncs for {done} appends)"
            )


# -- 3. context cost by size ----------------------------------------------------------------------


def seeded(entries: int) -> SessionSeed:
    """An in-memory session of ``entries`` alternating user/assistant messages on one branch."""
    header = new_header("/bench")
    tree = SessionTree(header)
    stamp = iso_now()
    for n in range(entries):
        message = user_message(f"question {n}", timestamp=n) if n % 2 == 0 else answer(f"a {n}")
        entry = MessageEntry(
            id=tree.next_id(), parent_id=tree.leaf_id, timestamp=stamp, message=message
        )
        tree.add(StoredEntry.from_entry(entry))
    return SessionSeed(header=header, entries=tuple(tree.entries), path=None)


async def context_cost(sizes: list[int], samples: int) -> None:
    print(f"\n== context cost by session size (median of {samples})")
    for size in sizes:
        seed = seeded(size)
        async with trio.open_nursery() as nursery:
            store = await start_store(nursery, SessionStore.seeded(seed))
            for n in range(50):  # warm up
                await store.append_message(answer(f"warm {n}"))
                await store.context()
            asks = []
            for _ in range(samples):
                start = time.perf_counter()
                context = await store.context()
                _ = context.messages[-1]
                asks.append(time.perf_counter() - start)
            turns = []
            for n in range(samples):
                start = time.perf_counter()
                await store.append_message(answer(f"more {n}"))
                context = await store.context()
                _ = context.messages[-1]
                turns.append(time.perf_counter() - start)
            await store.aclose()
        print(
            f"{size:>7} entries: context() {median_ms(asks)}   "
            f"append + context() {median_ms(turns)}"
        )


def main() -> int:
    """Run the benchmarks and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3, help="resume runs (median reported)")
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    args = parser.parse_args()
    turns = 2_000 if args.quick else 20_000
    with tempfile.TemporaryDirectory(prefix="pitrio-bench-") as temp:
        directory = Path(temp)
        resume(directory, args.runs, turns)
        trio.run(appends, directory, 400 if args.quick else 2_000)
        sizes = [100, 10_000] if args.quick else [100, 10_000, 100_000]
        trio.run(context_cost, sizes, 200 if args.quick else 1_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
