"""A worker of ``serve --workers`` in this process, its acceptor played by the test: the other
workers' host events reach its ``/v1/host`` clients after ``host_attached`` and in order, and
the news that some were dropped closes each of them with 1008."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from pitrio.actors.host import HostConfig
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.model_router.actor import RouterConfig
from pitrio.errors import PitrioError
from pitrio.sdk.host import HostHandle
from pitrio.sdk.models import ModelRouterHandle
from pitrio.transports.daemon.http import read_head
from pitrio.transports.daemon.server import DaemonConfig, DaemonServer
from pitrio.transports.daemon.workers.channel import (
    ControlChannel,
    HandoffLink,
    HandoffReceiver,
)
from pitrio.transports.daemon.workers.worker import WorkerServer
from pitrio.transports.serve import open_daemon
from tests.stray_cancel import no_stray_cancel
from tests.transports.daemon_harness import receive


class Acceptor:
    """The test's side of one worker's two sockets, and a port for its clients."""

    def __init__(self, listener: trio.SocketListener, control: ControlChannel) -> None:
        self.listener = listener
        self.control = control
        self.handoff: HandoffLink | None = None

    async def host_client(self, nursery: trio.Nursery) -> WebSocketConnection:
        """A ``/v1/host`` client handed to the worker, its ``host_attached`` read."""
        port = self.listener.socket.getsockname()[1]
        connected: trio.MemorySendChannel[WebSocketConnection]
        connected, receiving = trio.open_memory_channel[WebSocketConnection](1)

        async def client() -> None:
            async with open_websocket_url(f"ws://127.0.0.1:{port}/v1/host") as ws:
                await connected.send(ws)
                await trio.sleep_forever()

        nursery.start_soon(client)
        stream = await self.listener.accept()
        head, rest = await read_head(stream)
        assert self.handoff is not None
        assert await self.handoff.hand(stream.socket.fileno(), {"head": len(head)}, head + rest)
        stream.socket.close()  # acknowledged: the worker holds it now
        ws = await receiving.receive()
        assert (await receive(ws))["type"] == "host_attached"
        return ws


async def _refuse(message: dict[str, Any]) -> Any:
    raise PitrioError(f"not played by the test: {message.get('op')}")


@asynccontextmanager
async def one_worker(tmp_path: Path) -> AsyncIterator[Acceptor]:
    parent_control, child_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    parent_handoff, child_handoff = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    worker_side: list[WorkerServer] = []

    def notice(message: dict[str, Any]) -> None:
        worker_side[0].notice(message)

    link = ControlChannel(
        trio.SocketStream(trio.socket.from_stdlib_socket(child_control)), _refuse, notice
    )
    control = ControlChannel(
        trio.SocketStream(trio.socket.from_stdlib_socket(parent_control)),
        _refuse,
        lambda message: None,
    )

    def make_server(
        config: DaemonConfig, host: HostHandle, router: ModelRouterHandle
    ) -> DaemonServer:
        server = WorkerServer(
            config,
            host,
            router,
            slot=0,
            link=link,
            handoff=HandoffReceiver(child_handoff),
        )
        worker_side.append(server)
        return server

    (listener,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    acceptor = Acceptor(listener, control)
    work = tmp_path / "work"
    work.mkdir()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(link.run)
        nursery.start_soon(control.run)
        acceptor.handoff = HandoffLink(trio.socket.from_stdlib_socket(parent_handoff))
        nursery.start_soon(acceptor.handoff.run)
        async with open_daemon(
            DaemonConfig(port=0, token=None),
            HostConfig(agent_dir=tmp_path / "agent", default_cwd=str(work)),
            faux=FauxProvider(),
            router_config=RouterConfig(agent_dir=None),
            server_factory=make_server,
        ):
            with no_stray_cancel():
                yield acceptor
            acceptor.handoff.close()
        nursery.cancel_scope.cancel()
    await listener.aclose()


def _event(kind: str, session: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "sessionId": session, **fields}


async def test_other_workers_events_reach_host_clients_in_order_and_a_loss_closes_them(
    tmp_path: Path,
) -> None:
    with trio.fail_after(30):
        async with one_worker(tmp_path) as acceptor, trio.open_nursery() as nursery:
            clients = [await acceptor.host_client(nursery) for _ in range(2)]
            sent = [
                _event("session_created", "s1"),
                _event("session_busy", "s1"),
                _event("session_renamed", "s1", name="a"),
                _event("session_idle", "s1"),
            ]
            for event in sent:
                await acceptor.control.notify("host_event", event=event)
            for ws in clients:
                assert [await receive(ws) for _ in sent] == sent
            await acceptor.control.notify("host_events_lost", event=None)
            for ws in clients:
                with pytest.raises(ConnectionClosed) as closed:
                    await receive(ws)
                assert closed.value.reason.code == 1008
                assert closed.value.reason.reason == "client too slow: host events dropped"
            nursery.cancel_scope.cancel()
