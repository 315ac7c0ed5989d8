"""A ``pitrio serve`` process for the daemon benchmarks, and a small websocket client for it.

The daemon runs as its own process (``.venv/bin/pitrio serve``) in a fresh agent dir, on
127.0.0.1 with any free port, no token (loopback only), eviction off and the per-client rate
limit raised so one client may create thousands of sessions. Its RSS is read from
``/proc/<pid>/statm``. Used by ``daemon_idle.py`` and ``daemon_reopen.py``; not a test.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
from trio_websocket import WebSocketConnection, open_websocket_url

LISTENING = re.compile(r"listening on http://(\S+?)/?$")
PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_MESSAGE = 256 << 20
"""A ``list`` of thousands of sessions is one frame of several MB."""


def family(pid: int) -> list[int]:
    """``pid`` and every process under it (a daemon with ``--workers``: the acceptor, its
    fork server and the workers forked from that)."""
    members = [pid]
    for member in members:  # grows as the children of each are found
        try:
            tasks = list(Path(f"/proc/{member}/task").iterdir())
        except OSError:
            continue  # it ended meanwhile
        for task in tasks:
            try:
                members.extend(int(child) for child in (task / "children").read_text().split())
            except OSError:
                continue  # a thread that ended meanwhile
    return members


def rss_of(pid: int) -> int:
    """The resident memory of process ``pid`` and every process under it now, in bytes, each
    page once: ``pid``'s resident set plus the others' private pages (``smaps_rollup``). A
    sum of resident sets counted the pages a fork shares with its parent once per process:
    a ``--workers`` daemon's forked workers and fork server share most of theirs. For one
    process, its resident set as before."""
    members = family(pid)
    total = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    for member in members[1:]:
        try:
            lines = Path(f"/proc/{member}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue  # it ended meanwhile
        for line in lines:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                total += int(line.split()[1]) * 1024
    return total


def cpu_of(pid: int) -> float:
    """User plus system CPU seconds process ``pid`` and its children have used so far."""
    ticks = 0
    for member in family(pid):
        fields = Path(f"/proc/{member}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def fresh_agent_dir(prefix: str) -> tuple[Path, Path]:
    """A new agent dir and a work dir inside it (the sessions' cwd)."""
    agent = Path(tempfile.mkdtemp(prefix=prefix))
    work = agent / "work"
    work.mkdir()
    return agent, work


class DaemonProcess:
    """A running ``pitrio serve``: its pid, url, and clients for its two endpoints."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    @property
    def pid(self) -> int:
        """The daemon's process id."""
        return self.process.pid

    def rss(self) -> int:
        """The daemon's RSS now, in bytes."""
        return rss_of(self.pid)

    @asynccontextmanager
    async def host(self) -> AsyncIterator[HostClient]:
        """A ``/v1/host`` connection that may have many commands in flight."""
        async with open_websocket_url(
            f"{self.url}/v1/host", message_queue_size=0, max_message_size=MAX_MESSAGE
        ) as ws:
            client = HostClient(ws)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.read_loop)
                await client.attached.wait()
                yield client
                nursery.cancel_scope.cancel()

    @asynccontextmanager
    async def session(self, session_id: str) -> AsyncIterator[WebSocketConnection]:
        """A ``/v1/sessions/<id>`` connection, its ``attached`` frame read."""
        url = f"{self.url}/v1/sessions/{session_id}"
        async with open_websocket_url(url, message_queue_size=64) as ws:
            frame = json.loads(await ws.get_message())
            if frame.get("type") != "attached":
                raise RuntimeError(f"expected attached, got {frame}")
            yield ws


class HostClient:
    """Commands to ``/v1/host`` matched to their responses by id."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.attached = trio.Event()
        self._ids = itertools.count(1)
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}

    async def read_loop(self) -> None:
        """Route every response to its caller (host events are ignored)."""
        while True:
            frame = json.loads(await self.ws.get_message())
            if frame.get("type") == "host_attached":
                self.attached.set()
            elif frame.get("type") == "response":
                send = self._waiting.pop(frame.get("id"), None)
                if send is not None:
                    send.send_nowait(frame)

    async def call(self, command: dict[str, Any]) -> dict[str, Any]:
        """Send one command; its response (raises on ``success: false``)."""
        request_id = next(self._ids)
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[request_id] = send
        await self.ws.send_message(json.dumps({"id": request_id, **command}))
        frame = await receive.receive()
        if not frame.get("success"):
            raise RuntimeError(f"{command['type']} failed: {frame.get('error')}")
        return frame


async def prompt_and_settle(ws: WebSocketConnection, text: str) -> None:
    """Prompt on an attached session socket; return once the run has settled."""
    await ws.send_message(json.dumps({"id": "p", "type": "prompt", "message": text}))
    while True:
        frame = json.loads(await ws.get_message())
        if frame.get("type") == "agent_settled":
            return
        if frame.get("type") == "response" and not frame.get("success", True):
            raise RuntimeError(f"prompt failed: {frame.get('error')}")


NOFILE = 65536
"""Open files the daemon may hold: a live session holds two (its file and its lease's lock
file), so 10,000 of them need more than the usual 1,024 or 20,000."""


def _raise_nofile() -> None:
    """In the daemon's process before it starts: the open-files limit up to ``NOFILE`` (a
    root run may raise the hard limit too; otherwise up to the hard limit)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, max(hard, NOFILE)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


PROFILED = (
    "import cProfile, sys; from pitrio.transports.cli import main; "
    "profile = cProfile.Profile(); profile.enable()\n"
    "try: main(sys.argv[1:])\n"
    "finally: profile.disable(); profile.dump_stats({out!r})"
)
"""Runs ``pitrio`` under cProfile, the stats written to ``out`` when it exits."""


def start_daemon(
    agent: Path,
    work: Path,
    *extra: str,
    source: Path | None = None,
    profile: Path | None = None,
) -> DaemonProcess:
    """Start ``pitrio serve`` in ``agent`` (sessions in ``work``) and wait until it listens;
    ``source``: a directory holding another copy of the package to run instead (the code
    before a change), past this checkout's editable install; ``profile``: run this
    checkout's under cProfile, the stats written there at exit."""
    if source is not None:
        from bench.daemon_load import OTHER_SOURCE

        launcher = [sys.executable, "-c", OTHER_SOURCE.format(source=str(source))]
    elif profile is not None:
        launcher = [sys.executable, "-c", PROFILED.format(out=str(profile))]
    else:
        launcher = [str(Path(sys.executable).with_name("pitrio"))]
    env = {
        **os.environ,
        "PITRIO_AGENT_DIR": str(agent),
        "HOME": str(agent / "home"),
        "PITRIO_TELEMETRY": "0",
    }
    if source is not None:  # `--workers N`'s worker processes import the same copy
        env["PYTHONPATH"] = os.pathsep.join(
            [str(source), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    command = [
        *launcher,
        "serve",
        "--port",
        "0",
        "--no-auth",
        "--idle",
        "0",
        "--cwd",
        str(work),
        "--rate",
        "1000000",
        "--burst",
        "1000000",
        "--log-level",
        "warning",
        *extra,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        env=env,
        cwd=work,
        preexec_fn=_raise_nofile,
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        match = LISTENING.search(line)
        if match:
            return DaemonProcess(process, f"ws://{match.group(1)}")
    process.kill()
    raise RuntimeError("pitrio serve did not start")


def stop_daemon(daemon: DaemonProcess) -> None:
    """SIGTERM, then wait (SIGKILL after 15 s)."""
    daemon.process.send_signal(signal.SIGTERM)
    try:
        daemon.process.wait(15)
    except subprocess.TimeoutExpired:
        daemon.process.kill()
        daemon.process.wait()


async def settle_rss(daemon: DaemonProcess, seconds: float = 1.0) -> int:
    """The daemon's RSS once it has been quiet for ``seconds`` (its last reading)."""
    await trio.sleep(seconds)
    return daemon.rss()
