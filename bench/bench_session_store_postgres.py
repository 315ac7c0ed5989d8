"""The PostgreSQL session store against the file store, in the same run.

1. **Append latency and throughput**: ``append_message`` awaited one at a time, then 8
   appenders at once (group commit: one statement per batch), file store with
   ``session.fsync always`` vs PostgreSQL (a private cluster with fsync and synchronous
   commit on: an append returns once durable in both).
2. **Resume of a 20,000-turn session** (40,000 message entries): open (PostgreSQL: take the
   lease, read the rows), tree and projection ready, then every context message decoded.
3. **Event latency**: from ``append`` called to the entry in another subscriber's hands. File
   store: ``entry_appended`` to a subscriber of the same store (one daemon). PostgreSQL:
   append on daemon A, entry received by a watch on daemon B (``pg_notify`` at commit, LISTEN
   thread, catch-up by sequence number), the path a follower client of B takes.

Needs PostgreSQL's server binaries (as the tests do). Run on demand:
``.venv/bin/python bench/bench_session_store_postgres.py [--quick]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pitrio.actors.session_store import (  # noqa: E402
    SessionSeed,
    SessionStoreHandle,
    StoreOptions,
    create_store,
    new_header,
    open_store,
)
from pitrio.actors.session_store.postgres.backend import (  # noqa: E402
    BackendOptions,
    PgBackend,
    open_pg_backend,
)
from pitrio.actors.session_store.postgres.database import migrate  # noqa: E402
from pitrio.messages.agent import AssistantMessage, Usage, user_message  # noqa: E402
from pitrio.messages.codec import encode  # noqa: E402
from pitrio.messages.content import TextContent  # noqa: E402
from pitrio.messages.entries import MessageEntry, iso_now  # noqa: E402
from tests.actors.pg_cluster import start_cluster  # noqa: E402

CWD = "/bench/project"


def reply(i: int) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=f"answer {i} " + "lorem ipsum " * 20),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1_700_000_000_000 + i,
    )


def us(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered) * 1e6
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1e6
    return f"p50 {p50:7.0f} us  p99 {p99:7.0f} us"


Open = Callable[[trio.Nursery], Awaitable[SessionStoreHandle]]


async def appends(open_: Open, count: int, writers: int) -> tuple[list[float], float]:
    """Latencies of ``count`` appends by ``writers`` concurrent tasks, and appends/s."""
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        store = await open_(nursery)
        await store.append_message(reply(0))  # created (lazily) before timing

        async def writer(n: int) -> None:
            for i in range(n):
                started = time.perf_counter()
                await store.append_message(user_message(f"m{i}", timestamp=i))
                latencies.append(time.perf_counter() - started)

        began = time.perf_counter()
        async with trio.open_nursery() as inner:
            for _ in range(writers):
                inner.start_soon(writer, count // writers)
        elapsed = time.perf_counter() - began
        await store.aclose()
    return latencies, len(latencies) / elapsed


def long_session(turns: int) -> bytes:
    header = new_header(CWD)
    lines = [encode(header)]
    parent = None
    for i in range(turns):
        for message in (user_message(f"question {i}", timestamp=i), reply(i)):
            entry_id = f"{len(lines):08x}"
            entry = MessageEntry(
                id=entry_id, parent_id=parent, timestamp=iso_now(), message=message
            )
            lines.append(encode(entry))
            parent = entry_id
    return b"\n".join(lines) + b"\n"


async def resume(open_: Open) -> tuple[float, float]:
    async with trio.open_nursery() as nursery:
        started = time.perf_counter()
        store = await open_(nursery)
        context = await store.context()
        ready = time.perf_counter() - started
        context.messages.materialize()
        decoded = time.perf_counter() - started
        await store.aclose()
    return ready, decoded


async def main(quick: bool) -> None:
    count = 200 if quick else 1000
    turns = 2000 if quick else 20_000
    cluster = await trio.to_thread.run_sync(lambda: start_cluster(fsync=True))
    try:
        import psycopg

        url = cluster.url()
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn)
        options = BackendOptions()
        tmp = Path(tempfile.mkdtemp(prefix="pitrio-bench-"))
        print(f"PostgreSQL ({cluster.bin_dir}) at {url}, fsync on; files in {tmp}")
        async with open_pg_backend(url, options=options) as a, open_pg_backend(url) as b:

            def file_store(nursery: trio.Nursery) -> Awaitable[SessionStoreHandle]:
                return create_store(
                    nursery, CWD, session_dir_override=str(tmp), options=StoreOptions()
                )

            def pg_store(nursery: trio.Nursery) -> Awaitable[SessionStoreHandle]:
                header = new_header(CWD)
                seed = SessionSeed(header=header, entries=(), path=None)
                return a.opener(header.id, seed)(nursery, StoreOptions())

            print("\n1. append (durable when it returns)")
            for writers in (1, 8):
                for name, open_ in (("file (fsync always)", file_store), ("postgres", pg_store)):
                    latencies, rate = await appends(open_, count, writers)
                    print(f"  {name:20s} {writers} writer(s): {us(latencies)}  {rate:8.0f}/s")

            print(f"\n2. resume a {turns}-turn session ({2 * turns} entries)")
            data = long_session(turns)
            path = tmp / "long.jsonl"
            path.write_bytes(data)
            session_id = await a.import_session(data, origin=str(path))
            for name, open_ in (
                ("file", lambda nursery: open_store(nursery, path)),
                ("postgres", lambda nursery: a.opener(session_id)(nursery, None)),
            ):
                runs = [await resume(open_) for _ in range(3)]
                ready = statistics.median(r for r, _ in runs)
                decoded = statistics.median(d for _, d in runs)
                print(f"  {name:20s} context ready {ready:6.3f} s   all decoded {decoded:6.3f} s")

            print("\n3. event latency: append called -> entry received elsewhere")
            await file_event_latency(file_store, count // 2)
            await cross_daemon_latency(a, b, count // 2)
    finally:
        await trio.to_thread.run_sync(cluster.remove)


async def file_event_latency(open_: Open, count: int) -> None:
    latencies: list[float] = []
    async with trio.open_nursery() as nursery:
        store = await open_(nursery)
        await store.append_message(reply(0))
        events = await store.subscribe(16)
        for i in range(count):
            started = time.perf_counter()
            await store.append_message(user_message(f"e{i}", timestamp=i))
            await events.receive()
            latencies.append(time.perf_counter() - started)
        await store.aclose()
    print(f"  {'file, same daemon':20s} {us(latencies)}")


async def cross_daemon_latency(a: PgBackend, b: PgBackend, count: int) -> None:
    latencies: list[float] = []
    header = new_header(CWD)
    seed = SessionSeed(header=header, entries=(), path=None)
    async with trio.open_nursery() as nursery:
        store = await a.opener(header.id, seed)(nursery, StoreOptions(lazy_create=False))
        await store.append_message(reply(0))
        async with b.watch(header.id, 1) as watched:
            for i in range(count):
                started = time.perf_counter()
                nursery.start_soon(store.append_message, user_message(f"x{i}", timestamp=i))
                await watched.receive()
                latencies.append(time.perf_counter() - started)
        await store.aclose()
    print(f"  {'postgres, A -> B':20s} {us(latencies)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller workloads")
    trio.run(main, parser.parse_args().quick)
