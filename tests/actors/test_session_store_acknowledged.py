"""Acknowledged is durable, from the first entry (issue 21.11), seen from outside.

A real ``pitrio --mode rpc`` process talks to a loopback vendor that never finishes its
answer, so no assistant message exists (pi 0.73.1's moment for creating the file; pi 1.6.0
creates it at the first user message). The client asks for every entry to be announced
(``set_event_format {"entries": "all"}``: pi 1.6.0 announces only extension and recovery
entries, so a session's own ones are announced on request). The test kills the process with
SIGKILL the moment it has written ``entry_appended`` for the first prompt (or for a name given
before any prompt): whatever it announced must be in the file on disk.
Before the fix the first prompt was announced while it lived only in memory: no file at all.
A process that is started and closed without doing anything still leaves no file (pi's lazy
creation), and its lock file is gone as well (issue 21.12).
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

from tests.faults.support import MODEL, write_agent_dir
from tests.faults.vendor import Act, Vendor, running_vendor, text_parts
from tests.stray_cancel import no_stray_cancel
from tests.transports.rpc.harness import Dirs, RpcProcess, environment

WAIT = 30.0


@asynccontextmanager
async def rpc_on_vendor(tmp_path: Path) -> AsyncIterator[tuple[RpcProcess, Vendor, Path]]:
    """``pitrio --mode rpc`` on the vendor's model, sessions in ``<tmp>/sessions``; the
    vendor's first answer starts and then waits for ever (nothing releases it)."""
    dirs = Dirs.make(tmp_path / "root")
    sessions = tmp_path / "sessions"
    async with running_vendor() as vendor:
        # "stall": a chunked body that never ends. (The default "complete" would announce a
        # content-length covering only the text, so the body ended there and the client
        # could record an error reply before the kill: the race this test lost now and then.)
        vendor.push(Act(parts=[*text_parts("thinking about it"), trio.Event()], ending="stall"))
        write_agent_dir(dirs.agent, vendor.base_url, {"quietStartup": True})
        command = [sys.executable, "-m", "pitrio.transports.cli", "--mode", "rpc"]
        process = await trio.lowlevel.open_process(
            [*command, "--model", MODEL, "--session-dir", str(sessions)],
            cwd=dirs.cwd,
            env=environment(dirs, {"NO_PROXY": "127.0.0.1"}),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        rpc = RpcProcess(process)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(rpc.read_stdout)
                nursery.start_soon(rpc.read_stderr)
                await rpc.data({"type": "set_event_format", "entries": "all"})
                with no_stray_cancel():
                    yield rpc, vendor, sessions
                nursery.cancel_scope.cancel()
        finally:
            if process.returncode is None:
                process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()


async def kill_at(rpc: RpcProcess, announced: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """SIGKILL the process as soon as it has written an ``entry_appended`` line satisfying
    ``announced``; returns that line's entry."""
    found: list[dict[str, Any]] = []

    def seen(lines: list[dict[str, Any]]) -> bool:
        found[:] = [
            line["entry"]
            for line in lines
            if line.get("type") == "entry_appended" and announced(line["entry"])
        ]
        return bool(found)

    arrived = await rpc.wait_until(seen, WAIT)
    assert arrived, f"no such entry_appended; stderr: {rpc.stderr.decode()[-2000:]}"
    rpc.process.send_signal(signal.SIGKILL)
    await rpc.process.wait()
    assert rpc.process.returncode == -signal.SIGKILL
    return found[0]


def entries_on_disk(sessions: Path) -> tuple[list[Path], list[dict[str, Any]]]:
    files = sorted(sessions.rglob("*.jsonl"))
    lines = [orjson.loads(line) for path in files for line in path.read_bytes().splitlines()]
    return files, lines


def is_first_prompt(entry: dict[str, Any]) -> bool:
    message = entry.get("message") or {}
    return entry.get("type") == "message" and message.get("role") == "user"


async def test_the_first_prompt_is_on_disk_once_announced(tmp_path: Path) -> None:
    async with rpc_on_vendor(tmp_path) as (rpc, vendor, sessions):
        await rpc.send({"id": "p1", "type": "prompt", "message": "remember this"})
        entry = await kill_at(rpc, is_first_prompt)
        # Every entry announced before the kill (the system message and the prompt) is on disk.
        announced = [line["entry"]["id"] for line in rpc.by_type["entry_appended"]]
    assert len(vendor.requests) <= 1  # the answer never ended: no assistant message
    files, lines = entries_on_disk(sessions)
    assert len(files) == 1, files
    assert lines[0]["type"] == "session"
    on_disk = {line.get("id"): line for line in lines[1:]}
    assert set(announced) <= set(on_disk)
    assert on_disk[entry["id"]] == entry
    assert entry["message"]["content"][0]["text"] == "remember this"
    # The lazy entries of the new session (model, thinking level) are written with it, before,
    # and so is the run's leading system message (pi 1.6.0).
    assert [line["type"] for line in lines[1:]] == [
        "model_change",
        "thinking_level_change",
        "message",
        "message",
    ]
    assert [line["message"]["role"] for line in lines[3:]] == ["system", "user"]
    assert announced[-2:] == [lines[3]["id"], entry["id"]]
    assert not any(line.get("role") == "assistant" for line in lines)


async def test_a_name_given_before_any_prompt_is_on_disk_once_announced(tmp_path: Path) -> None:
    async with rpc_on_vendor(tmp_path) as (rpc, _, sessions):
        await rpc.send({"id": "n1", "type": "set_session_name", "name": "kept"})
        entry = await kill_at(rpc, lambda entry: entry.get("type") == "session_info")
    _, lines = entries_on_disk(sessions)
    assert entry in lines and entry["name"] == "kept"


async def test_a_session_left_unused_leaves_no_file(tmp_path: Path) -> None:
    async with rpc_on_vendor(tmp_path) as (rpc, _, sessions):
        state = await rpc.data({"type": "get_state"})
        assert state["sessionFile"]
        await rpc.close_stdin()
        assert await rpc.wait_exit(WAIT) == 0
    assert [path for path in sessions.rglob("*") if path.is_file()] == []  # no file, no lock


async def test_a_clean_exit_leaves_the_session_file_and_nothing_else(tmp_path: Path) -> None:
    async with rpc_on_vendor(tmp_path) as (rpc, _, sessions):
        await rpc.data({"type": "set_session_name", "name": "tidy"})
        await rpc.close_stdin()
        assert await rpc.wait_exit(WAIT) == 0
    files = [path for path in sessions.rglob("*") if path.is_file()]
    assert [path.suffix for path in files] == [".jsonl"], files  # no ``.jsonl.lock`` beside it
