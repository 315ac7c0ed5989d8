"""``pitrio serve --workers 2``'s workers are forks of its fork server, from the outside: each
worker's parent is the fork server (the acceptor's child), a worker holds neither the listening
socket nor another's descriptors, a worker killed is forked again, the fork server killed
takes its workers with it and is replaced (the sessions come back), and neither a stop nor an
acceptor killed leaves a process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from tests.transports.attach_harness import serve_process
from tests.transports.daemon_harness import is_response, send, settled
from tests.transports.daemon_harness import until as until_frame
from tests.transports.test_serve_workers import (
    PITRIO,
    _text,
    after_failover,
    descendants,
    pid_of_worker,
    serve_workers,
    slot_of,
)

FORK_SERVER = "pitrio-forks"


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def command_of(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")


def name_of(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


def fork_server_of(acceptor: int) -> int:
    """The acceptor's fork server (its child named :data:`FORK_SERVER`)."""
    (server,) = [pid for pid in descendants(acceptor) if _name(pid) == FORK_SERVER]
    assert parent_of(server) == acceptor
    return server


def socket_inodes(pid: int) -> set[str]:
    """The sockets ``pid`` holds past its standard three descriptors."""
    found = set()
    for entry in Path(f"/proc/{pid}/fd").iterdir():
        if int(entry.name) > 2:
            target = os.readlink(entry)
            if target.startswith("socket:"):
                found.add(target)
    return found


def listening_inodes(port: int) -> set[str]:
    """The sockets listening on ``port`` (``/proc/net/tcp*``)."""
    found = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                found.add(f"socket:[{fields[9]}]")
    return found


async def test_workers_are_forks_holding_only_their_own_descriptors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_workers(tmp_path, monkeypatch) as workers:
        acceptor = workers.process.pid
        server = fork_server_of(acceptor)
        pids = workers.worker_pids()
        assert {slot_of(pid) for pid in pids} == {0, 1}
        assert {parent_of(pid) for pid in pids} == {server}  # forks, not new interpreters
        listening = listening_inodes(int(workers.url.rstrip("/").rsplit(":", 1)[1]))
        assert listening and listening <= socket_inodes(acceptor)
        one, two = (socket_inodes(pid) for pid in pids)
        assert not one & listening and not two & listening
        assert not one & two  # neither holds the other's control or hand-off socket
        assert not (one | two) & socket_inodes(server)  # nor the fork server's


async def test_a_worker_killed_is_forked_again_by_the_same_fork_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_workers(tmp_path, monkeypatch) as workers:
        server = fork_server_of(workers.process.pid)
        killed = pid_of_worker(workers.process.pid, 0)
        os.kill(killed, signal.SIGKILL)
        await until(lambda: _worker(workers.process.pid, 0) not in (None, killed))
        new = _worker(workers.process.pid, 0)
        assert new is not None and parent_of(new) == server


async def test_the_fork_server_killed_takes_its_workers_and_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_workers(tmp_path, monkeypatch) as workers:
        acceptor = workers.process.pid
        created = await workers.host_call({"type": "create"})
        session = created["data"]["sessionId"]
        await workers.prompt(session, "before the kill")
        server = fork_server_of(acceptor)
        old = workers.worker_pids()
        os.kill(server, signal.SIGKILL)
        # No worker is left running unowned: both die with their fork server.
        await until(lambda: not any(_alive(pid) for pid in old))
        await until(lambda: len(workers.worker_pids() - old) == 2)
        new = workers.worker_pids()
        replacement = fork_server_of(acceptor)
        assert replacement != server
        assert {parent_of(pid) for pid in new} == {replacement}
        async with after_failover(f"{workers.ws}/v1/sessions/{session}", workers.headers) as ws:
            await send(ws, {"id": "m", "type": "get_messages"})
            messages = (await until_frame(ws, is_response("m")))[-1]["data"]["messages"]
            # Every entry saved before the kill (faux/echo answers the prompt).
            assert [_text(message) for message in messages][1:] == ["before the kill"] * 2
            await send(ws, {"id": "p", "type": "prompt", "message": "after the kill"})
            await until_frame(ws, settled)


async def test_a_stop_leaves_no_process_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve_workers(tmp_path, monkeypatch) as workers:
        family = descendants(workers.process.pid)
        assert len(family) == 3  # the fork server and two workers
        started = trio.current_time()
    # serve_workers sent SIGTERM and saw the acceptor exit 0 (every worker stopped).
    assert trio.current_time() - started < 10
    assert not [pid for pid in family if _alive(pid)]


async def test_an_acceptor_killed_leaves_no_process_behind(tmp_path: Path) -> None:
    async with serve_process(tmp_path / "agent", tmp_path, "--workers", "2") as running:
        process = running[0]
        await until(lambda: len(descendants(process.pid)) == 3)
        family = descendants(process.pid)
        process.kill()
        await process.wait()
        # The workers see their acceptor gone and exit; the fork server then does.
        await until(lambda: not [pid for pid in family if _alive(pid)])


async def until(condition: Callable[[], object], seconds: float = 60) -> None:
    """Wait until ``condition()`` holds (another process's state: polled), ``seconds`` at
    most."""
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 (other processes' state)
            await trio.sleep(0.05)


def _worker(acceptor: int, slot: int) -> int | None:
    try:
        return pid_of_worker(acceptor, slot)
    except AssertionError:
        return None


def _name(pid: int) -> str:
    try:
        return name_of(pid)
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie left to whoever adopted it does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_with_telemetry_the_fork_server_is_its_own_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The acceptor's exporters run threads: it does not fork then (a fork keeps one thread)
    but starts the fork server as a process of its own, whose workers are still its forks."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    async with serve_workers(tmp_path, monkeypatch) as workers:
        server = fork_server_of(workers.process.pid)
        assert "pitrio.transports.daemon.workers.forkserver" in command_of(server)
        assert {parent_of(pid) for pid in workers.worker_pids()} == {server}
        created = await workers.host_call({"type": "create"})
        await workers.prompt(created["data"]["sessionId"], "served")


async def test_a_worker_failing_to_start_fails_the_daemon_leaving_no_process(
    tmp_path: Path,
) -> None:
    """Every worker fails its start (an unreachable session database, found after the pool's
    5 s): the daemon exits 1 saying which worker, and its fork server and the other worker do
    not outlive it."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent")}
    command = [PITRIO, "serve", "--port", "0", "--cwd", str(tmp_path), "--workers", "2"]
    command += ["--store", "postgresql://nobody@127.0.0.1:9/nothing"]
    with trio.fail_after(60):
        process = await trio.lowlevel.open_process(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            assert process.stderr is not None
            await until(lambda: len(descendants(process.pid)) == 3)
            family = descendants(process.pid)
            errors = b""
            while chunk := await process.stderr.receive_some():
                errors += chunk
            await process.wait()
        finally:
            process.kill()
        assert process.returncode == 1
        assert re.search(rb"Error: worker [01] exited with code 1 while starting", errors)
        await until(lambda: not [pid for pid in family if _alive(pid)])
