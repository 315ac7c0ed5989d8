"""``pitrio serve`` and ``pitrio attach`` as processes: start-up, SIGTERM with runs in flight,
the terminal client, and a client written with another websocket library."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, open_websocket_url

from pitrio.actors.model_router import FauxProvider, FauxReply
from tests.transports.daemon_harness import (
    TOKEN,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    until,
)

PITRIO = str(Path(sys.executable).parent / "pitrio")


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


class Lines:
    """Lines of a process's output as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.seen: list[str] = []

    async def until(self, pattern: str, seconds: float = 20.0) -> re.Match[str]:
        with trio.fail_after(seconds):
            while True:
                for line in self.seen:
                    if match := re.search(pattern, line):
                        self.seen.remove(line)
                        return match
                while b"\n" not in self.buffer:
                    chunk = await self.stream.receive_some(65536)
                    if not chunk:
                        raise AssertionError(f"no line matching {pattern!r}: {self.seen}")
                    self.buffer += chunk
                line, self.buffer = self.buffer.split(b"\n", 1)
                self.seen.append(line.decode("utf-8", "replace"))


async def test_sigterm_with_runs_in_flight_exits_cleanly(agent: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    process = await trio.lowlevel.open_process(
        [PITRIO, "serve", "--port", "0", "--cwd", str(tmp_path), "--faux-chunk-delay", "0.01"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert process.stdout is not None
        lines = Lines(process.stdout)
        url = (await lines.until(r"listening on (http://\S+)")).group(1)
        page = (await lines.until(r"web page: (\S+)")).group(1)
        token = (agent / "daemon-token").read_text().strip()
        assert page == f"{url}#token={token}"
        assert oct((agent / "daemon-token").stat().st_mode & 0o777) == "0o600"
        assert json.loads((agent / "daemon.json").read_text())["url"] == url
        headers = [(b"Authorization", f"Bearer {token}".encode())]
        ws_base = url.replace("http://", "ws://").rstrip("/")
        session_ids = []
        async with open_websocket_url(f"{ws_base}/v1/host", extra_headers=headers) as host:
            await receive(host)
            for index in range(2):
                await send(host, {"id": index, "type": "create"})
                frames = await until(host, is_response(index))
                session_ids.append(frames[-1]["data"]["sessionId"])
        closes: list[int] = []
        async with trio.open_nursery() as nursery:

            async def stream_then_wait(session_id: str, started: trio.Event) -> None:
                async with open_websocket_url(
                    f"{ws_base}/v1/sessions/{session_id}", extra_headers=headers
                ) as ws:
                    await receive(ws)
                    await send(ws, {"id": "p", "type": "prompt", "message": "word " * 600})
                    await until(ws, lambda f: f.get("type") == "message_update")
                    started.set()
                    with pytest.raises(ConnectionClosed) as closed:
                        while True:
                            await ws.get_message()
                    closes.append(closed.value.reason.code)

            events = [trio.Event(), trio.Event()]
            for session_id, event in zip(session_ids, events, strict=True):
                nursery.start_soon(stream_then_wait, session_id, event)
            for event in events:
                await event.wait()
            started = trio.current_time()
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                code = await process.wait()
            assert code == 0
            assert trio.current_time() - started < 10
        assert closes == [1001, 1001]
        assert not (agent / "daemon.json").exists()
        # Every file is consistent: no torn line, the aborted reply recorded as such.
        files = await trio.to_thread.run_sync(lambda: list(agent.glob("sessions/*/*.jsonl")))
        assert len(files) == 2
        for path in files:
            check = await trio.run_process(
                [PITRIO, "sessions", "check", str(path)], capture_stdout=True, check=False
            )
            assert check.returncode == 0, check.stdout
            entries = [json.loads(line) for line in path.read_text().splitlines()]
            last = entries[-1]["message"]
            assert last["role"] == "assistant" and last["stopReason"] == "aborted"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_non_loopback_without_token_is_refused(agent: Path) -> None:
    result = await trio.run_process(
        [PITRIO, "serve", "--host", "0.0.0.0", "--port", "0", "--no-auth"],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env={**os.environ, "PITRIO_AGENT_DIR": str(agent)},
    )
    assert result.returncode == 1
    assert b"without a token" in result.stderr


async def test_attach_terminal_client(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text="Hello from the daemon.", chunk_size=4)])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        env = {
            **os.environ,
            "PITRIO_DAEMON_URL": f"http://127.0.0.1:{daemon.port}/",
            "PITRIO_DAEMON_TOKEN": TOKEN,
        }
        process = await trio.lowlevel.open_process(
            [PITRIO, "attach", session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert process.stdin is not None and process.stdout is not None
            assert process.stderr is not None
            errors = Lines(process.stderr)
            await errors.until(rf"attached to {session_id}")
            await process.stdin.send_all(b"hi there\n")
            output = Lines(process.stdout)
            await output.until("Hello from the daemon.")
            await process.stdin.aclose()
            with trio.fail_after(10):
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def test_a_client_of_another_library(agent: Path) -> None:
    """The ``websockets`` package (sync client, in a thread) against the daemon."""
    websockets_sync = pytest.importorskip("websockets.sync.client")
    faux = FauxProvider([FauxReply(text="independent client", chunk_size=5)])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        uri = f"ws://127.0.0.1:{daemon.port}/v1/sessions/{session_id}"

        def chat() -> list[dict[str, Any]]:
            frames: list[dict[str, Any]] = []
            with websockets_sync.connect(
                uri, additional_headers={"Authorization": f"Bearer {TOKEN}"}
            ) as ws:
                frames.append(json.loads(ws.recv(timeout=10)))
                ws.send(json.dumps({"id": 1, "type": "prompt", "message": "hello"}))
                while frames[-1].get("type") != "agent_settled":
                    frames.append(json.loads(ws.recv(timeout=10)))
                ws.send(json.dumps({"id": 2, "type": "get_last_assistant_text"}))
                frames.append(json.loads(ws.recv(timeout=10)))
            return frames

        frames = await trio.to_thread.run_sync(chat)
        assert frames[0]["type"] == "attached"
        assert frames[-1]["data"] == {"text": "independent client"}
        deltas = [
            f["assistantMessageEvent"]["delta"]
            for f in frames
            if f.get("type") == "message_update"
            and f["assistantMessageEvent"]["type"] == "text_delta"
        ]
        assert "".join(deltas) == "independent client"
        # Delta-only updates by default: no partial message travels with a delta.
        updates = [f for f in frames if f.get("type") == "message_update"]
        assert all(
            "message" not in f and "partial" not in f["assistantMessageEvent"] for f in updates
        )
