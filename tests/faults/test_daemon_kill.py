"""The daemon killed with SIGKILL while 20 sessions run: what survives, what reopens.

A real ``pitrio serve`` process (the faux models answering by the fixtures' rules, so a prompt
can run a bash tool) hosts 20 sessions, each with a websocket client prompting in a loop. At a
seeded random moment the daemon gets ``SIGKILL``; then:

* every entry a client saw acknowledged (an ``entry_appended`` event: the store sends it only
  once the line is on disk, ``session.fsync`` being ``always``) is in its session's file;
* every file passes the store's own check (no torn or malformed line) and a daemon started on
  the same directory lists and opens every session and takes new prompts (the dead writer's
  lease is taken over);
* nothing the killed daemon started is still running once a new daemon is up: a tool command
  that outlives the daemon is ended by the next daemon from the groups the killed one recorded
  on disk (``test_no_tool_process_outlives_a_killed_daemon``); the 20-session case runs only
  tools that end on their own.

Several kill points per run (each restart is the next victim), all bounded in time.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from trio_websocket import ConnectionClosed, HandshakeError, WebSocketConnection
from trio_websocket import open_websocket_url as _open_websocket_url

from pitrio.actors.procfs import is_live, proc_stat
from pitrio.actors.session_store.maintenance import check_file
from tests.faults.support import file_lines
from tests.stray_cancel import no_stray_cancel
from tests.transports.daemon_harness import is_response, receive, send, until

PITRIO = str(Path(sys.executable).parent / "pitrio")
SESSIONS = 20
KILLS = 3
SEED = 20_260_110
TOOL_SECONDS = 27
"""How long a tool command of these tests sleeps: far longer than any test, so a tool process
still alive after the daemon died is one the daemon left behind."""

_CLIENT_ERRORS = (ConnectionClosed, HandshakeError, trio.BrokenResourceError, OSError)


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


@attrs.define
class RunningDaemon:
    """A ``pitrio serve`` child process and how to reach it."""

    process: trio.Process
    base: str
    headers: list[tuple[bytes, bytes]]

    @asynccontextmanager
    async def socket(self, path: str) -> AsyncIterator[WebSocketConnection]:
        """A websocket to ``path`` (``/v1/host`` or ``/v1/sessions/ID``) with the token."""
        async with _open_websocket_url(
            f"{self.base}{path}", extra_headers=self.headers, message_queue_size=256
        ) as ws:
            with no_stray_cancel():
                yield ws

    async def host(self, command: dict[str, Any]) -> dict[str, Any]:
        """One ``/v1/host`` command's response."""
        async with self.socket("/v1/host") as ws:
            await receive(ws)  # host_attached
            await send(ws, {"id": "h", **command})
            response = (await until(ws, is_response("h")))[-1]
        assert response["success"], response
        return response


async def _read_line(stream: trio.abc.ReceiveStream, pattern: str) -> re.Match[str]:
    """Read the process's output until a line matches ``pattern``."""
    buffer = b""
    while True:
        while b"\n" not in buffer:
            chunk = await stream.receive_some(4096)
            if not chunk:
                raise AssertionError(f"the daemon ended before printing {pattern!r}")
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        if match := re.search(pattern, line.decode("utf-8", "replace")):
            return match


async def start_daemon(agent: Path, work: Path, log: Path) -> RunningDaemon:
    """``pitrio serve`` on a free port, in its own process group; returns once it listens."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent), "PITRIO_FAUX_SCRIPT": "fixture-rules"}
    env.pop("PITRIO_SESSION_DIR", None)
    with log.open("ab") as errors:
        process = await trio.lowlevel.open_process(
            [PITRIO, "serve", "--port", "0", "--cwd", str(work), "--idle", "0"],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            start_new_session=True,
        )
    assert process.stdout is not None
    with trio.fail_after(15):
        url = (await _read_line(process.stdout, r"listening on (http://\S+)")).group(1)
    token = (agent / "daemon-token").read_text().strip()
    return RunningDaemon(
        process=process,
        base=url.replace("http://", "ws://").rstrip("/"),
        headers=[(b"Authorization", f"Bearer {token}".encode())],
    )


def _descendants(root: int) -> set[int]:
    """Every live process below ``root`` (from ``/proc``'s parent links)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = proc_stat(int(name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _with_marker(marker: str) -> Iterator[int]:
    """Processes whose command line holds ``marker``."""
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and is_live(int(name)):
            yield int(name)


@attrs.define
class Traffic:
    """What the clients saw acknowledged, per session."""

    acked: dict[str, set[str]] = attrs.field(factory=dict)
    settled: dict[str, int] = attrs.field(factory=dict)
    tools_started: int = 0
    changed: trio.Event = attrs.field(factory=trio.Event)

    def note(self) -> None:
        """Wake whoever waits for progress."""
        self.changed.set()
        self.changed = trio.Event()

    def runs_settled(self) -> int:
        return sum(self.settled.values())

    def reached(self, runs: int) -> bool:
        """Whether ``runs`` runs have settled in all."""
        return self.runs_settled() >= runs

    async def wait(self, done: Callable[[], bool]) -> None:
        """Until ``done()`` holds (checked after each settled run or started tool)."""
        while not done():
            await self.changed.wait()


async def chat(
    daemon: RunningDaemon,
    session_id: str,
    traffic: Traffic,
    prompts: list[str],
    *,
    loop: bool,
) -> None:
    """Prompt ``session_id`` (each prompt once, or round and round with ``loop``), recording
    every acknowledged entry, until the daemon goes away."""
    acked = traffic.acked.setdefault(session_id, set())
    try:
        async with daemon.socket(f"/v1/sessions/{session_id}") as ws:
            await receive(ws)  # attached
            index = 0
            while index < len(prompts):
                text = prompts[index]
                await send(ws, {"id": f"p{index}", "type": "prompt", "message": text})
                while True:
                    frame = json.loads(await ws.get_message())
                    kind = frame.get("type")
                    if kind == "entry_appended":
                        acked.add(frame["entry"]["id"])
                    elif kind == "tool_execution_start":
                        traffic.tools_started += 1
                        traffic.note()
                    elif kind == "response" and not frame.get("success", True):
                        raise AssertionError(f"{session_id}: {frame}")
                    elif kind == "agent_settled":
                        traffic.settled[session_id] = traffic.settled.get(session_id, 0) + 1
                        traffic.note()
                        break
                index += 1
                if loop and index == len(prompts):
                    index = 0
    except _CLIENT_ERRORS:
        return  # the daemon was killed: what was acknowledged so far is what counts


async def kill(daemon: RunningDaemon) -> None:
    """``SIGKILL`` to the daemon's pid alone (not its group); wait until it is gone."""
    daemon.process.send_signal(signal.SIGKILL)
    with trio.fail_after(10):
        code = await daemon.process.wait()
    assert code == -signal.SIGKILL


async def verify_files(paths: dict[str, Path], traffic: Traffic) -> None:
    """Every file checks clean and holds every entry its client saw acknowledged."""
    for session_id, path in paths.items():
        problems = await trio.to_thread.run_sync(check_file, path)
        assert not problems, [p.describe(str(path)) for p in problems]
        ids = {line["id"] for line in file_lines(path)[1:]}
        missing = traffic.acked.get(session_id, set()) - ids
        assert not missing, f"{session_id}: acknowledged entries lost: {sorted(missing)}"


async def reopen_all(daemon: RunningDaemon, paths: dict[str, Path]) -> None:
    """The new daemon lists every session, and each opens with its file's messages."""
    listed = (await daemon.host({"type": "list"}))["data"]["sessions"]
    assert {row["id"] for row in listed} >= set(paths)

    async def open_one(session_id: str) -> None:
        async with daemon.socket(f"/v1/sessions/{session_id}") as ws:
            hello = await receive(ws)
            assert hello["type"] == "attached", hello
            await send(ws, {"id": "m", "type": "get_messages"})
            response = (await until(ws, is_response("m")))[-1]
            assert response["success"], response
        in_file = [line for line in file_lines(paths[session_id]) if line.get("type") == "message"]
        assert len(response["data"]["messages"]) == len(in_file)

    async with trio.open_nursery() as nursery:
        for session_id in paths:
            nursery.start_soon(open_one, session_id)


async def test_sigkill_while_twenty_sessions_run(agent: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED)
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "daemon.log"
    daemon = await start_daemon(agent, work, log)
    try:
        paths: dict[str, Path] = {}
        for index in range(SESSIONS):
            created = await daemon.host({"type": "create", "name": f"s{index}"})
            paths[created["data"]["sessionId"]] = Path(created["data"]["path"])
        # One settled exchange each first: the files exist (pi's lazy creation keeps a session
        # without an answer in memory only, so nothing before that is durable by design).
        traffic = Traffic()
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for session_id in paths:
                    nursery.start_soon(
                        partial(chat, daemon, session_id, traffic, ["warm up"], loop=False)
                    )
        assert len(traffic.settled) == SESSIONS
        for round_ in range(KILLS):
            # The kill point: after a seeded number of runs settled in this round (so there was
            # traffic to lose), plus a seeded fraction of a run (anywhere inside the next ones).
            settled_before = traffic.runs_settled()
            target = settled_before + rng.randint(SESSIONS // 2, 2 * SESSIONS)
            delay = rng.uniform(0.0, 0.06)
            with trio.fail_after(15):
                async with trio.open_nursery() as nursery:
                    for number, session_id in enumerate(paths):
                        prompts = [f"round {round_} prompt {n} of {number}" for n in range(3)]
                        if number % 5 == 0:
                            prompts.insert(1, "THINK about it")
                        if number % 5 == 1:  # a tool turn: four entries, a child process
                            step = json.dumps({"command": f"echo {round_}; sleep 0.05"})
                            prompts.insert(1, f"<<bash {step}>>")
                        nursery.start_soon(
                            partial(chat, daemon, session_id, traffic, prompts, loop=True)
                        )
                    await traffic.wait(partial(traffic.reached, target))
                    await trio.sleep(delay)
                    children = _descendants(daemon.process.pid)
                    await kill(daemon)
            await verify_files(paths, traffic)
            daemon = await start_daemon(agent, work, log)
            with trio.fail_after(15):
                await reopen_all(daemon, paths)
            # The tools of this test end on their own within 50 ms: nothing else of the killed
            # daemon may be left (the long-running case is the test below).
            assert not [pid for pid in children if is_live(pid)]
        assert traffic.tools_started > 0  # kills could land in tool turns too
        # The last daemon writes to every file again: each lease was taken over.
        before = {session_id: len(file_lines(path)) for session_id, path in paths.items()}
        final = Traffic()
        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                for session_id in paths:
                    nursery.start_soon(
                        partial(chat, daemon, session_id, final, ["after"], loop=False)
                    )
        assert len(final.settled) == SESSIONS
        await verify_files(paths, final)
        for session_id, path in paths.items():
            assert len(file_lines(path)) > before[session_id]
    finally:
        if daemon.process.returncode is None:
            daemon.process.kill()
            await daemon.process.wait()


async def test_no_tool_process_outlives_a_killed_daemon(agent: Path, tmp_path: Path) -> None:
    marker = f"{TOOL_SECONDS}.{random.Random(SEED).randrange(10**6):06d}"
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "daemon.log"
    daemon = await start_daemon(agent, work, log)
    try:
        ids = []
        for index in range(2):
            ids.append((await daemon.host({"type": "create", "name": f"t{index}"}))["data"])
        traffic = Traffic()
        command = json.dumps({"command": f"sleep {marker}; echo done"})
        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                for row in ids:
                    prompt = [f"<<bash {command}>>"]
                    nursery.start_soon(
                        partial(chat, daemon, row["sessionId"], traffic, prompt, loop=False)
                    )
                await traffic.wait(lambda: traffic.tools_started >= len(ids))
                # The tool's shell has started its command once it shows up in the table.
                while len(list(_with_marker(marker))) < len(ids):  # noqa: ASYNC110
                    await trio.sleep(0.02)
                children = _descendants(daemon.process.pid)
                await kill(daemon)
        assert children, "the tools ran as the daemon's children"
        daemon = await start_daemon(agent, work, log)
        # What the killed daemon started: gone by the time a new daemon serves.
        leftovers = sorted(set(_with_marker(marker)) | {p for p in children if is_live(p)})
        assert not leftovers, f"processes of the killed daemon still running: {leftovers}"
    finally:
        for pid in _with_marker(marker):
            with suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)
        if daemon.process.returncode is None:
            daemon.process.kill()
            await daemon.process.wait()
