"""What routing a connection to its worker costs, by mechanism (``serve --workers``).

Two figures, measured on this machine, decide between passing the socket to the owner
(``SCM_RIGHTS``, what ``pitrio serve --workers`` does) and relaying its bytes through the
process that accepted it:

* **connect**: TCP connect to the ``attached`` frame of ``/v1/sessions/{id}``, for
  ``--connects`` connections in turn, against ``pitrio serve --workers 1`` (no hand-off) and
  ``--workers 2`` (the acceptor reads the head and passes the descriptor): the one-time cost
  of a hand-off;
* **relay**: CPU per frame of a relay (a trio task copying one socket to another, as a proxy
  in the acceptor would, for every delta of every session) for frames of ``--frame`` bytes:
  the cost a relay would add to every delta for the connection's whole life.

Prints JSON. Not part of the test run.

    .venv/bin/python bench/workers_handoff.py --connects 200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import open_websocket_url

PITRIO = str(Path(sys.executable).with_name("pitrio"))


def _start(workers: int, root: Path) -> tuple[subprocess.Popen[bytes], int]:
    env = {**os.environ, "PITRIO_AGENT_DIR": str(root / f"agent-{workers}")}
    process = subprocess.Popen(
        [
            PITRIO,
            "serve",
            "--workers",
            str(workers),
            "--port",
            "0",
            "--no-auth",
            "--rate",
            "1000",
            "--burst",
            "1000",
            "--cwd",
            str(root),
            "--log-level",
            "warning",
        ],
        env=env,
        stdout=subprocess.PIPE,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    return process, int(line.rsplit(":", 1)[1].strip().rstrip("/"))


async def _connects(port: int, count: int) -> list[float]:
    async with open_websocket_url(f"ws://127.0.0.1:{port}/v1/host") as host:
        await host.get_message()
        await host.send_message(orjson.dumps({"id": 1, "type": "create"}).decode())
        while (frame := orjson.loads(await host.get_message())).get("type") != "response":
            pass
        session = frame["data"]["sessionId"]
    times: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        async with open_websocket_url(f"ws://127.0.0.1:{port}/v1/sessions/{session}") as ws:
            await ws.get_message()  # attached
            times.append((time.perf_counter() - started) * 1000)
    return times


def connect_figures(count: int) -> dict[str, Any]:
    """Connect-to-attached milliseconds with one and with two workers."""
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="pitrio-handoff-") as tmp:
        for workers in (1, 2):
            process, port = _start(workers, Path(tmp))
            try:
                times = sorted(trio.run(_connects, port, count))
            finally:
                process.terminate()
                process.wait(15)
            figures[f"workers_{workers}"] = {
                "p50_ms": round(statistics.median(times), 3),
                "p99_ms": round(times[min(len(times) - 1, int(0.99 * len(times)))], 3),
            }
    return figures


async def _pump(frames: int, size: int, relayed: bool) -> None:
    """``frames`` frames of ``size`` bytes from one socket to another, directly or through a
    relay task in between (as a proxying acceptor would run)."""
    a_out, a_in = trio.socket.socketpair()
    source, received = trio.SocketStream(a_out), trio.SocketStream(a_in)
    sink = received
    relay_out: trio.SocketStream | None = None
    if relayed:
        b_out, b_in = trio.socket.socketpair()
        relay_out, sink = trio.SocketStream(b_out), trio.SocketStream(b_in)
    payload = b"x" * size
    total = frames * size

    async def produce() -> None:
        for _ in range(frames):
            await source.send_all(payload)

    async def relay() -> None:
        assert relay_out is not None
        moved = 0
        while moved < total:
            data = await received.receive_some(65536)
            moved += len(data)
            await relay_out.send_all(data)

    async def consume() -> None:
        got = 0
        while got < total:
            got += len(await sink.receive_some(65536))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        if relayed:
            nursery.start_soon(relay)
        nursery.start_soon(consume)


def _cpu_of(frames: int, size: int, relayed: bool) -> float:
    before = resource.getrusage(resource.RUSAGE_SELF)
    trio.run(_pump, frames, size, relayed)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def relay_figures(frames: int, size: int) -> dict[str, Any]:
    """CPU per frame sent directly and through a relay (best of three each): their
    difference is what a relay adds to every frame."""
    direct = min(_cpu_of(frames, size, False) for _ in range(3))
    relayed = min(_cpu_of(frames, size, True) for _ in range(3))
    return {
        "frames": frames,
        "frame_bytes": size,
        "direct_cpu_us_per_frame": round(direct / frames * 1e6, 2),
        "relayed_cpu_us_per_frame": round(relayed / frames * 1e6, 2),
        "relay_adds_us_per_frame": round((relayed - direct) / frames * 1e6, 2),
    }


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; print the JSON."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--connects", type=int, default=200)
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--frame", type=int, default=160, help="bytes per frame (a delta)")
    args = parser.parse_args(argv)
    result = {
        "connect": connect_figures(args.connects),
        "relay": relay_figures(args.frames, args.frame),
        "loadavg": os.getloadavg(),
        "cpus": len(os.sched_getaffinity(0)),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
