"""Chaos under load: two ``pitrio serve`` daemons on one PostgreSQL store, faults, and a check.

Two real daemons (``PITRIO_FAUX_SCRIPT=load``: paced, streaming faux replies) share one
PostgreSQL database with short leases. ``--sessions`` sessions are made, half on each daemon;
one websocket client per session sends a sequence of commands with ids of its own (prompts
that stream, and ``bash`` commands that append to a file in the sessions' working directory).
A client that loses its connection, or gets an error, reconnects (to the owner a daemon names,
else the other daemon) and sends the same command again with the same id, until it is
answered; a share of answered commands is sent again on purpose and must come back as a
duplicate. Meanwhile a seeded schedule injects ``--faults`` of each kind:

* ``kill``: SIGKILL a daemon, start it again on the same port;
* ``stop``: SIGSTOP a daemon for ``--stop-leases`` times its lease, then SIGCONT;
* ``pg``: stop PostgreSQL like a crash (``immediate``), start it again;
* ``disk``: fill the sessions' working directory, a small tmpfs mounted in the temporary
  directory, for a while (their ``bash`` commands then fail with ENOSPC), then free it.

Afterwards, from PostgreSQL's rows: every acknowledged command's entry is present exactly once
(``lost`` and ``duplicates``), no prompt produced two user entries or two replies, and every
client's final view (``get_messages`` over its websocket) equals the messages the rows hold.
Failover times are the client-side outages: from a command's first failed attempt to its
answer. ``tests/faults/test_chaos.py`` runs a small seeded version; on demand:

    .venv/bin/python bench/chaos.py --sessions 200 --faults 3 --seed 7 --out chaos.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.chaos_client import ChaosClient, Targets, text_of  # noqa: E402
from tests.actors.pg_cluster import Cluster, free_port  # noqa: E402

PITRIO = str(Path(sys.executable).parent / "pitrio")
KINDS = ("kill", "stop", "pg", "disk")


@attrs.frozen
class ChaosConfig:
    """One chaos run's parameters."""

    sessions: int = 20
    faults: int = 1
    """Faults of each kind."""
    seed: int = 1
    commands: int = 4
    """Commands each client sends at least (it goes on until the last fault is over)."""
    lease: float = 1.5
    stop_leases: float = 2.0
    chunks: int = 20
    rate: float = 40.0
    repeat_share: float = 0.3
    gap: tuple[float, float] = (0.5, 1.5)
    """Seconds between faults."""
    deadline: float = 240.0


class DaemonProcess:
    """A ``pitrio serve`` process on a fixed port, which can be killed and started again."""

    def __init__(self, name: str, root: Path, url: str, lease: float) -> None:
        self.name = name
        self.port = free_port()
        self.url = f"ws://127.0.0.1:{self.port}"
        self.process: trio.Process | None = None
        self.env = {
            **os.environ,
            "PITRIO_AGENT_DIR": str(root / name),
            "PITRIO_FAUX_SCRIPT": "load",
        }
        self.env.pop("PITRIO_SESSION_DIR", None)
        self.log = root / f"{name}.log"
        self.command = [
            PITRIO, "serve", "--port", str(self.port), "--no-auth", "--store", url,
            "--lease-seconds", str(lease), "--cwd", str(root / "work"), "--idle", "0",
            "--rate", "1000", "--burst", "1000", "--log-level", "warning", "--model", "faux/echo",
        ]  # fmt: skip

    async def start(self) -> None:
        """Start the process and wait until it listens."""
        log = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.process = await trio.lowlevel.open_process(
                self.command, env=self.env, stdout=subprocess.PIPE, stderr=log
            )
        finally:
            os.close(log)
        assert self.process.stdout is not None
        buffer = b""
        with trio.fail_after(60):
            while b"listening on" not in buffer:
                chunk = await self.process.stdout.receive_some(4096)
                if not chunk:
                    raise RuntimeError(f"daemon {self.name} ended at start: see {self.log}")
                buffer += chunk
        # Nobody reads the rest: the daemon writes nothing more there at this log level.

    def signal(self, number: int) -> None:
        """Send a signal to the running process."""
        assert self.process is not None
        self.process.send_signal(number)

    async def kill(self) -> None:
        """SIGKILL, and reap."""
        if self.process is not None and self.process.returncode is None:
            self.process.kill()
            await self.process.wait()

    async def stop(self) -> None:
        """End the process politely (SIGTERM), else kill it."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.send_signal(signal.SIGCONT)
        self.process.terminate()
        with trio.move_on_after(10):
            await self.process.wait()
        await self.kill()


@attrs.define
class Disk:
    """The sessions' working directory: a small tmpfs when mounting works (we run as root)."""

    path: Path
    mounted: bool = False

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(self.path)],
            capture_output=True,
            check=False,
        )
        self.mounted = done.returncode == 0

    def fill(self) -> int:
        """Write a file until the file system is full; its size."""
        written = 0
        fd = os.open(self.path / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:  # unbuffered: nothing is left to write (and fail) at close
            while True:
                written += os.write(fd, b"\0" * 65536)
        except OSError:
            return written
        finally:
            os.close(fd)

    def free(self) -> None:
        (self.path / "filler").unlink(missing_ok=True)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, check=False)


@attrs.define
class Injected:
    """A fault as it happened."""

    kind: str
    target: str
    at: float
    seconds: float


async def inject(
    kinds: list[str],
    config: ChaosConfig,
    daemons: list[DaemonProcess],
    cluster: Cluster,
    disk: Disk,
    rng: random.Random,
    started: float,
) -> list[Injected]:
    """Run the fault schedule; return what was done."""
    done: list[Injected] = []
    for kind in kinds:
        await trio.sleep(rng.uniform(*config.gap))
        daemon = rng.choice(daemons)
        began = time.monotonic()
        target = daemon.name
        if kind == "kill":
            await daemon.kill()
            await trio.sleep(rng.uniform(0.1, 2 * config.lease))  # past the lease or not
            await daemon.start()
        elif kind == "stop":
            daemon.signal(signal.SIGSTOP)
            await trio.sleep(config.lease * config.stop_leases)
            daemon.signal(signal.SIGCONT)
        elif kind == "pg":
            target = "postgresql"
            await trio.to_thread.run_sync(cluster.stop, "immediate")
            await trio.sleep(rng.uniform(0.2, 1.0))
            await trio.to_thread.run_sync(cluster.start)
        elif kind == "disk":
            target = "tmpfs"
            await trio.to_thread.run_sync(disk.fill)
            await trio.sleep(rng.uniform(1.0, 2.0))
            disk.free()
        done.append(Injected(kind, target, round(began - started, 2), time.monotonic() - began))
    return done


def store_rows(url: str) -> dict[str, list[dict[str, Any]]]:
    """Every session's entries as the database holds them, in order."""
    import psycopg

    rows: dict[str, list[dict[str, Any]]] = {}
    with psycopg.connect(url) as conn:
        for session_id, payload in conn.execute(
            "SELECT session_id, payload::text FROM pitrio_entries ORDER BY session_id, seq"
        ):
            rows.setdefault(session_id, []).append(orjson.loads(payload))
    return rows


def message_texts(entries: list[dict[str, Any]]) -> list[str]:
    """``role:text`` of each message entry, as a client's ``get_messages`` shows them."""
    out = []
    for entry in entries:
        if entry.get("type") != "message":
            continue
        out.append(text_of(entry["message"]))
    return out


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (``None`` when empty)."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))], 3)


def check(clients: list[ChaosClient], rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Compare what the clients were told with what the database holds."""
    lost: list[str] = []
    duplicates: list[str] = []
    twice: list[str] = []
    inconsistent: list[str] = []
    details: list[str] = []
    acked_entries = 0
    for client in clients:
        entries = rows.get(client.session_id, [])
        stamped = Counter(
            e["pitrioCommand"]["id"] for e in entries if isinstance(e.get("pitrioCommand"), dict)
        )
        for key, count in stamped.items():
            if count > 1:
                duplicates.append(key)
                details.append(f"{where(key, entries)}; client: {client.notes.get(key)}")
        for key in client.acked:
            if stamped[key] == 0:
                lost.append(key)
                details.append(f"{key} lost in {client.session_id}: {client.notes.get(key)}")
        acked_entries += sum(stamped[key] for key in client.acked)
        # A prompt's run, once: after its user entry, one reply before the next user entry.
        roles = [e["message"]["role"] for e in entries if e.get("type") == "message"]
        replies = 0
        for role in [*roles, "user"]:
            if role == "user":
                if replies > 1:
                    twice.append(client.session_id)
                replies = 0
            elif role == "assistant":
                replies += 1
        stored = message_texts(entries)
        if client.final_view != stored:
            at = next(
                (
                    i
                    for i, pair in enumerate(zip(client.final_view, stored, strict=False))
                    if pair[0] != pair[1]
                ),
                min(len(client.final_view), len(stored)),
            )
            inconsistent.append(
                f"{client.session_id}: at {at} client {client.final_view[at : at + 1]}"
                f" store {stored[at : at + 1]} ({len(client.final_view)}/{len(stored)})"
            )
    return {
        "acked_commands": sum(len(c.acked) for c in clients),
        "acked_entries": acked_entries,
        "store_entries": sum(len(v) for v in rows.values()),
        "lost": lost,
        "duplicates": duplicates,
        "prompts_run_twice": twice,
        "bash_records_with_enospc": sum(
            "No space left" in str(e["message"].get("output", ""))
            for entries in rows.values()
            for e in entries
            if e.get("type") == "message" and e["message"].get("role") == "bashExecution"
        ),
        "inconsistent_views": inconsistent,
        "details": details,
    }


def where(key: str, entries: list[dict[str, Any]]) -> str:
    """Where command ``key``'s entries stand in its session (for a duplicate's report)."""
    found = []
    for index, entry in enumerate(entries):
        if (entry.get("pitrioCommand") or {}).get("id") == key:
            kind = entry.get("message", {}).get("role") or entry.get("type")
            found.append(
                f"#{index} {kind} {entry.get('id')} {entry.get('timestamp')}"
                f" parent {entry.get('parentId')}"
            )
    return f"{key} twice: " + "; ".join(found)


async def run_chaos(config: ChaosConfig, root: Path, cluster: Cluster, url: str) -> dict[str, Any]:
    """Run one chaos round against ``url`` (a migrated database of ``cluster``)."""
    rng = random.Random(config.seed)
    disk = Disk(root / "work")
    disk.mount()
    daemons = [DaemonProcess(name, root, url, config.lease) for name in ("a", "b")]
    kinds = [kind for kind in KINDS for _ in range(config.faults)]
    if not disk.mounted:
        kinds = [kind for kind in kinds if kind != "disk"]
    rng.shuffle(kinds)
    try:
        async with trio.open_nursery() as nursery:
            for daemon in daemons:
                nursery.start_soon(daemon.start)
        targets = Targets([d.url for d in daemons])
        clients = [
            ChaosClient(
                index=i,
                targets=targets,
                home=i % 2,
                rng=random.Random(config.seed * 100_003 + i),
                prompt=f"load n={config.chunks} rate={config.rate}",
                repeat_share=config.repeat_share,
                patience=config.lease * 2,
            )
            for i in range(config.sessions)
        ]
        started = time.monotonic()
        injected: list[Injected] = []
        # A run past its deadline still reports (what each unfinished client was doing).
        with trio.move_on_after(config.deadline) as limit:
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(client.create)
            faults_over = trio.Event()

            async def faults() -> None:
                injected.extend(await inject(kinds, config, daemons, cluster, disk, rng, started))
                faults_over.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(faults)
                for client in clients:
                    nursery.start_soon(client.run, config.commands, faults_over)
            async with trio.open_nursery() as nursery:
                for client in clients:
                    nursery.start_soon(client.final)
        elapsed = time.monotonic() - started
        if limit.cancelled_caught:  # a fault may have been cut short: the database must run
            with contextlib.suppress(subprocess.SubprocessError):
                await trio.to_thread.run_sync(cluster.start)
        rows = await trio.to_thread.run_sync(store_rows, url)
    finally:
        for daemon in daemons:
            await daemon.stop()
        disk.unmount()
    outages = [o for c in clients for o in c.outages]
    return {
        "sessions": config.sessions,
        "seed": config.seed,
        "lease_seconds": config.lease,
        "disk_fault": "tmpfs" if disk.mounted else "skipped: mounting a tmpfs failed",
        "faults": [attrs.asdict(i) for i in injected],
        "faults_by_kind": dict(Counter(i.kind for i in injected)),
        "seconds": round(elapsed, 1),
        "commands_sent": sum(c.sent for c in clients),
        "resends": sum(c.resends for c in clients),
        "deliberate_repeats": sum(c.repeats for c in clients),
        "repeats_not_flagged_duplicate": sum(c.unflagged for c in clients),
        "reconnects": sum(c.reconnects for c in clients),
        "error_answers": dict(sum((c.errors for c in clients), Counter())),
        "failover_p50": percentile(outages, 0.5),
        "failover_p99": percentile(outages, 0.99),
        "failover_max": percentile(outages, 1.0),
        "failovers": len(outages),
        "timed_out": limit.cancelled_caught,
        "unfinished": [
            f"{c.index} {c.session_id}: {c.current} {c.notes.get(c.current, [])[-3:]}"
            for c in clients
            if not c.done
        ],
        **check(clients, rows),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    """Start a private cluster, run, remove it."""
    import psycopg

    from pitrio.actors.session_store.postgres.database import migrate
    from tests.actors.pg_cluster import start_cluster

    cluster = await trio.to_thread.run_sync(start_cluster)
    root = Path(tempfile.mkdtemp(prefix="pitrio-chaos-"))
    try:
        with psycopg.connect(cluster.url(), autocommit=True) as conn:
            conn.execute(b"CREATE DATABASE chaos")
        with psycopg.connect(cluster.url("chaos"), autocommit=True) as conn:
            migrate(conn)
        config = ChaosConfig(
            sessions=args.sessions,
            faults=args.faults,
            seed=args.seed,
            commands=args.commands,
            lease=args.lease,
            deadline=args.deadline,
        )
        return await run_chaos(config, root, cluster, cluster.url("chaos"))
    finally:
        cluster.remove()
        if not args.keep:
            await trio.to_thread.run_sync(
                functools.partial(shutil.rmtree, root, ignore_errors=True)
            )


def main() -> None:
    """The on-demand chaos run."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--faults", type=int, default=2, help="faults of each kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--commands", type=int, default=4, help="commands per client, at least")
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--deadline", type=float, default=900.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the daemons' logs")
    args = parser.parse_args()
    report = trio.run(main_async, args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
