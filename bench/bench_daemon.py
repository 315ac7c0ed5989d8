"""Daemon load test: many sessions in one daemon, some streaming to websocket clients at once.

One process, loopback only, bounded: an in-process daemon on 127.0.0.1 (port 0), ``N``
sessions created through ``/v1/host`` and prompted once (so each has a file and a history),
then ``M`` of them prompted again at the same time, each with one websocket client reading
its stream; the faux model streams ``K`` chunks per reply with a pause between chunks.

Figures:

* **event latency** (p50/p99): from the moment the faux provider hands a text chunk to the
  stream to the moment the client has the websocket frame carrying it (same clock);
* **events/s** received by all clients together, and the CPU the process used meanwhile (the
  clients run in the same process, so this is an upper bound of the daemon's share);
* **memory per idle session**: RSS growth per live idle session, and per evicted one;
* **loss**: every client checks that its deltas rebuild the reply and that ``seq`` has no gap
  (coalescing is reported, not counted as loss).

Run on demand: ``.venv/bin/python bench/bench_daemon.py [--sessions N] [--streaming M]
[--chunks K] [--delay SECONDS]``. The issue's target size is ``--sessions 1000 --streaming
100``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import trio
from trio_websocket import open_websocket_url

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pitrio.actors.host import EvictionPolicy, HostConfig  # noqa: E402
from pitrio.actors.model_router import FauxProvider, FauxReply  # noqa: E402
from pitrio.actors.model_router.actor import RouterConfig  # noqa: E402
from pitrio.messages.model import LlmContext  # noqa: E402
from pitrio.transports.daemon.server import DaemonConfig  # noqa: E402
from pitrio.transports.serve import Daemon, open_daemon  # noqa: E402

TOKEN = "bench-token"
HEADERS = [(b"Authorization", f"Bearer {TOKEN}".encode())]


def rss_bytes() -> int:
    """The process's resident set size now."""
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class TimedFaux(FauxProvider):
    """The faux model, remembering when each chunk of each reply was handed to the stream."""

    def __init__(self, chunks: int, delay: float) -> None:
        super().__init__(default=self._script, chunk_size=8)
        self.chunks = chunks
        self.delay = delay
        self.replies: dict[str, FauxReply] = {}
        self.sent: dict[int, list[float]] = defaultdict(list)

    def _script(self, context: LlmContext) -> FauxReply:
        from pitrio.actors.model_router.providers.faux import last_user_text

        tag = last_user_text(context)
        if not tag.startswith("stream "):
            return FauxReply(text="ok")
        reply = FauxReply(text="abcdefgh" * self.chunks, chunk_delay=self.delay)
        self.replies[tag] = reply
        return reply

    async def _pace(self, chunk: str, reply: FauxReply) -> None:
        await super()._pace(chunk, reply)
        if reply.chunk_delay is not None:
            self.sent[id(reply)].append(time.perf_counter())


async def host_call(daemon: Daemon, command: dict[str, Any]) -> dict[str, Any]:
    url = f"ws://127.0.0.1:{daemon.port}/v1/host"
    async with open_websocket_url(url, extra_headers=HEADERS) as ws:
        await ws.send_message(json.dumps({"id": 1, **command}))
        while True:
            frame: dict[str, Any] = json.loads(await ws.get_message())
            if frame.get("type") == "response":
                return frame


async def prompt_once(
    daemon: Daemon, session_id: str, text: str
) -> list[tuple[float, dict[str, Any]]]:
    """Attach, prompt, read until settled; every frame with its arrival time."""
    url = f"ws://127.0.0.1:{daemon.port}/v1/sessions/{session_id}"
    frames: list[tuple[float, dict[str, Any]]] = []
    async with open_websocket_url(url, extra_headers=HEADERS, message_queue_size=64) as ws:
        await ws.get_message()  # attached
        await ws.send_message(json.dumps({"id": "p", "type": "prompt", "message": text}))
        while True:
            raw = await ws.get_message()
            now = time.perf_counter()
            frame = json.loads(raw)
            frames.append((now, frame))
            if frame.get("type") == "agent_settled":
                return frames


def check_stream(
    frames: list[tuple[float, dict[str, Any]]], reply: FauxReply, sent: list[float]
) -> tuple[int, bool, list[float]]:
    """One client's frames of a streamed reply, checked: how many ``seq`` gaps, whether every
    character arrived, and each delta's latency in seconds (read time minus the time the faux
    model sent it; only when no delta was coalesced, so they pair one to one)."""
    seqs = [f["seq"] for _, f in frames if f.get("type") not in ("response", "attached")]
    gaps = sum(1 for a, b in itertools.pairwise(seqs) if b != a + 1)
    deltas = [
        (t, f["assistantMessageEvent"]["delta"])
        for t, f in frames
        if f.get("type") == "message_update" and f["assistantMessageEvent"]["type"] == "text_delta"
    ]
    complete = "".join(d for _, d in deltas) == reply.text
    latencies: list[float] = []
    if len(deltas) == len(sent):
        latencies = [t - s for (t, _), s in zip(deltas, sent, strict=True)]
    return gaps, complete, latencies


def bench_configs(prefix: str) -> tuple[DaemonConfig, HostConfig]:
    """A fresh agent dir (also ``PITRIO_AGENT_DIR``) and the daemon and host configuration the
    daemon benchmarks share: a token, no rate limits to speak of, no eviction."""
    agent = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["PITRIO_AGENT_DIR"] = str(agent)
    work = agent / "work"
    work.mkdir()
    daemon_config = DaemonConfig(port=0, token=TOKEN, message_rate=1000, message_burst=1000)
    host_config = HostConfig(
        agent_dir=agent, default_cwd=str(work), eviction=EvictionPolicy(idle_seconds=None)
    )
    return daemon_config, host_config


async def create_sessions(daemon: Daemon, count: int, *, at_once: int) -> list[str]:
    """Create ``count`` sessions, ``at_once`` at a time, each answering one prompt; their ids."""
    ids: list[str] = []
    limiter = trio.CapacityLimiter(at_once)

    async def make(index: int) -> None:
        async with limiter:
            hosted = await daemon.host.create()
            await (await hosted.session()).prompt(f"hello {index}")
            ids.append(hosted.id)

    async with trio.open_nursery() as nursery:
        for index in range(count):
            nursery.start_soon(make, index)
    return ids


async def main(args: argparse.Namespace) -> None:
    daemon_config, host_config = bench_configs("pitrio-bench-")
    faux = TimedFaux(args.chunks, args.delay)
    async with open_daemon(
        daemon_config, host_config, faux=faux, router_config=RouterConfig(agent_dir=None)
    ) as daemon:
        await host_call(daemon, {"type": "list"})  # warm up imports and the first session path
        gc.collect()
        base_rss = rss_bytes()
        started = time.perf_counter()
        ids = await create_sessions(daemon, args.sessions, at_once=32)
        create_seconds = time.perf_counter() - started
        await trio.sleep(0.5)
        gc.collect()
        live_rss = rss_bytes()
        per_live = (live_rss - base_rss) / args.sessions

        # M sessions stream at once, one websocket client each.
        chosen = ids[: args.streaming]
        results: dict[str, list[tuple[float, dict[str, Any]]]] = {}

        async def stream(session_id: str) -> None:
            results[session_id] = await prompt_once(daemon, session_id, f"stream {session_id}")

        cpu0, wall0 = time.process_time(), time.perf_counter()
        async with trio.open_nursery() as nursery:
            for session_id in chosen:
                nursery.start_soon(stream, session_id)
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0

        latencies: list[float] = []
        frames_total = 0
        lost = 0
        gaps = 0
        for session_id, frames in results.items():
            frames_total += len(frames)
            reply = faux.replies[f"stream {session_id}"]
            missing, complete, delays = check_stream(frames, reply, faux.sent[id(reply)])
            gaps += missing
            lost += not complete
            latencies.extend(delays)
        stats = await daemon.host.host_stats()

        # Evicted sessions: close them all; what memory comes back.
        gc.collect()
        before_close = rss_bytes()
        for session_id in ids:
            await daemon.host.close(session_id)
        await trio.sleep(0.5)
        gc.collect()
        freed = (before_close - rss_bytes()) / args.sessions

    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    print(
        f"sessions {args.sessions}, streaming {args.streaming} x {args.chunks} chunks "
        f"every {args.delay * 1000:g} ms"
    )
    print(f"created and prompted {args.sessions} sessions in {create_seconds:.2f} s")
    print(
        f"memory per live idle session: {per_live / 1024:.0f} KB "
        f"(RSS {base_rss / 2**20:.0f} -> {live_rss / 2**20:.0f} MB)"
    )
    print(f"RSS given back per session evicted: {freed / 1024:.0f} KB")
    print(
        f"streaming phase: {wall:.2f} s wall, {cpu:.2f} s CPU "
        f"({cpu / wall * 100:.0f}% of one core, clients included)"
    )
    print(f"events received: {frames_total} ({frames_total / wall:.0f} events/s)")
    if latencies:
        print(
            f"event latency: p50 {pct(0.50):.2f} ms, p99 {pct(0.99):.2f} ms, "
            f"max {latencies[-1] * 1000:.2f} ms over {len(latencies)} deltas"
        )
    print(
        f"lost replies: {lost}, seq gaps: {gaps}, coalesced updates: {stats.coalesced_total}, "
        f"clients dropped: {stats.dropped_clients_total}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--streaming", type=int, default=20)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--delay", type=float, default=0.005, help="seconds between chunks")
    return parser.parse_args()


if __name__ == "__main__":
    trio.run(main, parse_args())
