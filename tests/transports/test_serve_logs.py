"""``pitrio serve``'s structured log, read from a real daemon process: its stderr lines parsed
as JSON and asserted by content (session lifecycle, runs with usage, provider errors with the
status, failed tools, clients with their address, refusals), and the text format and levels.

The model is the shared mock LLM (an OpenAI-compatible server on loopback) configured through
``models.json``, so usage, costs and an HTTP error come from a real provider exchange.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import open_websocket_url

from tests.faults.mock_llm import mock_llm
from tests.stray_cancel import no_stray_cancel
from tests.transports.daemon_harness import is_response, receive, send, settled, until

PITRIO = str(Path(sys.executable).parent / "pitrio")

Entry = dict[str, Any]


class LogReader:
    """Collects a process's stderr as parsed JSON lines (every line must be one)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.entries: list[Entry] = []
        self.raw: list[str] = []
        self.changed = trio.Event()
        self.done = trio.Event()

    async def run(self) -> None:
        buffer = b""
        try:
            while chunk := await self.stream.receive_some(65536):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    text = line.decode("utf-8")
                    self.raw.append(text)
                    self.entries.append(json.loads(text))
                    self.changed.set()
                    self.changed = trio.Event()
        finally:
            self.done.set()
            self.changed.set()

    async def wait_for(self, predicate: Callable[[Entry], bool], seconds: float = 20.0) -> Entry:
        with trio.fail_after(seconds):
            while True:
                for entry in self.entries:
                    if predicate(entry):
                        return entry
                if self.done.is_set():
                    raise AssertionError(f"no such log line in {self.raw}")
                await self.changed.wait()

    def events(self, name: str) -> list[Entry]:
        return [e for e in self.entries if e["event"] == name]


def event(name: str, **fields: Any) -> Callable[[Entry], bool]:
    def match(entry: Entry) -> bool:
        return entry["event"] == name and all(
            entry["fields"].get(k) == v for k, v in fields.items()
        )

    return match


def write_agent(agent: Path, port: int) -> None:
    agent.mkdir(parents=True)
    models = {
        "providers": {
            "mock": {
                "baseUrl": f"http://127.0.0.1:{port}/v1",
                "api": "openai-completions",
                "apiKey": "mock-key",
                "models": [
                    {
                        "id": "mock-model",
                        "cost": {"input": 3, "output": 15, "cacheRead": 0, "cacheWrite": 0},
                    },
                ],
            }
        }
    }
    (agent / "models.json").write_text(json.dumps(models))
    settings = {"retry": {"enabled": False, "provider": {"maxRetries": 0}}}
    (agent / "settings.json").write_text(json.dumps(settings))


@asynccontextmanager
async def daemon(
    agent: Path, cwd: Path, *extra: str
) -> AsyncIterator[tuple[trio.Process, LogReader, str]]:
    """A ``pitrio serve`` process; yields it, its log and its URL; SIGTERM at the end."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    env.pop("PITRIO_SESSION_DIR", None)
    process = await trio.lowlevel.open_process(
        [PITRIO, "serve", "--port", "0", "--cwd", str(cwd), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert process.stderr is not None
        reader = LogReader(process.stderr)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader.run)
            started = await reader.wait_for(event("daemon_started"))
            with no_stray_cancel():
                yield process, reader, started["fields"]["url"]
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0
            await reader.done.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_the_daemon_logs_sessions_runs_failures_and_clients(tmp_path: Path) -> None:
    script = {
        "queue": [
            # the first prompt: a read of a missing file (the tool fails), then an answer
            {"kind": "tool_call", "name": "read", "arguments": {"path": "missing.txt"}},
            {
                "kind": "text",
                "text": "no such file",
                "usage": {"prompt_tokens": 1000, "completion_tokens": 100},
            },
            # the second prompt: an HTTP error
            {"kind": "error", "preset": "bad_request", "status": 400},
        ]
    }
    agent = tmp_path / "agent"
    work = tmp_path / "work"
    work.mkdir()
    async with mock_llm(script, tmp_path) as port:
        write_agent(agent, port)
        async with daemon(agent, work, "--model", "mock/mock-model") as (_, log, url):
            token = (agent / "daemon-token").read_text().strip()
            headers = [(b"Authorization", f"Bearer {token}".encode())]
            ws_base = url.replace("http://", "ws://").rstrip("/")
            async with open_websocket_url(f"{ws_base}/v1/host", extra_headers=headers) as host:
                await receive(host)
                await send(host, {"id": 1, "type": "create"})
                session_id = (await until(host, is_response(1)))[-1]["data"]["sessionId"]
                async with open_websocket_url(
                    f"{ws_base}/v1/sessions/{session_id}", extra_headers=headers
                ) as ws:
                    await receive(ws)
                    await send(ws, {"id": "a", "type": "prompt", "message": "read it"})
                    await until(ws, settled)
                    await send(ws, {"id": "b", "type": "prompt", "message": "again"})
                    await until(ws, settled)
                await log.wait_for(event("client_disconnected", endpoint="session"))
                async with httpx.AsyncClient() as client:  # no token: refused
                    assert (await client.get(f"{url}metrics")).status_code == 401
                await send(host, {"id": 2, "type": "close", "sessionId": session_id})
                await until(host, is_response(2))
                await log.wait_for(event("session_closed", session=session_id))

    for entry in log.entries:
        assert set(entry) == {"time", "level", "logger", "event", "fields"}, entry
        assert entry["time"].endswith("Z") and entry["level"] in ("debug", "info", "warning")
    assert log.events("daemon_started")[0]["fields"]["url"] == url
    assert log.events("daemon_started")[0]["fields"]["auth"] is True
    for name in ("session_created", "session_opened", "session_closed"):
        (entry,) = [e for e in log.events(name) if e["fields"]["session"] == session_id]
        assert entry["level"] == "info" and entry["logger"] == "pitrio.host"

    connected = log.events("client_connected")
    assert [c["fields"]["endpoint"] for c in connected] == ["host", "session"]
    assert connected[1]["fields"]["session"] == session_id
    assert all(c["fields"]["remote"].startswith("127.0.0.1:") for c in connected)
    (gone,) = [e for e in log.events("client_disconnected") if e["fields"]["endpoint"] == "session"]
    assert gone["fields"]["remote"] == connected[1]["fields"]["remote"]
    assert gone["fields"]["seconds"] >= 0

    assert [e["fields"]["run"] for e in log.events("run_start")] == [1, 2]
    (tool,) = log.events("tool_failed")
    assert tool["level"] == "warning" and tool["fields"]["tool"] == "read"
    assert tool["fields"]["session"] == session_id and "missing.txt" in tool["fields"]["error"]
    first, second = log.events("run_end")
    assert first["fields"]["session"] == session_id and first["fields"]["run"] == 1
    assert first["fields"]["turns"] == 2 and first["fields"]["stop_reason"] == "stop"
    assert first["fields"]["model"] == "mock/mock-model"
    assert first["fields"]["usage"]["input"] >= 1000 and first["fields"]["usage"]["output"] >= 100
    # 1000 input tokens at $3 and 100 output tokens at $15 per million, plus the tool turn's
    assert first["fields"]["cost"] >= 0.0045
    assert first["fields"]["tool_failures"] == 1 and first["fields"]["errors"] == 0
    assert isinstance(first["fields"]["duration_ms"], int) and first["fields"]["duration_ms"] >= 0
    (error,) = log.events("provider_error")
    assert error["level"] == "warning" and error["fields"]["status"] == 400
    assert error["fields"]["session"] == session_id and error["fields"]["run"] == 2
    # pi 1.6.0's completions error text: "<status>: <the error body as JSON>".
    assert error["fields"]["error"].startswith("400: {")
    assert second["fields"]["errors"] == 1 and second["fields"]["stop_reason"] == "error"

    (refused,) = log.events("request_refused")
    assert refused["fields"]["status"] == 401 and refused["fields"]["reason"] == "auth"
    assert refused["fields"]["remote"].startswith("127.0.0.1:")
    names = [e["event"] for e in log.entries]
    assert names[-1] == "daemon_stopped"
    assert names.index("signal") < names.index("daemon_stopping") < len(names) - 1
    assert "mock-key" not in "\n".join(log.raw)


async def test_text_format_and_levels(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    for level, shown in (("info", True), ("WARNING", False)):
        process = await trio.lowlevel.open_process(
            [PITRIO, "serve", "--port", "0", "--log-format", "text", "--log-level", level],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert process.stdout is not None and process.stderr is not None
            with trio.fail_after(20):
                line = b""
                while b"listening on" not in line:
                    line += await process.stdout.receive_some(4096)
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(10):
                assert await process.wait() == 0
            err = b""
            while chunk := await process.stderr.receive_some(65536):
                err += chunk
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        lines = err.decode().splitlines()
        started = [x for x in lines if " daemon_started " in x]
        if shown:
            (line_text,) = started
            parts = line_text.split(" ")
            assert parts[0].endswith("Z") and parts[1] == "info"
            assert "pitrio.daemon daemon_started url=http://127.0.0.1:" in line_text
            assert "auth=true" in line_text and "store=files" in line_text
            assert not lines[0].startswith("{")
        else:
            assert started == [] and lines == [], lines


@pytest.mark.parametrize(("flag", "value"), [("--log-level", "loud"), ("--log-format", "xml")])
def test_a_bad_log_option_is_refused(flag: str, value: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [PITRIO, "serve", "--port", "0", flag, value],
        capture_output=True,
        text=True,
        env={**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent")},
        timeout=30,
    )
    assert result.returncode == 2
    assert flag in result.stderr and value in result.stderr
    assert not (tmp_path / "agent" / "daemon-token").exists()


async def test_a_client_behind_a_proxy_is_logged_with_its_forwarded_address(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What docs/operations.md's proxy set-up relies on: the page's https origin is accepted
    once allowed (refused, and logged as such, otherwise), and the proxy's X-Forwarded-For
    shows in the connection's log events."""
    from trio_websocket import ConnectionRejected

    from tests.transports.daemon_harness import AUTH, connect, running_daemon

    origin = "https://agent.example.com"
    proxied = [*AUTH, (b"Origin", origin.encode()), (b"X-Forwarded-For", b"203.0.113.7")]
    caplog.set_level(logging.INFO, logger="pitrio")
    async with running_daemon(tmp_path / "agent") as d:
        with pytest.raises(ConnectionRejected):
            async with connect(d, "/v1/host", headers=proxied):
                pass
    refused = [r for r in caplog.records if getattr(r, "pitrio_event", None) == "request_refused"]
    assert [r.pitrio_fields["reason"] for r in refused] == ["origin"]  # type: ignore[attr-defined]
    caplog.clear()
    allowed = {"allowed_origins": (origin,)}
    async with (
        running_daemon(tmp_path / "agent", daemon=allowed) as d,
        connect(d, "/v1/host", headers=proxied) as ws,
    ):
        assert (await receive(ws))["type"] == "host_attached"
    fields = [
        r.pitrio_fields  # type: ignore[attr-defined]
        for r in caplog.records
        if getattr(r, "pitrio_event", None) in ("client_connected", "client_disconnected")
    ]
    assert len(fields) == 2
    assert all(f["forwarded_for"] == "203.0.113.7" and f["endpoint"] == "host" for f in fields)
    assert all(f["remote"].startswith("127.0.0.1:") for f in fields)
