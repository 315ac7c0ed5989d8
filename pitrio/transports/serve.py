"""``pitrio serve``: the daemon process (many sessions, websocket clients, a web page).

:func:`open_daemon` starts the model router, the host and the server in a nursery (tests and
benchmarks use it in-process); :func:`serve_one` is the one-process daemon of the command
(:mod:`pitrio.transports.serve_entry` chooses it or the workers): it prints the page's address
(with the token in the URL fragment, which browsers never send to a server), writes
``<agent dir>/daemon.json`` so ``pitrio attach`` finds the daemon, logs JSON lines on stderr,
and shuts down gracefully on SIGTERM/SIGINT: stop accepting, abort runs, flush every session,
close sockets with 1001, exit 0 within 10 s. A second signal exits at once.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio import logs
from pitrio.errors import PitrioError, collapse_groups
from pitrio.sdk.host import EvictionPolicy, HostConfig, HostHandle, start_host
from pitrio.sdk.models import FauxProvider, ModelRouterHandle, RouterConfig, start_model_router
from pitrio.sdk.store import agent_dir as default_agent_dir
from pitrio.sdk.store import configured_store
from pitrio.sdk.tools import reap_orphans, record_groups_in
from pitrio.telemetry import active as active_telemetry
from pitrio.telemetry.daemon import daemon_counts
from pitrio.transports.daemon.frames import delta_frame
from pitrio.transports.daemon.security import load_or_create_token, token_path
from pitrio.transports.daemon.server import DaemonConfig, DaemonServer

log = logging.getLogger("pitrio.daemon")

DEFAULT_PORT = 8321
HOST_STOP_SECONDS = 7.0
"""Aborting runs and flushing sessions at shutdown; the whole exit stays under 10 s."""
SOCKETS_STOP_SECONDS = 2.0
STATE_FILE = "daemon.json"


ServerFactory = Callable[[DaemonConfig, HostHandle, ModelRouterHandle], DaemonServer]
"""Makes a daemon's server from its configuration, host and router."""


@attrs.define
class Daemon:
    """A running daemon: its server, host and router."""

    server: DaemonServer
    host: HostHandle
    router: ModelRouterHandle
    nursery: trio.Nursery
    stopped: bool = False

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self.server.port

    async def shutdown(self) -> None:
        """Stop accepting, abort runs and flush every session, close sockets with 1001."""
        if self.stopped:
            return
        self.stopped = True
        with trio.CancelScope(shield=True):
            self.server.stop_listening()
            logs.event(log, "daemon_stopping")
            with trio.move_on_after(HOST_STOP_SECONDS):
                await self.host.shutdown()
            self.server.closing.set()
            with trio.move_on_after(SOCKETS_STOP_SECONDS):
                await self.server.sockets_closed()
        self.nursery.cancel_scope.cancel()


@asynccontextmanager
async def open_daemon(
    daemon: DaemonConfig,
    host: HostConfig,
    *,
    faux: FauxProvider | None = None,
    router_config: RouterConfig | None = None,
    store: str | None = None,
    store_options: Any = None,
    server_factory: ServerFactory | None = None,
    store_owner: str | None = None,
) -> AsyncIterator[Daemon]:
    """Start a daemon; leaving the block shuts it down gracefully.

    ``store``: a ``postgresql://`` URL to keep sessions in that database, shared with other
    daemons (``store_options``: its ``BackendOptions``), instead of session files.
    ``server_factory``: makes the server (a worker of ``--workers`` takes its connections
    from the acceptor instead of listening). ``store_owner``: the lease owner's id in the
    database (default: one of this process's own; the workers of one daemon share theirs).
    """
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            backend = None
            if store is not None:
                backend = await _start_store(nursery, store, store_options, store_owner)
                host = attrs.evolve(host, store=backend)
            router = await start_model_router(nursery, faux, config=router_config)
            host_handle = await start_host(
                nursery, router, attrs.evolve(host, encode_frame=delta_frame)
            )
            server = (server_factory or DaemonServer)(daemon, host_handle, router)
            await nursery.start(server.serve)
            if backend is not None:
                backend.set_url(server.url)  # told to clients of other daemons
            running = Daemon(server, host_handle, router, nursery)
            telemetry = active_telemetry()
            if telemetry is not None:  # OpenTelemetry's gauges read the daemon's figures
                telemetry.watch_daemon(daemon_counts(server))
            try:
                yield running
            finally:
                if telemetry is not None:
                    telemetry.watch_daemon(None)
                await running.shutdown()


async def _start_store(
    nursery: trio.Nursery, url: str, options: Any, owner_id: str | None = None
) -> Any:
    """Start the PostgreSQL store (imported here: psycopg is an optional dependency)."""
    from pitrio.sdk.postgres import PgBackend, is_postgres_url

    if not is_postgres_url(url):
        raise PitrioError("--store must be a postgresql:// URL (the default is session files)")
    from pitrio.sdk.postgres import Owner

    backend = PgBackend(url, Owner(id=owner_id) if owner_id else Owner.this_process(), options)
    await nursery.start(backend.run)
    return backend


def _store_options(lease_seconds: float) -> Any:
    from pitrio.sdk.postgres import BackendOptions, LeaseTerms

    try:
        return BackendOptions(terms=LeaseTerms(duration=lease_seconds))
    except ValueError as exc:
        raise PitrioError(f"--lease-seconds: {exc}") from exc


# -- the command -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The arguments of ``pitrio serve``."""
    parser = argparse.ArgumentParser(
        prog="pitrio serve", description="Run the pitrio daemon: many sessions over websockets."
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free one)")
    parser.add_argument(
        "--workers",
        type=worker_count,
        default=None,
        metavar="N",
        help="worker processes sharing the port, each owning its own sessions (default: the "
        "cores this process may use; 1: everything in this one process)",
    )
    parser.add_argument("--cwd", help="working directory of new sessions (default: here)")
    parser.add_argument("--model", help="default model of new sessions (provider/id)")
    parser.add_argument("--session-dir", help="one directory for every session file")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="keep sessions in PostgreSQL (postgresql://...), shared with other daemons "
        "(default: the session.store setting, else session files)",
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="with --store: how long a session's lease outlives a daemon that stopped renewing "
        "it (default 15)",
    )
    parser.add_argument(
        "--idle",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="evict a session idle this long (0: never; default 600)",
    )
    parser.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed besides the daemon's own page (repeatable)",
    )
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="accept clients without the token (loopback addresses only)",
    )
    parser.add_argument("--max-message-size", type=int, default=16 << 20, metavar="BYTES")
    parser.add_argument("--rate", type=float, default=50.0, help="messages per second per client")
    parser.add_argument("--burst", type=int, default=200, help="message burst per client")
    parser.add_argument(
        "--handshake-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="longest wait for a connection's HTTP request (and, with workers, for a worker to "
        "take it) before it is closed or answered 503 (default 10)",
    )
    parser.add_argument(
        "--send-batch",
        type=int,
        default=64,
        metavar="FRAMES",
        help="most queued frames written to a client in one write (1: a write per frame)",
    )
    parser.add_argument(
        "--faux-chunk-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="pause between the faux models' streamed chunks (demos and tests)",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        type=str.lower,
        choices=logs.LEVELS,
        help="the least important log events written to stderr (default info)",
    )
    parser.add_argument(
        "--log-format",
        default="json",
        choices=logs.FORMATS,
        help="stderr log lines: one JSON object each (default), or readable text",
    )
    parser.add_argument(
        "--gc-threshold",
        type=gc_thresholds,
        default=DAEMON_GC_THRESHOLDS,
        metavar="YOUNG,MIDDLE,OLD",
        help="the cyclic garbage collector's thresholds (default 50000,20,10; 'python': "
        "the interpreter's own)",
    )
    parser.add_argument(
        "--trace", metavar="DIR", help="record each session into DIR/<session id>.jsonl"
    )
    parser.add_argument(
        "--trace-payloads", action="store_true", help="with --trace: record message payloads"
    )
    return parser


def worker_count(text: str) -> int:
    """``--workers``: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of workers; got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A duration in seconds, finite and above zero."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds; got {text!r}")
    return value


def available_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


DAEMON_GC_THRESHOLDS = (50_000, 20, 10)
"""The daemon's collector thresholds. CPython's (700, 10, 10) collect the youngest objects
every 700 allocations; under a streaming load the events and frames queued between a
daemon's tasks live that long, are promoted and soon count as old, and a full collection of
every session's objects follows every second or so (hundreds of milliseconds each at 1,000
sessions: measured, DESIGN-NOTES, issue 27). With 50,000 they are freed by reference
counting before a collection looks at them."""


def gc_thresholds(text: str) -> tuple[int, int, int] | None:
    """``--gc-threshold``: three positive integers (young, middle, old), or ``python`` for
    the interpreter's own (``None``: left as they are)."""
    if text.strip().lower() == "python":
        return None
    parts = text.split(",")
    try:
        values = tuple(int(part) for part in parts)
    except ValueError:
        values = ()
    if len(values) != 3 or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected three positive integers such as 50000,20,10, or python; got {text!r}"
        )
    return values[0], values[1], values[2]


def _write_state(agent: Path, url: str) -> Path:
    path = agent / STATE_FILE
    agent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump({"url": url, "pid": os.getpid()}, file)
    return path


def read_state(agent: Path) -> dict[str, object] | None:
    """What a running daemon wrote into ``daemon.json`` (its ``url``), if anything."""
    try:
        value = json.loads((agent / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def raise_open_files_limit() -> tuple[int, int]:
    """The open-files soft limit raised to the hard one; ``(soft, hard)`` as they are after.

    A live session holds one descriptor (its lease's lock file; its file is opened per write),
    so the usual soft limit of 1,024 stops a daemon near 1,000 sessions, long before its
    memory does; the hard limit is what the system lets it have without privileges (Go's
    runtime raises it the same way). A hard limit of "unlimited" is taken as the kernel's
    per-process maximum."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            target = int(Path("/proc/sys/fs/nr_open").read_text())
        except (OSError, ValueError):
            target = 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, hard
    return target, hard


def _faux(delay: float) -> FauxProvider | None:
    import pitrio

    faux = pitrio.default_faux()
    if delay > 0:
        faux = faux or FauxProvider()
        faux.chunk_delay = delay
    return faux


@attrs.frozen
class Prepared:
    """What ``pitrio serve``'s arguments and environment make of a daemon (or a worker)."""

    agent: Path
    daemon: DaemonConfig
    host: HostConfig
    token: str | None
    store: str | None
    open_files: int


async def prepare(args: argparse.Namespace) -> Prepared:
    """Reap a killed daemon's tool processes, raise the open-files limit, set the
    collector's thresholds, read (or create) the token; the daemon's configuration."""
    agent = default_agent_dir()
    # Tool processes of a daemon that was killed (SIGKILL, power loss of the process) end
    # before this one serves; this daemon's own are recorded for its successor to do the same.
    groups = agent / "run" / "tool-groups"
    killed = await trio.to_thread.run_sync(reap_orphans, groups)
    if killed:
        logs.event(log, "orphans_reaped", logging.WARNING, process_groups=len(killed))
    record_groups_in(groups)
    open_files, _ = raise_open_files_limit()
    if args.gc_threshold is not None:
        gc.set_threshold(*args.gc_threshold)
    token: str | None = None
    if not args.no_auth:
        token, created = load_or_create_token(agent)
        if created:
            logs.event(log, "token_created", path=str(token_path(agent)))
    daemon_config = DaemonConfig(
        host=args.host,
        port=args.port,
        token=token,
        allowed_origins=tuple(args.allow_origin),
        max_message_size=args.max_message_size,
        message_rate=args.rate,
        message_burst=args.burst,
        send_batch=max(1, args.send_batch),
        handshake_timeout=args.handshake_timeout,
    )
    host_config = HostConfig(
        agent_dir=agent,
        session_dir=args.session_dir,
        default_cwd=args.cwd,
        default_model=args.model,
        eviction=EvictionPolicy(idle_seconds=args.idle if args.idle > 0 else None),
    )
    store = configured_store(agent, args.store)
    if store:
        from pitrio.transports.cli_hints import require_postgres

        require_postgres()  # before the store's modules import psycopg (issue 24)
    return Prepared(agent, daemon_config, host_config, token, store, open_files)


@asynccontextmanager
async def open_prepared(
    args: argparse.Namespace, prepared: Prepared, server_factory: ServerFactory | None = None
) -> AsyncIterator[Daemon]:
    """:func:`open_daemon` with what :func:`prepare` made of ``args``."""
    store = prepared.store
    async with open_daemon(
        prepared.daemon,
        prepared.host,
        faux=_faux(args.faux_chunk_delay),
        store=store,
        store_options=_store_options(args.lease_seconds) if store else None,
        server_factory=server_factory,
        # A worker of ``--workers`` holds leases as its daemon (the acceptor's id): a sibling
        # retakes a dead worker's sessions at once instead of waiting for their leases.
        store_owner=getattr(args, "worker_owner", None),
    ) as running:
        yield running


def announce(args: argparse.Namespace, prepared: Prepared, url: str, **fields: Any) -> Path:
    """Print the start-up lines, write ``daemon.json``, log ``daemon_started`` (with
    ``fields``); the state file's path, to remove at exit."""
    agent, token = prepared.agent, prepared.token
    state = _write_state(agent, url)
    page = f"{url}#token={token}" if token else url
    lines = [f"pitrio daemon listening on {url}", f"web page: {page}"]
    if token:
        lines.append(f"token: {token_path(agent)}")
    # One write of whole lines: a worker of ``--workers`` writes its log lines to the same
    # output, and print()'s separate write of the newline (unbuffered output) let one land
    # inside the address line.
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    sys.stdout.flush()
    logs.event(
        log,
        "daemon_started",
        url=url,
        pid=os.getpid(),
        auth=token is not None,
        store="postgresql" if prepared.store else "files",
        idle_seconds=args.idle,
        open_files=prepared.open_files,
        gc_threshold=list(gc.get_threshold()),
        **fields,
    )
    return state


async def serve_one(args: argparse.Namespace) -> int:
    """The daemon in this one process (``--workers 1``): serve until SIGTERM or SIGINT; the
    exit code."""
    signals = (signal.SIGTERM, signal.SIGINT)
    with trio.open_signal_receiver(*signals) as receiver:
        prepared = await prepare(args)
        async with open_prepared(args, prepared) as d:
            state = announce(args, prepared, d.server.url)
            try:
                async for signum in receiver:
                    logs.event(log, "signal", signal=signal.Signals(signum).name)
                    d.nursery.start_soon(exit_on_second_signal, receiver)
                    break
            finally:
                with suppress(OSError):
                    state.unlink()
    logs.event(log, "daemon_stopped")
    return 0


async def exit_on_second_signal(receiver: AsyncIterator[int]) -> None:
    """Exit at once on the next signal (a second request while shutting down)."""
    async for signum in receiver:
        os._exit(128 + signum)  # a second request while shutting down: leave now


def run_daemon(args: argparse.Namespace, main: Callable[..., Awaitable[int]], *rest: Any) -> int:
    """``trio.run(main, *rest)``: its exit code, or 1 with a pitrio error or a failure to
    listen written as one line on stderr."""
    try:
        with collapse_groups():
            return trio.run(main, *rest)
    except PitrioError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"Error: cannot listen on {args.host}:{args.port}: {exc}\n")
        return 1
