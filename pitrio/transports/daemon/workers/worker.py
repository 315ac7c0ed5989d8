"""One worker process of ``pitrio serve --workers N``.

A worker is a whole daemon (model router, host, server) that does not listen: its connections
arrive from the acceptor over the hand-off socket, with the request head the acceptor already
read, and it serves each one itself. Over the control socket it claims the sessions it
creates (so the acceptor sends their clients here), answers the acceptor's requests for its
rows, metrics and commands on its sessions, and asks the acceptor for the other workers'.
It stops gracefully on SIGTERM/SIGINT, and when the acceptor goes away.
"""

from __future__ import annotations

# First: the SDK's modules load under the attrs method cache, the collector off (start-up).
from pitrio.sdk import agent as _sdk  # noqa: F401  # isort: skip

import argparse
import logging
import os
import signal
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection

from pitrio import logs
from pitrio.errors import PitrioError
from pitrio.sdk.host import HostHandle
from pitrio.sdk.models import ModelRouterHandle
from pitrio.transports.daemon import metrics
from pitrio.transports.daemon.context import DaemonConfig
from pitrio.transports.daemon.host_socket import (
    NAMED_COMMANDS,
    HostSocket,
    create_session,
    session_command,
)
from pitrio.transports.daemon.server import DaemonServer
from pitrio.transports.daemon.socket_base import CLOSE_POLICY
from pitrio.transports.daemon.workers.channel import (
    ControlChannel,
    HandoffReceiver,
)
from pitrio.transports.daemon.workers.host_socket import (
    ClusterHostSocket,
    decode_result,
    encode_result,
)
from pitrio.transports.rpc.protocol import Request

log = logging.getLogger("pitrio.daemon")

EXIT_ORPHANED = 70
"""A worker's exit code when its acceptor went away without stopping it."""
EXIT_FAULT = 71
"""A worker's exit code when a test's fault file told it to die on a hand-off."""
HANDOFF_FAULT_ENV = "PITRIO_TEST_HANDOFF_FAULT"
"""For tests only: the path of a file. The first worker to receive a hand-off while it exists
removes it and does what it says: ``die`` (exit at once, holding the descriptor, before
acknowledging it) or ``hang`` (keep the descriptor, never acknowledge nor serve it)."""
NO_OWNS_NOTICES_ENV = "PITRIO_TEST_NO_OWNS_NOTICES"
"""For tests only: set, a worker does not claim the sessions it creates from its host's
``session_created`` events (the backstop), so that a test sees the explicit claims suffice."""


def metric_json(family: metrics.Metric) -> dict[str, Any]:
    """A metric family as JSON, to travel to the worker that answers ``/metrics``."""
    return {
        "name": family.name,
        "kind": family.kind,
        "help": family.help,
        "samples": [[dict(labels), value] for labels, value in family.samples],
    }


def merge_metrics(answers: list[dict[str, Any]]) -> list[metrics.Metric]:
    """Every worker's families as one list: a family's samples from all workers, each labelled
    with its ``worker``."""
    merged: dict[str, tuple[dict[str, Any], list[tuple[dict[str, str], float]]]] = {}
    for answer in answers:
        worker = str(answer.get("worker"))
        for family in answer.get("data") or ():
            entry = merged.setdefault(family["name"], (family, []))
            for labels, value in family["samples"]:
                entry[1].append(({**labels, "worker": worker}, value))
    return [
        metrics.Metric(head["name"], head["kind"], head["help"], tuple(samples))
        for head, samples in merged.values()
    ]


class WorkerServer(DaemonServer):
    """A daemon server fed by the acceptor instead of a listening socket."""

    def __init__(
        self,
        config: DaemonConfig,
        host: HostHandle,
        router: ModelRouterHandle,
        *,
        slot: int,
        link: ControlChannel,
        handoff: HandoffReceiver,
    ) -> None:
        super().__init__(config, host, router)
        self.slot = slot
        self.link = link
        self.handoff = handoff
        self.acceptor_gone = trio.Event()
        self._fault_file = os.environ.get(HANDOFF_FAULT_ENV)
        self._held: list[socket.socket] = []
        self.host_clients: set[ClusterHostSocket] = set()
        """This worker's ``/v1/host`` clients, for the other workers' host events."""

    async def listen(self) -> list[trio.SocketListener]:
        """No listening socket: the port is the acceptor's (given in the configuration)."""
        return []

    async def accept(self, listeners: list[trio.SocketListener], connections: trio.Nursery) -> None:
        """Serve each connection the acceptor hands over, until it closes its end."""
        while True:
            batch = await self.handoff.receive()  # every connection waiting: one wake-up
            if batch is None:
                self.acceptor_gone.set()
                await trio.sleep_forever()
                return
            for client, meta, data in batch:
                fault = self._fault()
                if fault == "die":
                    os._exit(EXIT_FAULT)
                if fault == "hang":
                    self._held.append(client)
                    continue
                # Acknowledged before a byte is read: until then the acceptor may give the
                # connection to another worker (should this one die now).
                await self.handoff.acknowledge(meta)
                size = meta.get("head")
                if not isinstance(size, int) or not 0 < size <= len(data):
                    client.close()
                    continue
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(client))
                self.counters["handoffs"] += 1
                connections.start_soon(self.serve_connection, stream, (data[:size], data[size:]))

    def _fault(self) -> str | None:
        """What the test's fault file says, once (removing it claims it: one worker acts)."""
        if self._fault_file is None:
            return None
        try:
            text = Path(self._fault_file).read_text().strip()
            os.unlink(self._fault_file)
        except OSError:
            return None
        return text

    def host_socket(self, ws: WebSocketConnection) -> HostSocket:
        """``/v1/host`` answered across every worker."""
        return ClusterHostSocket(self, ws)

    async def claim(self, session: str) -> int:
        """Ask the acceptor to give ``session`` to this worker: the worker owning it now."""
        return int(await self.link.call("claim", session=session))

    async def session_made(self, session_id: str) -> None:
        """A session a client's ``new_session``/``fork``/``clone`` made here: claimed before
        the command is answered (the host's ``session_created`` notice would race the
        client's next connection). Another worker keeping it (a repeated command whose first
        answer was made elsewhere) is logged: the client's connections go there."""
        owner = await self.claim(session_id)
        if owner != self.slot:
            logs.event(log, "made_session_owned_elsewhere", session=session_id, owner=owner)

    async def forward(self, owner: int, request: Request) -> Any:
        """Have worker ``owner`` answer a ``/v1/host`` command on its session."""
        answer = await self.link.call("call", slot=owner, what="host", request=request.fields)
        return decode_result(answer)

    async def metrics(self) -> list[metrics.Metric]:
        """Every worker's metrics, each sample naming its worker."""
        answers = await self.link.call("gather", what="metrics")
        return merge_metrics(answers)

    def notice(self, message: dict[str, Any]) -> None:
        """A notice of the acceptor: another worker's host event for this worker's host
        clients, or the news that some were dropped (each client is then closed, 1008)."""
        match message.get("op"):
            case "host_event":
                event = message.get("event")
                if isinstance(event, dict):
                    for client in list(self.host_clients):
                        client.relayed(event)
            case "host_events_lost":
                for client in list(self.host_clients):
                    self.spawn(client.close(CLOSE_POLICY, "client too slow: host events dropped"))
            case op:
                log.error("unknown notice %r from the acceptor", op)

    async def answer(self, message: dict[str, Any]) -> Any:
        """A request of the acceptor (for itself or on behalf of another worker)."""
        match message.get("op"):
            case "list":
                return await self.host.list()
            case "search":
                return await self.host.search(str(message.get("query")))
            case "metrics":
                return [metric_json(family) for family in await super().metrics()]
            case "host":
                fields = message.get("request")
                if not isinstance(fields, dict):
                    raise PitrioError("host: request must be an object")
                request = Request(fields.get("id"), str(fields.get("type")), fields)
                if request.type == "create":
                    data = await create_session(self.host, request, None)
                    await self.claim(data["sessionId"])  # before the client learns the id
                    return encode_result(data)
                if request.type in NAMED_COMMANDS:
                    return encode_result(await session_command(self.host, request))
                raise PitrioError(f"host: {request.type} is not forwarded")
        raise PitrioError(f"unknown request {message.get('op')!r}")


class _Answerer:
    """Answers the acceptor's requests once the server exists (before: an error; its notices
    are dropped: no host client is connected yet)."""

    server: WorkerServer | None = None

    async def __call__(self, message: dict[str, Any]) -> Any:
        if self.server is None:
            raise PitrioError("the worker is starting")
        return await self.server.answer(message)

    def notice(self, message: dict[str, Any]) -> None:
        """A notice of the acceptor."""
        if self.server is not None:
            self.server.notice(message)


async def _report_sessions(host: HostHandle, link: ControlChannel, owns: bool) -> None:
    """Send the acceptor every host event, in order, for the other workers' host clients;
    claim every session this worker creates (``owns``: a backstop, each creation path claims
    before answering) and give back every one it deletes. Dropped by the host for falling
    behind, it says the events were lost (the other workers close their host clients) and
    subscribes again."""
    while True:
        events = await host.subscribe()
        async with events:
            async for event in events:
                session = event.get("sessionId")
                if event.get("type") == "session_created" and owns:
                    await link.notify("owns", session=session)
                elif event.get("type") == "session_deleted":
                    await link.notify("forget", session=session)
                await link.notify("host_event", event=event)
        await link.notify("host_events_lost")


async def _work(args: argparse.Namespace) -> int:
    from pitrio.transports.serve import exit_on_second_signal, open_prepared, prepare

    slot: int = args.worker_slot
    control = trio.SocketStream(
        trio.socket.from_stdlib_socket(socket.socket(fileno=args.worker_control))
    )
    handoff = HandoffReceiver(socket.socket(fileno=args.worker_handoff))
    answerer = _Answerer()
    link = ControlChannel(control, answerer, answerer.notice)

    def make_server(
        config: DaemonConfig, host: HostHandle, router: ModelRouterHandle
    ) -> DaemonServer:
        return WorkerServer(config, host, router, slot=slot, link=link, handoff=handoff)

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as receiver:
        prepared = await prepare(args)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(link.run)
            async with open_prepared(args, prepared, make_server) as daemon:
                server = daemon.server
                assert isinstance(server, WorkerServer)
                answerer.server = server
                owns = not os.environ.get(NO_OWNS_NOTICES_ENV)
                daemon.nursery.start_soon(_report_sessions, daemon.host, link, owns)
                await link.notify("ready", pid=os.getpid())
                logs.event(log, "worker_started", pid=os.getpid())
                async with trio.open_nursery() as waiting:

                    async def until_signal() -> None:
                        async for signum in receiver:
                            logs.event(log, "signal", signal=signal.Signals(signum).name)
                            daemon.nursery.start_soon(exit_on_second_signal, receiver)
                            break
                        waiting.cancel_scope.cancel()

                    async def until_orphaned() -> None:
                        await link.closed.wait()
                        # The acceptor is the daemon: killed, it takes its workers with it,
                        # as SIGKILL takes a one-process daemon (every acknowledged entry is
                        # on disk already; the next daemon reaps the tool processes left).
                        # Serving on would keep sessions locked from the next daemon.
                        logs.event(log, "acceptor_gone", logging.ERROR)
                        sys.stderr.flush()
                        os._exit(EXIT_ORPHANED)

                    waiting.start_soon(until_signal)
                    waiting.start_soon(until_orphaned)
            nursery.cancel_scope.cancel()
    logs.event(log, "worker_stopped")
    return 0


def worker_parser() -> argparse.ArgumentParser:
    """``pitrio serve``'s arguments and the worker's own (its slot and its two sockets)."""
    from pitrio.transports.serve import build_parser

    parser = build_parser()
    parser.add_argument("--worker-slot", type=int, required=True, help=argparse.SUPPRESS)
    parser.add_argument("--worker-control", type=int, required=True, help=argparse.SUPPRESS)
    parser.add_argument("--worker-handoff", type=int, required=True, help=argparse.SUPPRESS)
    parser.add_argument("--worker-owner", help=argparse.SUPPRESS)
    return parser


def preload() -> None:
    """Import what a worker imports only when it starts: done once by the fork server's
    parent before forking it, so that no forked worker imports it again."""
    from pitrio.transports import serve, trace_cli  # noqa: F401


def worker_main(argv: Sequence[str]) -> int:
    """Entry point of a worker process; returns the exit code."""
    args = worker_parser().parse_args(list(argv))
    logs.configure(args.log_level, args.log_format)
    logs.name_worker(args.worker_slot)
    from pitrio.transports.trace_cli import recording_sessions

    try:
        with recording_sessions(directory=args.trace, payloads=args.trace_payloads):
            return trio.run(_work, args)
    except PitrioError as exc:
        logs.event(log, "worker_failed", logging.ERROR, error=str(exc))
        return 1


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
