"""Helpers for the daemon tests: an in-process daemon on 127.0.0.1 port 0 and JSON clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from pitrio.actors.host import HostConfig
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.model_router.actor import RouterConfig
from pitrio.transports.daemon.server import DaemonConfig
from pitrio.transports.serve import Daemon, open_daemon
from pitrio.transports.websocket_pings import answer_pings_only_while_open
from tests.stray_cancel import no_stray_cancel

# The tests' clients are trio-websocket's: a daemon ping during their close (every 0.3 s in the
# half-open tests) must not fail the close (see the module).
answer_pings_only_while_open()

TOKEN = "test-token-0123456789"
AUTH = [(b"Authorization", f"Bearer {TOKEN}".encode())]


@asynccontextmanager
async def running_daemon(
    agent: Path,
    faux: FauxProvider | None = None,
    *,
    daemon: dict[str, Any] | None = None,
    host: dict[str, Any] | None = None,
) -> AsyncIterator[Daemon]:
    """A daemon with the test token, sessions under ``agent``."""
    work = agent.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    config = DaemonConfig(port=0, token=TOKEN, **(daemon or {}))
    host_config = HostConfig(agent_dir=agent, default_cwd=str(work), **(host or {}))
    async with open_daemon(
        config, host_config, faux=faux or FauxProvider(), router_config=RouterConfig(agent_dir=None)
    ) as running:
        with no_stray_cancel():
            yield running


@asynccontextmanager
async def connect(
    daemon: Daemon, path: str, *, headers: list[tuple[bytes, bytes]] | None = None, **kw: Any
) -> AsyncIterator[WebSocketConnection]:
    """A websocket to the daemon (authorised unless ``headers`` says otherwise)."""
    url = f"ws://127.0.0.1:{daemon.port}{path}"
    async with open_websocket_url(
        url, extra_headers=AUTH if headers is None else headers, **kw
    ) as ws:
        with no_stray_cancel():
            yield ws


async def send(ws: WebSocketConnection, value: dict[str, Any]) -> None:
    await ws.send_message(json.dumps(value))


async def receive(ws: WebSocketConnection, seconds: float = 10.0) -> dict[str, Any]:
    with trio.fail_after(seconds):
        value: dict[str, Any] = json.loads(await ws.get_message())
    return value


async def until(
    ws: WebSocketConnection,
    done: Callable[[dict[str, Any]], bool],
    seconds: float = 20.0,
) -> list[dict[str, Any]]:
    """Every frame up to and including the first one ``done`` accepts."""
    frames: list[dict[str, Any]] = []
    with trio.fail_after(seconds):
        while True:
            frame = json.loads(await ws.get_message())
            frames.append(frame)
            if done(frame):
                return frames


def is_response(request_id: Any) -> Callable[[dict[str, Any]], bool]:
    return lambda frame: frame.get("type") == "response" and frame.get("id") == request_id


def settled(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "agent_settled"


def text_of_deltas(frames: list[dict[str, Any]]) -> str:
    return "".join(
        f["assistantMessageEvent"]["delta"]
        for f in frames
        if f.get("type") == "message_update" and f["assistantMessageEvent"]["type"] == "text_delta"
    )


async def create_session(daemon: Daemon, **fields: Any) -> str:
    async with connect(daemon, "/v1/host") as host:
        await receive(host)  # host_attached
        await send(host, {"id": "c", "type": "create", **fields})
        frames = await until(host, is_response("c"))
    response = frames[-1]
    assert response["success"], response
    session_id: str = response["data"]["sessionId"]
    return session_id
