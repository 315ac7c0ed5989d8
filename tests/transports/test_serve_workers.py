"""``pitrio serve --workers 2`` from the outside: real processes, real websockets.

One daemon serves the whole module (its start-up, about a second, is paid once): sessions
created through two ``/v1/host`` connections land in both workers, each session's connections
reach its owner, the listing covers both workers, ``/metrics`` names them, and a worker killed
with SIGKILL has its session resumed in another worker by ``seq``.
"""

from __future__ import annotations

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

from pitrio.transports.daemon.workers.worker import HANDOFF_FAULT_ENV, NO_OWNS_NOTICES_ENV
from tests.stray_cancel import no_stray_cancel
from tests.transports.attach_harness import serve_process
from tests.transports.daemon_harness import is_response, receive, send, settled, until

PITRIO = str(Path(sys.executable).parent / "pitrio")


class Workers:
    """A running ``pitrio serve --workers 2``; ``fault``: its workers' hand-off fault file
    (absent: no fault; see ``worker.HANDOFF_FAULT_ENV``)."""

    def __init__(self, process: trio.Process, url: str, token: str, fault: Path) -> None:
        self.process = process
        self.fault = fault
        self.ws = url.replace("http://", "ws://").rstrip("/")
        self.url = url
        self.headers = [(b"Authorization", f"Bearer {token}".encode())]

    def worker_pids(self) -> set[int]:
        """The acceptor's workers."""
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

    async def prompt(self, session: str, message: str) -> None:
        """Prompt ``session`` on a connection of its own until the run settles (a session is
        written to its file with its first exchange)."""
        path = f"{self.ws}/v1/sessions/{session}"
        async with open_websocket_url(path, extra_headers=self.headers) as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": message})
            await until(ws, settled)

    async def metric(self, name: str) -> float:
        """The acceptor's sample of ``name`` in ``/metrics``."""
        request = urllib.request.Request(
            f"{self.url}metrics", headers={"Authorization": self.headers[0][1].decode()}
        )
        text = await trio.to_thread.run_sync(
            lambda: urllib.request.urlopen(request).read().decode()
        )
        prefix = f'{name}{{worker="acceptor"}} '
        (line,) = [line for line in text.splitlines() if line.startswith(prefix)]
        return float(line[len(prefix) :])


@asynccontextmanager
async def serve_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> AsyncIterator[Workers]:
    """``pitrio serve --workers 2`` (with ``extra`` options) and its fault file."""
    fault = tmp_path / "handoff-fault"
    monkeypatch.setenv(HANDOFF_FAULT_ENV, str(fault))
    # Sessions are known to the acceptor only through the claims made before each answer.
    monkeypatch.setenv(NO_OWNS_NOTICES_ENV, "1")
    async with serve_process(tmp_path / "agent", tmp_path, "--workers", "2", *extra) as running:
        process, url, token = running
        yield Workers(process, url, token, fault)
    assert process.returncode == 0  # SIGTERM: every worker stopped, the acceptor exits 0


@pytest.fixture
async def workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Workers]:
    async with serve_workers(tmp_path, monkeypatch) as running:
        yield running


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


async def test_a_connection_handed_to_a_dying_worker_is_served_by_another(
    workers: Workers,
) -> None:
    session = (await workers.host_call({"type": "create"}))["data"]["sessionId"]
    await workers.prompt(session, "before")
    path = f"{workers.ws}/v1/sessions/{session}"
    owner = pid_of_worker(workers.process.pid, (await workers.rows())[session]["worker"])
    # The next worker to receive a connection (the owner: the connection names its session)
    # exits holding the descriptor, before it acknowledges it.
    workers.fault.write_text("die")
    with trio.fail_after(20):
        async with open_websocket_url(path, extra_headers=workers.headers) as ws:
            # The one attempt is answered: the acceptor took the connection back once the
            # owner's exit was seen and gave it to the live worker, which reopened the session.
            assert (await receive(ws))["type"] == "attached"
            await send(ws, {"id": "p", "type": "prompt", "message": "after the hand-off"})
            await until(ws, settled)
    assert not workers.fault.exists()  # the fault fired
    assert owner not in workers.worker_pids()
    assert await workers.metric("pitrio_handoffs_rerouted_total") == 1
    row = (await workers.rows())[session]
    assert row["status"] == "live"
    assert row["allMessagesText"] == "before before after the hand-off after the hand-off"


async def test_a_connection_no_worker_acknowledges_is_answered_503_with_retry_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The wait is the daemon's --handshake-timeout (10 s unless set): 2 s here.
    async with serve_workers(tmp_path, monkeypatch, "--handshake-timeout", "2") as workers:
        workers.fault.write_text("hang")  # the worker keeps the descriptor, never acknowledges
        port = int(workers.url.rsplit(":", 1)[1][:-1])
        with trio.fail_after(30):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            async with stream:
                await stream.send_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                started = trio.current_time()
                answer = b""
                while chunk := await stream.receive_some(65536):
                    answer += chunk
                waited = trio.current_time() - started
        head = answer.split(b"\r\n\r\n", 1)[0].decode().split("\r\n")
        assert head[0] == "HTTP/1.1 503 Service Unavailable", answer
        assert "Retry-After: 1" in head
        # Answered after the timeout the command line set, not the default's 10 s.
        assert 2 <= waited < 9, waited
        assert await workers.metric("pitrio_handoffs_refused_total") == 1
        # The worker that hung on that one is still serving: both workers answer again.
        for _ in range(2):
            assert (await workers.host_call({"type": "stats"}))["success"]


async def test_sessions_made_by_commands_are_reached_in_their_maker_at_once(
    workers: Workers,
) -> None:
    session = (await workers.host_call({"type": "create"}))["data"]["sessionId"]
    made: list[str] = []
    async with open_websocket_url(
        f"{workers.ws}/v1/sessions/{session}", extra_headers=workers.headers
    ) as ws:
        await receive(ws)
        await send(ws, {"id": "p", "type": "prompt", "message": "first"})
        await until(ws, settled)
        await send(ws, {"id": "fm", "type": "get_fork_messages"})
        entry = (await until(ws, is_response("fm")))[-1]["data"]["messages"][0]["entryId"]
        commands = [{"type": "new_session"}] * 4 + [
            {"type": "clone"},
            {"type": "fork", "entryId": entry},
        ]
        for index, command in enumerate(commands):
            await send(ws, {"id": index, **command})
            answer = (await until(ws, is_response(index)))[-1]
            assert answer["success"], answer
            made.append(answer["data"]["sessionId"])
            # Connected the moment the answer arrives: the acceptor already knows the owner
            # (an unknown session would go to the other worker, owning none: a new session
            # has no file yet there, a 404; a clone's file would be opened twice).
            async with open_websocket_url(
                f"{workers.ws}/v1/sessions/{made[-1]}", extra_headers=workers.headers
            ) as other:
                assert (await receive(other))["type"] == "attached"
    rows = await workers.rows()
    assert {rows[each].get("worker") for each in made} == {rows[session]["worker"]}


async def test_every_host_client_gets_every_workers_host_events_in_order(
    workers: Workers,
) -> None:
    async with (
        open_websocket_url(f"{workers.ws}/v1/host", extra_headers=workers.headers) as first,
        open_websocket_url(f"{workers.ws}/v1/host", extra_headers=workers.headers) as second,
    ):
        for host in (first, second):
            assert (await receive(host))["type"] == "host_attached"
        made = []
        frames: dict[Any, list[dict[str, Any]]] = {first: [], second: []}

        async def command(request: dict[str, Any]) -> dict[str, Any]:
            await send(first, request)
            frames[first] += await until(first, is_response(request["id"]))
            return frames[first][-1]

        for index in range(2):  # one session in each worker
            made.append((await command({"id": index, "type": "create"}))["data"]["sessionId"])
        for session in made:
            await workers.prompt(session, "hello")
            for name in ("one", "two", "done"):
                await command({"id": name, "type": "rename", "sessionId": session, "name": name})
        seen = []
        for host in (first, second):
            # Each client reads until it has both sessions' last rename: what came before
            # it of that session came before it on the wire.
            events: dict[str, list[str]] = {session: [] for session in made}
            done: set[str] = set()
            while done != set(made):
                frame = frames[host].pop(0) if frames[host] else await receive(host)
                session = frame.get("sessionId")
                if session in events and frame.get("type", "").startswith("session_"):
                    events[session].append(f"{frame['type']}:{frame.get('name', '')}")
                    if frame.get("name") == "done":
                        done.add(session)
            seen.append(events)
    rows = await workers.rows()
    assert {rows[session]["worker"] for session in made} == {0, 1}
    for session in made:
        # The same events in the same order on both clients: one is on the session's worker,
        # the other has them from the other worker.
        assert seen[0][session] == seen[1][session]
        order = seen[0][session]
        assert order[0] == "session_created:"
        assert order.index("session_busy:") < order.index("session_idle:")
        renames = [each for each in order if each.startswith("session_renamed")]
        assert renames == ["session_renamed:one", "session_renamed:two", "session_renamed:done"]


@asynccontextmanager
async def after_failover(
    url: str, headers: list[tuple[bytes, bytes]] | None = None
) -> AsyncIterator[WebSocketConnection]:
    """A session connection made after its worker was killed, its ``attached`` frame read.
    One attempt: a connection the acceptor hands to the dying worker (before it has seen the
    exit) is not acknowledged, so the acceptor gives it to a live worker once the exit is
    seen."""
    async with open_websocket_url(url, extra_headers=headers or [], connect_timeout=30) as ws:
        hello = await receive(ws, 30)
        assert hello["type"] == "attached", hello
        with no_stray_cancel():
            yield ws


def worker_pids(acceptor: int) -> set[int]:
    """``acceptor``'s workers: the processes under it named ``pitrio-workerN`` (forked by its
    fork server) or started with ``--worker-slot``."""
    return {pid for pid in descendants(acceptor) if slot_of(pid) is not None}


def descendants(pid: int) -> set[int]:
    """Every process under ``pid`` (its children, theirs, ...)."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        # Spawned from worker threads: each thread's children file has its own.
        children = {
            int(child) for task in _tasks(todo.pop()) for child in _read(task / "children").split()
        }
        todo.extend(children - found)
        found |= children
    return found


def slot_of(pid: int) -> int | None:
    """The slot of worker ``pid`` (its name or its command line says which); ``None``: not
    a worker."""
    name = _read(Path(f"/proc/{pid}/comm")).strip()
    if name.startswith("pitrio-worker"):
        return int(name.removeprefix("pitrio-worker"))
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    if b"--worker-slot" not in cmdline:
        return None
    return int(cmdline[cmdline.index(b"--worker-slot") + 1])


def pid_of_worker(acceptor: int, slot: int) -> int:
    """The pid of ``acceptor``'s worker ``slot``."""
    for pid in worker_pids(acceptor):
        if slot_of(pid) == slot:
            return pid
    raise AssertionError(f"no worker in slot {slot}")


def _tasks(pid: int) -> list[Path]:
    try:
        return list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # it ended meanwhile
        return []


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
