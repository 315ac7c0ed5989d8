"""The daemon under load from separate processes: latency of streamed deltas against sessions.

``pitrio serve`` runs as its own process (a temporary agent dir, no eviction, no auth on
loopback) with ``PITRIO_FAUX_SCRIPT=load``; ``--workers`` load-generator processes
(``bench/daemon_load_client.py``; by default every client of a process on one ``epoll`` loop,
``bench/daemon_load_poll.py``) share the sessions, one websocket client each. For each step
of ``--sessions`` (50 to 1,000) the daemon is given that many sessions and every client runs
turns for ``--warmup`` + ``--duration`` seconds: a prompt, a reply of ``--chunks`` chunks at
``--rate`` chunks a second (a share ``--tool-share`` of turns first calls the ``read`` tool,
then replies), a think time.

**Pacing comes from the provider side**, a paced faux model in the daemon (``LoadFaux``), not a
loopback vendor mock: on two cores shared by the daemon and the clients, a mock process
streaming SSE would spend a core of its own and charge the daemon for HTTP parsing no
real deployment pays at loopback speed, and the figure asked for is the daemon's fan-out.
Each chunk carries its hand-off time (CLOCK_MONOTONIC, shared by every process on Linux), so
latency is hand-off to receipt on one clock, with no log to merge.

Reported (JSON, and a PNG chart with ``--chart``): latency p50/p90/p99/max of the chunks
handed off in the measured window; deltas sent (by the chunks' own count), received,
coalesced (chunks that arrived inside a merged delta; seq gaps), dropped (bad replies);
errors; disconnects; the daemon's CPU (% of one core), its time runnable but waiting for a CPU
(``schedstat``: the machine's other load) and RSS from ``/proc``, the load
generators' CPU; both as CPU microseconds per delta; the provider's achieved pace. ``--slow``
adds a client that stops reading, and reports what the daemon did with it and what the others
saw.

    .venv/bin/python bench/daemon_load.py --sessions 50 100 200 \\
        --out bench/results/raw/pitrio_daemon-load.json --chart bench/results/charts/x.png

``bench/side_by_side.py`` runs it. Not part of the test run.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import trio
from trio_websocket import open_websocket_url

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.daemon_proc import family, rss_of  # noqa: E402
from pitrio.actors.model_router.providers.faux_load import TOOL_FILE, monotonic_micros  # noqa: E402

STEPS = [50, 100, 200, 500, 1000]
OTHER_SOURCE = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in "
    "repr(f) + getattr(f, '__module__', '')]; sys.path.insert(0, {source!r}); "
    "from pitrio.transports.cli import main; sys.exit(main(sys.argv[1:]))"
)
"""Runs ``pitrio`` from a directory holding another copy of the package, past this
checkout's editable install (``--variant before=@DIR``)."""
CLIENT = ROOT / "bench" / "daemon_load_client.py"
TICKS = os.sysconf("SC_CLK_TCK")


def percentile(values: list[int], fraction: float) -> float | None:
    """Nearest-rank percentile of sorted ``values`` (``None`` when empty)."""
    if not values:
        return None
    return float(values[min(len(values) - 1, int(fraction * len(values)))])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU of process ``pid`` and its children so far (``/proc/<pid>/stat``)."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU of process ``pid`` and its children so far, apart: the system
    part is mostly the sockets' ``send`` and ``recv`` (TCP loopback runs the receiver's side
    in the sender's call)."""
    user = system = 0
    for member in family(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        user += int(fields[11])
        system += int(fields[12])
    return user / TICKS, system / TICKS


def run_delay_seconds(pid: int) -> float:
    """Time the threads of ``pid`` and its children spent runnable but waiting for a CPU
    (``schedstat``)."""
    total = 0
    for member in family(pid):
        for task in Path(f"/proc/{member}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue  # a thread that ended meanwhile
    return total / 1e9


def rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` and every process under it, each page once
    (:func:`bench.daemon_proc.rss_of`)."""
    return rss_of(pid)


class DaemonProcess:
    """``pitrio serve`` in its own process and agent dir."""

    def __init__(
        self, root: Path, extra: list[str] | None = None, source: Path | None = None
    ) -> None:
        self.agent = root / "agent"
        self.work = root / "work"
        self.work.mkdir(parents=True)
        (self.work / TOOL_FILE).write_text("what a tool turn reads\n" * 4)
        env = {
            **os.environ,
            "PITRIO_AGENT_DIR": str(self.agent),
            "PITRIO_FAUX_SCRIPT": "load",
            "HOME": str(root),
        }
        pitrio = Path(sys.executable).with_name("pitrio")
        argv = [str(pitrio)]
        if source is not None:  # another copy of the package (the code before a change)
            argv = [sys.executable, "-c", OTHER_SOURCE.format(source=str(source))]
            # The workers of `--workers N` are new processes (`python -m ...`): without this
            # they imported this checkout's editable install, so a `@DIR --workers 2` variant
            # ran DIR's acceptor with this checkout's workers (found by helper daemon4).
            env["PYTHONPATH"] = os.pathsep.join(
                [str(source), *filter(None, [os.environ.get("PYTHONPATH")])]
            )
        argv += ["serve", "--port", "0", "--idle", "0", "--no-auth", "--cwd", str(self.work)]
        argv += ["--rate", "1000", "--burst", "1000", "--log-level", "warning"]
        argv += ["--model", "faux/echo", *(extra or [])]
        self.stderr = (root / "daemon.log").open("wb")
        self.process = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=self.stderr, cwd=self.work
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().decode()
        if "listening on" not in line:
            raise SystemExit(f"the daemon did not start: {line!r} (see {root / 'daemon.log'})")
        self.url = line.rsplit(" ", 1)[1].strip()
        self.port = int(self.url.rsplit(":", 1)[1].rstrip("/"))

    @property
    def pid(self) -> int:
        """The daemon's process id."""
        return self.process.pid

    def stop(self) -> int:
        """SIGTERM, and its exit code (killed after 15 s)."""
        self.process.terminate()
        try:
            return self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()
        finally:
            self.stderr.close()


async def host_command(port: int, command: dict[str, Any]) -> dict[str, Any]:
    """One command over ``/v1/host``; its response."""
    async with open_websocket_url(f"ws://127.0.0.1:{port}/v1/host") as ws:
        await ws.send_message(orjson.dumps({"id": 1, **command}).decode())
        while True:
            frame: dict[str, Any] = orjson.loads(await ws.get_message())
            if frame.get("type") == "response":
                if not frame.get("success"):
                    raise SystemExit(f"{command['type']} failed: {frame.get('error')}")
                return frame.get("data") or {}


async def create_sessions(port: int, count: int) -> list[str]:
    """``count`` new sessions, eight requests at a time, on a few host connections."""
    ids: list[str] = []

    async def creator(share: int) -> None:
        async with open_websocket_url(f"ws://127.0.0.1:{port}/v1/host") as ws:
            for index in range(share):
                await ws.send_message(orjson.dumps({"id": index, "type": "create"}).decode())
                while True:
                    frame = orjson.loads(await ws.get_message())
                    if frame.get("type") == "response":
                        ids.append(frame["data"]["sessionId"])
                        break

    async with trio.open_nursery() as nursery:
        for part in range(8):
            nursery.start_soon(creator, count // 8 + (part < count % 8))
    return ids


def run_workers(
    daemon: DaemonProcess, ids: list[str], args: argparse.Namespace, tmp: Path, slow: str | None
) -> dict[str, Any]:
    """One step: the worker processes against ``ids``; the merged figures."""
    now = monotonic_micros()
    start = now + 1_500_000  # the workers' imports and connections come first
    window_start = start + int(args.warmup * 1e6)
    end = window_start + int(args.duration * 1e6)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    for worker in range(args.workers):
        config = {
            "port": daemon.port,
            "sessions": ids[worker :: args.workers],
            "seed": worker + 1,
            "stagger_s": 1.0 + (start - now) / 1e6,
            "window_start_us": window_start,
            "end_us": end,
            "chunks_min": args.chunks[0],
            "chunks_max": args.chunks[1],
            "rate": args.rate,
            "tool_share": args.tool_share,
            "think_min_s": args.think[0],
            "think_max_s": args.think[1],
            "slow_session": slow if worker == 0 else None,
            "slow_chunks": int(args.slow_rate * (args.warmup + args.duration + 10)),
            "slow_rate": args.slow_rate,
            "client": args.client,
            # The steps of ``--slow`` share a daemon and its sessions, and a command's ``id``
            # is its idempotency key (DESIGN §5.10): a prompt repeating an earlier step's id
            # and text (the same seed draws the same text) is answered ``duplicate`` and never
            # runs. A tag per step keeps every step's ids new.
            "tag": f"s{start}-",
        }
        path = tmp / f"worker-{len(ids)}-{worker}.json"
        path.write_text(json.dumps(config))
        proc = subprocess.Popen([sys.executable, str(CLIENT), str(path)], cwd=ROOT)
        procs.append((proc, path))
    while monotonic_micros() < window_start:
        time.sleep(0.01)
    spy = None
    if args.profile is not None:  # py-spy samples the daemon through the window
        spy_bin = Path(sys.executable).with_name("py-spy")
        out = args.profile.with_name(f"{args.profile.stem}-{len(ids)}{args.profile.suffix}")
        spy = subprocess.Popen(
            [
                str(spy_bin),
                "record",
                "--pid",
                str(daemon.pid),
                "--duration",
                str(int(args.duration)),
                "--format",
                "raw",
                "--rate",
                "200",
                "--nonblocking",
                *(["--gil"] if args.profile_gil else []),
                *(["--subprocesses"] if args.profile_gil else []),
                "-o",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    split0, wall0 = cpu_split(daemon.pid), time.monotonic()
    delay0 = run_delay_seconds(daemon.pid)
    worker_split0 = [cpu_split(p.pid) for p, _ in procs]
    rss_peak = 0
    while monotonic_micros() < end:
        rss_peak = max(rss_peak, rss_bytes(daemon.pid))
        time.sleep(0.25)
    split, wall = cpu_split(daemon.pid), time.monotonic() - wall0
    daemon_sys = split[1] - split0[1]
    cpu = sum(split) - sum(split0)
    waited = run_delay_seconds(daemon.pid) - delay0
    worker_split = [cpu_split(p.pid) for p, _ in procs]
    worker_sys = sum(b[1] - a[1] for a, b in zip(worker_split0, worker_split, strict=True))
    worker_cpu = sum(sum(b) - sum(a) for a, b in zip(worker_split0, worker_split, strict=True))
    rss_end = rss_bytes(daemon.pid)
    if spy is not None:
        spy.wait(60)
    latencies: list[int] = []
    counts: dict[str, int] = {}
    faults: list[str] = []
    pacing: list[int] = []
    slow_seen = None
    for proc, path in procs:
        if proc.wait(120) != 0:
            raise SystemExit(f"a load generator failed (exit {proc.returncode})")
        result = json.loads(path.with_suffix(".out.json").read_text())
        for key, value in result["counts"].items():
            counts[key] = counts.get(key, 0) + value
        faults += result["faults"]
        pacing += result["pacing_us"]
        slow_seen = slow_seen or result["slow_client"]
        chunk = array.array("I")
        chunk.frombytes(path.with_suffix(".lat").read_bytes())
        latencies.extend(chunk)
    latencies.sort()
    pacing.sort()

    def ms(fraction: float) -> float | None:
        value = percentile(latencies, fraction)
        return None if value is None else round(value / 1000, 2)

    received = counts.get("chunks_received", 0)
    return {
        "sessions": len(ids),
        "latency_ms": {
            "n": len(latencies),
            "median": ms(0.5),
            "p90": ms(0.9),
            "p99": ms(0.99),
            "max": None if not latencies else round(latencies[-1] / 1000, 2),
            "min": None if not latencies else round(latencies[0] / 1000, 2),
        },
        "deltas": {
            "received_chunks": received,
            "frames": counts.get("delta_frames", 0),
            "coalesced": received - counts.get("delta_frames", 0),
            "seq_gaps": counts.get("seq_gaps", 0),
            "dropped_replies": counts.get("bad_replies", 0),
            "in_window": counts.get("chunks_in_window", 0),
            "per_s_in_window": round(counts.get("chunks_in_window", 0) / args.duration),
        },
        "streaming_at_once": round(counts.get("chunks_in_window", 0) / args.duration / args.rate),
        "turns": counts.get("turns", 0),
        "tool_turns": counts.get("tool_turns", 0),
        "errors": counts.get("errors", 0),
        "disconnects": counts.get("disconnects", 0),
        "faults": faults,
        "pace_interval_ms": {
            "median": percentile(pacing, 0.5) and round(percentile(pacing, 0.5) / 1000, 2),
            "p99": percentile(pacing, 0.99) and round(percentile(pacing, 0.99) / 1000, 2),
        },
        "daemon_cpu_share": round(cpu / wall, 3),
        # CPU per delta delivered: the figure a loaded machine leaves comparable (wall-time
        # latency moves with the other load; the work done per delta does not).
        "daemon_cpu_us_per_delta": per_delta(cpu, wall, counts, args.duration),
        "loadgen_cpu_us_per_delta": per_delta(worker_cpu, wall, counts, args.duration),
        "daemon_sys_us_per_delta": per_delta(daemon_sys, wall, counts, args.duration),
        "loadgen_sys_us_per_delta": per_delta(worker_sys, wall, counts, args.duration),
        "daemon_cpu_wait_share": round(waited / wall, 3),
        "loadgen_cpu_share": round(worker_cpu / wall, 3),
        "daemon_rss_mb": round(rss_end / 2**20, 1),
        "daemon_rss_peak_mb": round(rss_peak / 2**20, 1),
        "slow_client": slow_seen,
    }


def per_delta(cpu: float, wall: float, counts: dict[str, int], duration: float) -> float | None:
    """Microseconds of CPU per delta handed off in the window (``cpu`` over ``wall`` seconds,
    scaled to the window's ``duration``)."""
    deltas = counts.get("chunks_in_window", 0)
    return round(cpu / wall * duration / deltas * 1e6, 1) if deltas else None


def report(step: dict[str, Any], label: str = "") -> None:
    """One line about a step on stderr."""
    lat = step["latency_ms"]
    print(
        f"  {step['sessions']} sessions{label}: p50 {lat['median']} ms, p99 {lat['p99']} ms, "
        f"max {lat['max']} ms; {step['deltas']['per_s_in_window']} deltas/s "
        f"(~{step['streaming_at_once']} streaming), coalesced {step['deltas']['coalesced']}, "
        f"dropped {step['deltas']['dropped_replies']}, errors {step['errors']}, disconnects "
        f"{step['disconnects']}; daemon CPU {step['daemon_cpu_share'] * 100:.0f} %, "
        f"waiting for a CPU {step.get('daemon_cpu_wait_share', 0) * 100:.0f} %, "
        f"load CPU {step['loadgen_cpu_share'] * 100:.0f} %, RSS {step['daemon_rss_mb']} MB; "
        f"CPU per delta: daemon {step.get('daemon_cpu_us_per_delta')} us "
        f"(sys {step.get('daemon_sys_us_per_delta')}), load "
        f"{step.get('loadgen_cpu_us_per_delta')} us (sys {step.get('loadgen_sys_us_per_delta')})",
        file=sys.stderr,
        flush=True,
    )


def measured_step(
    daemon: DaemonProcess, ids: list[str], args: argparse.Namespace, tmp: Path, slow: str | None
) -> dict[str, Any]:
    """:func:`run_workers` with the daemon's own coalescing and drop counts around it."""
    stats0 = trio.run(host_command, daemon.port, {"type": "stats"})
    step = run_workers(daemon, ids, args, tmp, slow)
    stats = trio.run(host_command, daemon.port, {"type": "stats"})
    step["daemon_coalesced"] = stats["coalesced_total"] - stats0["coalesced_total"]
    step["daemon_dropped_clients"] = (
        stats["dropped_clients_total"] - stats0["dropped_clients_total"]
    )
    return step


def fresh_daemon(
    tmp: Path, name: str, variant: tuple[list[str], Path | None], count: int
) -> tuple[DaemonProcess, list[str]]:
    """A new daemon with ``count`` sessions created."""
    daemon = DaemonProcess(tmp / name, *variant)
    created = time.monotonic()
    ids = trio.run(create_sessions, daemon.port, count) if count else []
    if count:
        print(f"  ({count} sessions in {time.monotonic() - created:.1f} s)", file=sys.stderr)
    return daemon, ids


def parse_variants(specs: list[str]) -> list[tuple[str, tuple[list[str], Path | None]]]:
    """``NAME=[@DIR] ARGS`` → (name, (the daemon's extra arguments, the package's source
    directory when not this checkout)); none given: one plain daemon."""
    if not specs:
        return [("default", ([], None))]
    variants: list[tuple[str, tuple[list[str], Path | None]]] = []
    for spec in specs:
        name, _, rest = spec.partition("=")
        words = shlex.split(rest)
        source = None
        if words and words[0].startswith("@"):
            source = Path(words.pop(0)[1:]).resolve()
        variants.append((name, (words, source)))
    return variants


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every step, a fresh daemon each (one per variant, the variants taking turns, so a
    before/after comparison shares the machine's state)."""
    tmp = Path(tempfile.mkdtemp(prefix="pitrio-load-"))
    variants = parse_variants(args.variant)
    steps: list[dict[str, Any]] = []
    slow_runs: list[dict[str, Any]] = []
    rss_empty: dict[str, float] = {}
    codes: list[int] = []
    try:
        for round_, count in enumerate(args.sessions):
            for name, variant in variants:
                # A step repeated (``--sessions 400 400``) is a round of its own.
                daemon, ids = fresh_daemon(tmp, f"{name}-{count}-{round_}", variant, 0)
                rss_empty[name] = round(rss_bytes(daemon.pid) / 2**20, 1)
                try:
                    ids = trio.run(create_sessions, daemon.port, count)
                    step = measured_step(daemon, ids, args, tmp, None)
                finally:
                    codes.append(daemon.stop())
                step["variant"] = name
                steps.append(step)
                report(step, f" [{name}]" if len(variants) > 1 else "")
        if args.slow:
            count = args.slow
            name, variant = variants[-1]
            daemon, ids = fresh_daemon(tmp, f"slow-{count}", variant, count + 1)
            # Long enough for the slow client to fill its buffers and stall a send past the
            # daemon's stall_seconds (15 s).
            slow_args = argparse.Namespace(**{**vars(args), "duration": args.slow_duration})
            try:
                for with_slow in (False, True):
                    slow = ids[count] if with_slow else None
                    step = measured_step(daemon, ids[:count], slow_args, tmp, slow)
                    step["with_slow_client"] = with_slow
                    step["variant"] = name
                    slow_runs.append(step)
                    report(step, " + a slow client" if with_slow else " (no slow client)")
            finally:
                codes.append(daemon.stop())
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "meta": {
            "rate": args.rate,
            "chunks": args.chunks,
            "chunk_chars": [6, 9],
            "think_s": args.think,
            "tool_share": args.tool_share,
            "workers": args.workers,
            "client": args.client,
            "warmup_s": args.warmup,
            "duration_s": args.duration,
            "pacing": "paced faux model in the daemon (PITRIO_FAUX_SCRIPT=load)",
            "clock": "CLOCK_MONOTONIC, hand-off time embedded in each chunk",
            "cpus": os.cpu_count(),
            "loadavg_end": os.getloadavg(),
            "daemon_rss_empty_mb": rss_empty,
            "daemon_exits": codes,
            "variants": {
                name: [*(["@" + str(source)] if source else []), *extra]
                for name, (extra, source) in variants
            },
        },
        "workloads": {"daemon_load": {"steps": steps, "slow_client": slow_runs}},
    }


def main(argv: list[str] | None = None) -> int:
    """Run, write the JSON (and the chart)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, nargs="+", default=STEPS)
    parser.add_argument("--workers", type=int, default=3, help="load-generator processes")
    parser.add_argument("--rate", type=float, default=50.0, help="chunks per second per session")
    parser.add_argument("--chunks", type=int, nargs=2, default=[100, 300], metavar=("MIN", "MAX"))
    parser.add_argument("--think", type=float, nargs=2, default=[0.2, 0.6], metavar=("MIN", "MAX"))
    parser.add_argument("--tool-share", type=float, default=0.2, help="turns calling a tool")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds measured")
    parser.add_argument(
        "--slow",
        type=int,
        default=0,
        metavar="N",
        help="also N sessions without/with a slow client",
    )
    parser.add_argument("--slow-duration", type=float, default=25.0, help="seconds measured")
    parser.add_argument("--slow-rate", type=float, default=400.0, help="the slow client's pace")
    parser.add_argument(
        "--profile", type=Path, help="py-spy the daemon in each window into PATH-<sessions>"
    )
    parser.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: only samples holding the GIL (Python's own CPU), and the "
        "workers of `--workers N` too",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=ARGS",
        help="a daemon variant: its extra serve arguments, after @DIR to run the package copy in "
        "DIR (e.g. `git archive REV pitrio | tar -x -C DIR`); several take turns at each step",
    )
    parser.add_argument(
        "--client",
        choices=("poll", "wsproto", "trio-websocket"),
        default="poll",
        help="the load generator's websocket clients: all on one epoll loop (the cheapest), a "
        "trio task each on wsproto alone, or trio-websocket",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--chart", type=Path, help="also draw the curve into this PNG")
    args = parser.parse_args(argv)
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if args.chart is not None:
        from bench.charts import daemon_load

        daemon_load(result, args.chart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
