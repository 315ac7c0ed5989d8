"""``pitrio serve --workers 2`` from the outside: real processes, real websockets.

One daemon serves the whole module (its start-up, about a second, is paid once): sessions
created through two ``/v1/host`` connections land in both workers, each session's connections
reach its owner, the listing covers both workers, ``/metrics`` names them, and a worker killed
with SIGKILL has its session resumed in another worker by ``seq``.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection, open_websocket_url

from tests.transports.attach_harness import serve_process
from tests.transports.daemon_harness import is_response, receive, send, settled, until

PITRIO = str(Path(sys.executable).parent / "pitrio")


class Workers:
    """A running ``pitrio serve --workers 2``."""

    def __init__(self, process: trio.Process, url: str, token: str) -> None:
        self.process = process
        self.ws = url.replace("http://", "ws://").rstrip("/")
        self.url = url
        self.headers = [(b"Authorization", f"Bearer {token}".encode())]

    def worker_pids(self) -> set[int]:
        """The acceptor's children: its workers."""
        return worker_pids(self.process.pid)

    async def host_call(self, request: dict[str, Any]) -> dict[str, Any]:
        """One ``/v1/host`` command on a connection of its own: the response."""
        async with open_websocket_url(f"{self.ws}/v1/host", extra_headers=self.headers) as host:
            assert (await receive(host))["type"] == "host_attached"
            await send(host, {"id": "q", **request})
            return (await until(host, is_response("q")))[-1]

    async def rows(self) -> dict[str, dict[str, Any]]:
        response = await self.host_call({"type": "list"})
        assert response["success"], response
        return {row["id"]: row for row in response["data"]["sessions"]}


@pytest.fixture
async def workers(tmp_path: Path) -> AsyncIterator[Workers]:
    async with serve_process(tmp_path / "agent", tmp_path, "--workers", "2") as running:
        process, url, token = running
        yield Workers(process, url, token)
    assert process.returncode == 0  # SIGTERM: every worker stopped, the acceptor exits 0


async def test_sessions_spread_listed_and_resumed_after_a_worker_is_killed(
    workers: Workers,
) -> None:
    # Two creates on one host connection: each goes to the worker owning fewest sessions.
    made = []
    async with open_websocket_url(f"{workers.ws}/v1/host", extra_headers=workers.headers) as host:
        await receive(host)
        for index in range(2):
            await send(host, {"id": index, "type": "create"})
            made.append((await until(host, is_response(index)))[-1]["data"]["sessionId"])
        # This connection's worker owns one of them: the other's rename is answered by its
        # owner through the acceptor.
        for index, session in enumerate(made):
            await send(
                host,
                {"id": f"r{index}", "type": "rename", "sessionId": session, "name": f"n{index}"},
            )
            renamed = (await until(host, is_response(f"r{index}")))[-1]
            assert renamed["success"] and renamed["data"]["name"] == f"n{index}", renamed
    rows = await workers.rows()
    assert {rows[session]["worker"] for session in made} == {0, 1}
    assert [rows[session]["name"] for session in made] == ["n0", "n1"]
    assert len(workers.worker_pids()) == 2
    target = made[0]
    path = f"{workers.ws}/v1/sessions/{target}"
    async with open_websocket_url(path, extra_headers=workers.headers) as ws:
        attached = await receive(ws)
        assert attached["type"] == "attached"
        await send(ws, {"id": "p", "type": "prompt", "message": "before the kill"})
        frames = await until(ws, settled)
        seq = max(frame["seq"] for frame in frames if "seq" in frame)
        # The worker answering is the session's owner: get_state runs there, pid and all.
        owner_slot = rows[target]["worker"]
        owner = pid_of_worker(workers.process.pid, owner_slot)
        os.kill(owner, signal.SIGKILL)
        with pytest.raises(ConnectionClosed), trio.fail_after(10):
            while True:
                await ws.get_message()
    # The client resumes by seq (another worker now: the stream is new, so a resync) and
    # finds every entry saved before the kill, then goes on.
    resumed = f"{path}?since={seq}&stream={attached['stream']}"
    async with after_failover(resumed, workers.headers) as ws:
        assert (await receive(ws))["type"] == "resync"
        await send(ws, {"id": "m", "type": "get_messages"})
        messages = (await until(ws, is_response("m")))[-1]["data"]["messages"]
        await send(ws, {"id": "p2", "type": "prompt", "message": "after the kill"})
        await until(ws, settled)
    texts = [_text(message) for message in messages]
    assert texts[1:] == ["before the kill", "before the kill"]  # faux/echo answers the prompt
    assert owner not in workers.worker_pids()  # and the dead worker was replaced
    rows = await workers.rows()
    row = rows[target]
    assert row["status"] == "live" and isinstance(row["worker"], int)
    assert row["allMessagesText"] == "before the kill before the kill after the kill after the kill"


async def test_metrics_name_each_worker(workers: Workers) -> None:
    request = urllib.request.Request(
        f"{workers.url}metrics", headers={"Authorization": workers.headers[0][1].decode()}
    )
    text = await trio.to_thread.run_sync(lambda: urllib.request.urlopen(request).read().decode())
    assert 'pitrio_events_total{worker="0"}' in text
    assert 'pitrio_events_total{worker="1"}' in text
    assert 'pitrio_workers_live{worker="acceptor"} 2' in text


@asynccontextmanager
async def after_failover(
    url: str, headers: list[tuple[bytes, bytes]] | None = None
) -> AsyncIterator[WebSocketConnection]:
    """A session connection made after its worker was killed, its ``attached`` frame read.
    A connection the acceptor hands over in the instant the worker dies (before it has seen
    the exit) is never answered, so each attempt has 3 s; then the next goes to a live one."""
    with trio.fail_after(30):
        while True:
            with trio.move_on_after(3) as attempt:
                try:
                    async with open_websocket_url(url, extra_headers=headers or []) as ws:
                        hello = await receive(ws)
                        assert hello["type"] == "attached", hello
                        attempt.deadline = math.inf  # attached: the rest is the caller's
                        yield ws
                        return
                except (ConnectionClosed, OSError):
                    pass
            await trio.sleep(0.1)


def worker_pids(acceptor: int) -> set[int]:
    """The children of ``acceptor``: its workers."""
    # Spawned from worker threads: each thread's children file has its own.
    return {
        int(child)
        for task in Path(f"/proc/{acceptor}/task").iterdir()
        for child in _read(task / "children").split()
    }


def pid_of_worker(acceptor: int, slot: int) -> int:
    """The pid of ``acceptor``'s worker ``slot`` (its command line says which)."""
    for pid in worker_pids(acceptor):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if cmdline[cmdline.index(b"--worker-slot") + 1] == str(slot).encode():
            return pid
    raise AssertionError(f"no worker in slot {slot}")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or () if isinstance(part, dict))


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # the thread ended meanwhile
        return ""
