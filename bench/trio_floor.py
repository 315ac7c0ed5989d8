"""What trio alone costs at the daemon's load: paced tasks and channel hops doing no work.

The floor under ``bench/daemon_load.py``'s figures. ``--sessions`` tasks each wake on an
absolute schedule ``--rate`` times a second (``trio.sleep_until``, as the paced faux model
does) and hand an integer along ``--hops`` memory channels, one task each, to a sink that
counts it. Nothing is parsed, encoded or written, so the CPU reported is the scheduler's and
the channels' alone: what one daemon process pays per delta before any of pitrio's work.

    .venv/bin/python bench/trio_floor.py --sessions 1000 --hops 0 1 5

Prints one line per hop count and, with ``--out``, writes them as JSON. Not part of the test
run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import trio


async def _paced(index: int, sessions: int, rate: float, send: Any, counts: list[int]) -> None:
    start = trio.current_time() + index / sessions / rate  # spread over one period
    tick = 0
    while True:
        await trio.sleep_until(start + tick / rate)
        tick += 1
        if send is None:
            counts[0] += 1
        else:
            await send.send(tick)


async def _relay(receive: Any, send: Any) -> None:
    async for item in receive:
        await send.send(item)


async def _sink(receive: Any, counts: list[int]) -> None:
    async for _item in receive:
        counts[0] += 1


async def _batched_relay(receive: Any, send: Any) -> None:
    # As pitrio's hops do when events queue (issue 38): one wake-up takes what is waiting
    # and hands it on without a task switch per item while the next channel has room.
    async for item in receive:
        batch = [item]
        while True:
            try:
                batch.append(receive.receive_nowait())
            except trio.WouldBlock:
                break
        for queued in batch:
            try:
                send.send_nowait(queued)
            except trio.WouldBlock:
                await send.send(queued)


async def _batched_sink(receive: Any, counts: list[int]) -> None:
    async for _item in receive:
        counts[0] += 1
        while True:
            try:
                receive.receive_nowait()
            except trio.WouldBlock:
                break
            counts[0] += 1


async def measure(
    sessions: int, hops: int, rate: float, seconds: float, batched: bool = False
) -> dict[str, Any]:
    """Events a second reaching the end of ``hops`` channels, and the CPU per event;
    ``batched``: each hop drains what queued in one wake-up."""
    counts = [0]
    relay, sink = (_batched_relay, _batched_sink) if batched else (_relay, _sink)
    async with trio.open_nursery() as nursery:
        for index in range(sessions):
            if hops == 0:
                nursery.start_soon(_paced, index, sessions, rate, None, counts)
                continue
            send, receive = trio.open_memory_channel[int](64)
            nursery.start_soon(_paced, index, sessions, rate, send, counts)
            for _ in range(hops - 1):
                next_send, next_receive = trio.open_memory_channel[int](64)
                nursery.start_soon(relay, receive, next_send)
                receive = next_receive
            nursery.start_soon(sink, receive, counts)
        await trio.sleep(1.0)  # every task started and on its schedule
        count0, cpu0, wall0 = counts[0], time.process_time(), time.monotonic()
        await trio.sleep(seconds)
        count1, cpu1, wall1 = counts[0], time.process_time(), time.monotonic()
        nursery.cancel_scope.cancel()
    events, cpu, wall = count1 - count0, cpu1 - cpu0, wall1 - wall0
    return {
        "sessions": sessions,
        "hops": hops,
        "batched": batched,
        "asked_per_s": sessions * rate,
        "events_per_s": round(events / wall),
        "cpu_share": round(cpu / wall, 3),
        "cpu_us_per_event": round(cpu / max(events, 1) * 1e6, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Measure each hop count in turn; print and optionally write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--hops", type=int, nargs="+", default=[0, 1, 5])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--batched", action="store_true", help="also measure hops that drain their queue at once"
    )
    args = parser.parse_args(argv)
    results = []
    modes = (False, True) if args.batched else (False,)
    for hops in args.hops:
        for batched in modes:
            result = trio.run(measure, args.sessions, hops, args.rate, args.seconds, batched)
            results.append(result)
            print(
                f"{result['sessions']} sessions, {hops} hops{' batched' if batched else ''}: "
                f"{result['events_per_s']:,} of {result['asked_per_s']:,.0f} events/s, "
                f"CPU {result['cpu_share'] * 100:.0f} % of a core, "
                f"{result['cpu_us_per_event']} us/event"
            )
    if args.out is not None:
        args.out.write_text(json.dumps({"trio_floor": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
