"""The acceptor of ``pitrio serve --workers N``: one listening port, N worker processes.

For each connection it reads the request head (nothing more is parsed), picks the worker
(:class:`.table.Table`: the owner of the session a ``/v1/sessions/{id}`` upgrade names; any
other request round robin) and passes the socket's descriptor and the bytes read to it
(:class:`.channel.HandoffLink`); its own copy is closed once the worker acknowledged it, so
every byte after the head flows between the client and the worker alone (a worker that exits
before acknowledging has the connection given to a live one; none within the handshake
timeout: 503 with ``Retry-After``). It keeps N workers running: one that exits is
started again (its sessions are given to the live workers as their clients come back), with a
growing pause when they keep dying. It answers the workers' control requests: claims,
requests for another worker, gathering from every worker (listings, metrics), and relays
each worker's host events to the others (:mod:`.relay`).
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import time
from collections import Counter, deque
from contextlib import suppress
from functools import partial
from typing import Any

import orjson
import trio

from pitrio import logs
from pitrio.errors import PitrioError
from pitrio.sdk.host import InvalidSessionIdError, validate_session_id
from pitrio.transports.daemon.http import BadRequest, parse_head, read_head, response
from pitrio.transports.daemon.server import check_bind
from pitrio.transports.daemon.workers.channel import (
    ControlChannel,
    HandoffLink,
    PeerGoneError,
    RemoteError,
)
from pitrio.transports.daemon.workers.forkserver import Child, Forks
from pitrio.transports.daemon.workers.relay import Relay
from pitrio.transports.daemon.workers.table import NoWorkerError, Table

log = logging.getLogger("pitrio.daemon.workers")

SESSIONS_PREFIX = "/v1/sessions/"
STOP_SECONDS = 10.0
"""How long the workers have to stop gracefully before they are killed."""
FORK_SERVER_STOP_SECONDS = 5.0
"""How long the fork server has to exit once its workers have."""
RESTART_PAUSES = (0.0, 0.5, 1.0, 2.0, 5.0)
"""The pause before starting a worker again, by how many times it died in the last minute."""


def session_of(head: bytes) -> str | None:
    """The session a websocket upgrade to ``/v1/sessions/{id}`` names, else ``None`` (any
    worker then serves the request, and refuses it if it must)."""
    try:
        parsed = parse_head(head)
    except BadRequest:
        return None
    if not parsed.is_websocket or not parsed.path.startswith(SESSIONS_PREFIX):
        return None
    try:
        return validate_session_id(parsed.path[len(SESSIONS_PREFIX) :])
    except InvalidSessionIdError:
        return None


class WorkerStartError(PitrioError):
    """A worker exited before the daemon first served."""


class Acceptor:
    """Listens on one port and keeps ``slots`` workers serving it."""

    def __init__(
        self,
        args: argparse.Namespace,
        argv: list[str],
        slots: int,
        handshake_timeout: float,
        forks: Forks | None = None,
    ) -> None:
        self.args = args
        self.forks = forks if forks is not None else Forks()
        """Forks the workers (started at the first one, unless given running)."""
        self.argv = argv
        self.table = Table(slots)
        self.handshake_timeout = handshake_timeout
        self.port = args.port
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        """The workers' lease owner id in a shared store: the daemon's, one for all of them
        (a worker that dies leaves leases its siblings may retake at once; the table keeps two
        live workers from ever opening one session, and the fence still moves)."""
        self.stopping = False
        self.serving = False
        """Set once every worker was ready at start."""
        self.counters: Counter[str] = Counter()
        self._links: dict[int, ControlChannel] = {}
        self._handoffs: dict[int, HandoffLink] = {}
        self._relays: dict[int, Relay] = {}
        self._generations = [0] * slots
        """Per slot, how many of its worker processes have exited."""
        self._processes: dict[int, Child] = {}
        self._live_changed = trio.Event()
        self._listen_scope = trio.CancelScope()
        self._stopped: dict[int, trio.Event] = {slot: trio.Event() for slot in range(slots)}

    # -- running -------------------------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Acceptor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen, start the workers, and serve once every worker is ready."""
        listeners = await trio.open_tcp_listeners(self.args.port, host=self.args.host)
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            await nursery.start(self.forks.run)
            for slot in range(self.table.slots):
                nursery.start_soon(self._keep, slot)
            while len(self.table.live) < self.table.slots:
                await self._live_changed.wait()
            self.serving = True
            task_status.started(self)
            with self._listen_scope:
                await trio.serve_listeners(self._connection, listeners, handler_nursery=nursery)
            for listener in listeners:
                await listener.aclose()

    async def stop(self) -> None:
        """Stop listening; ask every worker to stop (SIGTERM), kill those still running after
        :data:`STOP_SECONDS`, and return once all have exited (and so has the fork server)."""
        self.stopping = True
        self._listen_scope.cancel()
        for process in self._processes.values():
            process.send_signal(signal.SIGTERM)
        with trio.move_on_after(STOP_SECONDS):
            for stopped in self._stopped.values():
                await stopped.wait()
        for process in self._processes.values():
            process.kill()
        # Its children gone, the fork server exits at once; one that does not is killed (and
        # any worker still there with it, by its death signal).
        await self.forks.aclose(FORK_SERVER_STOP_SECONDS)

    def _argv(self, slot: int) -> list[str]:
        """Worker ``slot``'s arguments (the fork server adds its two descriptors' options)."""
        return [
            *self.argv,
            # Later options win: the port actually bound, the absolute cwd, one process each.
            *("--port", str(self.port), "--cwd", self.args.cwd, "--workers", "1"),
            *("--worker-slot", str(slot)),
            *("--worker-owner", self.owner),
        ]

    async def _keep(self, slot: int) -> None:
        """Run worker ``slot`` until the acceptor stops, starting it again when it exits."""
        deaths: deque[float] = deque()
        try:
            while not self.stopping:
                code = await self._run_worker(slot)
                if self.stopping:
                    return
                if not self.serving:
                    # It never served: whatever stopped it (a port, a store, a setting) will
                    # stop it again; the daemon fails to start rather than retrying forever.
                    raise WorkerStartError(
                        f"worker {slot} exited with code {_code(code)} while starting (its log "
                        "lines above say why)"
                    )
                now = time.monotonic()
                deaths.append(now)
                while deaths and deaths[0] < now - 60:
                    deaths.popleft()
                self.counters["worker_restarts"] += 1
                await trio.sleep(RESTART_PAUSES[min(len(deaths), len(RESTART_PAUSES)) - 1])
        finally:
            self._stopped[slot].set()

    async def _run_worker(self, slot: int) -> int | None:
        """Fork worker ``slot`` and serve its sockets until it exits; its exit code (``None``:
        unknown, its fork server died with it)."""
        parent_control, child_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        parent_handoff, child_handoff = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # In its own session (a terminal's Ctrl-C reaches the acceptor alone, which then
            # stops the workers in order rather than seeing them exit and restarting them).
            process = await self.forks.spawn(
                self._argv(slot),
                (child_control.fileno(), child_handoff.fileno()),
                ("--worker-control", "--worker-handoff"),
                f"pitrio-worker{slot}",
            )
        except BaseException:
            parent_control.close()
            parent_handoff.close()
            raise
        finally:
            child_control.close()
            child_handoff.close()
        link = ControlChannel(
            trio.SocketStream(trio.socket.from_stdlib_socket(parent_control)),
            partial(self._answer, slot),
            partial(self._notice, slot),
        )
        self._links[slot] = link
        relay = self._relays[slot] = Relay()
        handoff = self._handoffs[slot] = HandoffLink(trio.socket.from_stdlib_socket(parent_handoff))
        self._processes[slot] = process
        if self.stopping:  # the stop began while it was forked: it was not among those asked
            process.send_signal(signal.SIGTERM)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(link.run)
                nursery.start_soon(handoff.run)
                nursery.start_soon(relay.run, partial(_send_notice, link))
                code = await process.wait()
                nursery.cancel_scope.cancel()
        finally:
            lost = self.table.down(slot)
            self._generations[slot] += 1
            self._live_changed.set()
            self._live_changed = trio.Event()
            self._handoffs.pop(slot).close()
            self._links.pop(slot, None)
            self.counters["host_events_dropped"] += self._relays.pop(slot).dropped
            with suppress(trio.ClosedResourceError, trio.BrokenResourceError):
                await link.stream.aclose()
        level = logging.INFO if self.stopping else logging.ERROR
        logs.event(
            log, "worker_exited", level, worker=slot, pid=process.pid, code=code, sessions=len(lost)
        )
        return code

    # -- connections ---------------------------------------------------------------------------

    async def _connection(self, stream: trio.SocketStream) -> None:
        try:
            await self._route(stream)
        except Exception:
            # A bug while routing one connection must not take the daemon down.
            log.exception("error while routing a connection")
            with suppress(OSError):
                stream.socket.close()

    async def _route(self, stream: trio.SocketStream) -> None:
        try:
            with trio.fail_after(self.handshake_timeout):
                head, rest = await read_head(stream)
        except BadRequest as exc:
            body = orjson.dumps({"error": str(exc)}) + b"\n"
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                with trio.move_on_after(self.handshake_timeout):
                    await stream.send_all(
                        response(exc.status, body, content_type="application/json")
                    )
            await stream.aclose()
            return
        except (trio.TooSlowError, trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.aclose()
            return
        session = session_of(head)
        try:
            await self._hand_over(stream, session, head, rest)
        finally:
            # The worker holds its own descriptor for the connection now (or it is dropped).
            stream.socket.close()

    async def _hand_over(
        self, stream: trio.SocketStream, session: str | None, head: bytes, rest: bytes
    ) -> None:
        """Pass the connection to its worker and hold on to it until that worker acknowledged
        it: a worker that exits first (before or just after it received the descriptor) gets
        it taken back, and once its exit is seen (its sessions then belong to nobody, its
        files are closed) the connection goes to a live worker. Never silence: no
        acknowledgement within the handshake timeout is a 503 with a ``Retry-After``."""
        meta = {"head": len(head)}
        with trio.move_on_after(self.handshake_timeout):
            while True:
                try:
                    slot = self.table.route(session) if session else self.table.any()
                except NoWorkerError:
                    await self._live_changed.wait()  # every worker is (re)starting
                    continue
                generation = self._generations[slot]
                link = self._handoffs.get(slot)
                try:
                    acked = link is not None and await link.hand(
                        stream.socket.fileno(), meta, head + rest
                    )
                except (OSError, trio.ClosedResourceError):
                    acked = False
                if acked:
                    self.counters["handoffs"] += 1
                    logs.event(log, "handed_over", logging.DEBUG, worker=slot, session=session)
                    return
                # The worker cannot take it (its socket broke, or it exited holding the
                # descriptor before acknowledging): it is ended if it still runs, and the
                # connection waits for its exit to be seen, then goes to another one.
                self.counters["handoffs_rerouted"] += 1
                logs.event(log, "handoff_rerouted", logging.WARNING, worker=slot, session=session)
                process = self._processes.get(slot)
                if process is not None and not process.exited:
                    process.kill()
                while self._generations[slot] == generation:
                    await self._live_changed.wait()
        self.counters["handoffs_refused"] += 1
        logs.event(log, "handoff_failed", logging.WARNING, session=session)
        await _unavailable(stream, self.handshake_timeout)

    # -- the workers' requests -----------------------------------------------------------------

    def _notice(self, slot: int, message: dict[str, Any]) -> None:
        """A worker's notice, taken at once and in order."""
        match message.get("op"):
            case "ready":
                self.table.up(slot)
                self._live_changed.set()
                self._live_changed = trio.Event()
                logs.event(log, "worker_ready", worker=slot, pid=message.get("pid"))
            case "owns":
                self.table.claim(_session(message), slot)
            case "forget":
                self.table.forget(_session(message), slot)
            case "host_event" | "host_events_lost":
                relayed = {"op": message["op"], "event": message.get("event")}
                for other, relay in self._relays.items():
                    if other != slot:
                        relay.put(relayed)
            case op:
                log.error("unknown notice %r from worker %s", op, slot)

    async def _answer(self, slot: int, message: dict[str, Any]) -> Any:
        op = message.get("op")
        match op:
            case "place":
                return self.table.place()
            case "claim":
                return self.table.claim(_session(message), slot)
            case "call":
                target = message.get("slot")
                link = self._links.get(target) if isinstance(target, int) else None
                if link is None or target not in self.table.live:
                    raise PitrioError(f"worker {target} is restarting; try again shortly")
                return await link.call(**_request(message))
            case "gather":
                return await self._gather(_request(message))
        raise PitrioError(f"unknown request {op!r}")

    async def _gather(self, request: dict[str, Any]) -> list[dict[str, Any]]:
        """Ask every live worker the same request: ``[{"worker", "data"}, ...]``."""
        answers: list[dict[str, Any]] = []

        async def ask(slot: int, link: ControlChannel) -> None:
            try:
                answers.append({"worker": slot, "data": await link.call(**request)})
            except PeerGoneError:
                pass  # it died meanwhile: its sessions are nobody's until asked for
            except RemoteError as exc:
                logs.event(log, "gather_failed", logging.WARNING, worker=slot, error=str(exc))

        async with trio.open_nursery() as nursery:
            for slot in sorted(self.table.live):
                link = self._links.get(slot)
                if link is not None:
                    nursery.start_soon(ask, slot, link)
        answers.sort(key=lambda answer: answer["worker"])
        if request.get("op") == "metrics":
            answers.append({"worker": "acceptor", "data": self._metrics()})
        return answers

    def _metrics(self) -> list[dict[str, Any]]:
        def family(name: str, kind: str, text: str, value: float) -> dict[str, Any]:
            return {"name": name, "kind": kind, "help": text, "samples": [[{}, value]]}

        return [
            family("pitrio_workers", "gauge", "Worker processes.", self.table.slots),
            family("pitrio_workers_live", "gauge", "Workers serving.", len(self.table.live)),
            family(
                "pitrio_worker_restarts_total",
                "counter",
                "Workers started again after exiting.",
                self.counters["worker_restarts"],
            ),
            family(
                "pitrio_handoffs_total",
                "counter",
                "Connections passed to a worker.",
                self.counters["handoffs"],
            ),
            family(
                "pitrio_handoffs_rerouted_total",
                "counter",
                "Hand-offs taken back from a worker that exited before acknowledging them.",
                self.counters["handoffs_rerouted"],
            ),
            family(
                "pitrio_handoffs_refused_total",
                "counter",
                "Connections answered 503 because no worker acknowledged them in time.",
                self.counters["handoffs_refused"],
            ),
            family(
                "pitrio_host_events_dropped_total",
                "counter",
                "Host events of one worker dropped on their way to a worker that fell behind.",
                self.counters["host_events_dropped"]
                + sum(relay.dropped for relay in self._relays.values()),
            ),
        ]


RETRY_AFTER_SECONDS = 1
"""What a client refused for want of a worker is told to wait (a worker restarts in about a
second)."""


async def _unavailable(stream: trio.SocketStream, send_seconds: float) -> None:
    """Answer a connection no worker took: 503, try again shortly. Shut down, not just closed:
    a worker that was stuck and takes the descriptor later finds the connection ended."""
    body = orjson.dumps({"error": "no worker could take the connection; try again shortly"})
    data = response(
        503,
        body + b"\n",
        content_type="application/json",
        headers=(("Retry-After", str(RETRY_AFTER_SECONDS)),),
    )
    with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        with trio.move_on_after(send_seconds):
            await stream.send_all(data)
    with suppress(OSError):
        stream.socket.shutdown(socket.SHUT_RDWR)


async def _send_notice(link: ControlChannel, message: dict[str, Any]) -> None:
    await link.notify(**message)


def _session(message: dict[str, Any]) -> str:
    session = message.get("session")
    if not isinstance(session, str):
        raise PitrioError("session must be a string")
    return session


def _request(message: dict[str, Any]) -> dict[str, Any]:
    """A worker's request for other workers: its ``what`` becomes their ``op``."""
    fields = {key: value for key, value in message.items() if key not in ("id", "op", "slot")}
    fields["op"] = fields.pop("what", None)
    return fields


async def _accept(args: argparse.Namespace, argv: list[str], forks: Forks) -> int:
    from pitrio.transports.serve import announce, exit_on_second_signal, prepare

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as receiver:
        prepared = await prepare(args)  # creates the token before any worker reads it
        check_bind(prepared.daemon)  # a worker would refuse it at every start
        acceptor = Acceptor(args, argv, args.workers, prepared.daemon.handshake_timeout, forks)
        async with trio.open_nursery() as nursery:
            await nursery.start(acceptor.run)
            url = f"http://{_url_host(args.host)}:{acceptor.port}/"
            state = announce(args, prepared, url, workers=args.workers)
            try:
                async for signum in receiver:
                    logs.event(log, "signal", signal=signal.Signals(signum).name)
                    nursery.start_soon(exit_on_second_signal, receiver)
                    break
                with trio.CancelScope(shield=True):
                    logs.event(log, "daemon_stopping")
                    await acceptor.stop()
            finally:
                with suppress(OSError):
                    state.unlink()
            nursery.cancel_scope.cancel()
    logs.event(log, "daemon_stopped")
    return 0


def _code(code: int | None) -> str:
    return "unknown (its fork server died)" if code is None else str(code)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def acceptor_main(args: argparse.Namespace, argv: list[str]) -> int:
    """``pitrio serve --workers N`` with N > 1; returns the exit code.

    The fork server is forked first, before trio runs here, once the workers' modules are
    imported: each worker is then a fork of it (a few milliseconds, its pages shared) rather
    than a new interpreter importing them all again."""
    from pitrio.transports.daemon.workers.forkserver import can_fork_here, fork_server
    from pitrio.transports.daemon.workers.worker import preload, worker_main
    from pitrio.transports.serve import run_daemon

    preload()
    # Otherwise (threads, telemetry) the first worker's start starts one as its own process.
    forks = Forks(fork_server(worker_main) if can_fork_here() else None)
    return run_daemon(args, _accept, args, argv, forks)
