"""A real ``pitrio serve`` in front of the shared mock LLM, and ``pitrio attach`` as a process
with pipes (or a pty), read line by line: what the attach tests drive."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio.actors.session.resources.trust import canonical_path, save_decisions
from tests.faults.mock_llm import mock_llm

PITRIO = str(Path(sys.executable).parent / "pitrio")
ROOT = Path(__file__).resolve().parents[2]
PERMISSION_GATE = ROOT / "examples" / "extensions" / "permission_gate.py"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class Lines:
    """The lines of a process's stream as they come; ``until`` waits for one matching."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.seen: list[str] = []
        self.all: list[str] = []

    async def until(self, pattern: str, seconds: float = 30.0) -> re.Match[str]:
        """Wait for a line matching ``pattern`` (ANSI attributes removed); lines before it are
        kept in ``all``, the match and the lines before it leave ``seen``."""
        with trio.move_on_after(seconds):
            return await self._until(pattern)
        raise AssertionError(f"no line matching {pattern!r} in {seconds} s: {self.all}")

    async def _until(self, pattern: str) -> re.Match[str]:
        while True:
            for index, line in enumerate(self.seen):
                if match := re.search(pattern, line):
                    del self.seen[: index + 1]
                    return match
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                if self.buffer:  # the last line has no newline (a marker, a question)
                    self._add(self.buffer)
                    self.buffer = b""
                    continue
                raise AssertionError(f"no line matching {pattern!r} in {self.all}")
            self.buffer += chunk
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                self._add(line)
            if self.buffer.endswith((b"] ", b": ", b"> ")):  # waiting for an answer
                self._add(self.buffer)
                self.buffer = b""

    def _add(self, raw: bytes) -> None:
        line = ANSI.sub("", raw.decode("utf-8", "replace")).replace("\r", "")
        self.seen.append(line)
        self.all.append(line)

    async def rest(self, seconds: float = 20.0) -> str:
        """Everything up to the end of the stream."""
        with trio.fail_after(seconds):
            while chunk := await self.stream.receive_some(65536):
                self.buffer += chunk
        text = ANSI.sub("", self.buffer.decode("utf-8", "replace"))
        self.buffer = b""
        return text


def mock_models(port: int) -> dict[str, Any]:
    """pi's ``models.json`` for the mock on ``port``."""
    return {
        "providers": {
            "mock": {
                "baseUrl": f"http://127.0.0.1:{port}/v1",
                "api": "openai-completions",
                "apiKey": "mock-key",
                "models": [
                    {
                        "id": "mock-model",
                        "name": "Mock Model",
                        "reasoning": False,
                        "input": ["text"],
                        "contextWindow": 128000,
                        "maxTokens": 16384,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    }
                ],
            }
        }
    }


@attrs.frozen
class Served:
    """A running daemon: its address, token, agent dir and the sessions' working directory."""

    url: str
    token: str
    agent: Path
    work: Path

    def env(self, **extra: str) -> dict[str, str]:
        """The environment ``pitrio attach`` finds this daemon through."""
        env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "VISUAL", "EDITOR")}
        return {
            **env,
            "PITRIO_AGENT_DIR": str(self.agent),
            "PITRIO_DAEMON_URL": self.url,
            "PITRIO_DAEMON_TOKEN": self.token,
            **extra,
        }


@asynccontextmanager
async def serving(
    tmp: Path,
    script: Mapping[str, Any],
    *,
    settings: Mapping[str, Any] | None = None,
    extensions: tuple[Path, ...] = (),
    options: tuple[str, ...] = (),
) -> AsyncIterator[Served]:
    """The mock LLM answering by ``script``, and ``pitrio serve`` using it by default
    (``options``: more of its command line, e.g. ``browser.ONE_PROCESS``)."""
    agent, work = tmp / "agent", tmp / "work"
    agent.mkdir(parents=True)
    (work / ".pitrio" / "extensions").mkdir(parents=True)
    # a project's extensions load only for a trusted project (pi 1.6.0)
    save_decisions(agent, [(canonical_path(work), True)])
    for extension in extensions:
        shutil.copy(extension, work / ".pitrio" / "extensions" / extension.name)
    base = {"defaultProvider": "mock", "defaultModel": "mock-model"}
    (agent / "settings.json").write_text(json.dumps({**base, **(settings or {})}))
    async with mock_llm(dict(script), tmp) as port:
        (agent / "models.json").write_text(json.dumps(mock_models(port)))
        async with serve_process(agent, work, *options) as (_, url, token):
            yield Served(url, token, agent, work)


@asynccontextmanager
async def serve_process(
    agent: Path, cwd: Path, *args: str
) -> AsyncIterator[tuple[trio.Process, str, str]]:
    """``pitrio serve`` as a process on any free port, sessions under ``agent`` (``args``:
    more of its options): the process, its url and token. SIGTERM at the end (SIGKILL after
    10 s)."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(agent)}
    env.pop("PITRIO_SESSION_DIR", None)
    process = await trio.lowlevel.open_process(
        [PITRIO, "serve", "--port", "0", "--cwd", str(cwd), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert process.stdout is not None
        url = (await Lines(process.stdout).until(r"listening on (http://\S+)")).group(1)
        token = (agent / "daemon-token").read_text().strip()
        yield process, url, token
    finally:
        process.terminate()
        with trio.CancelScope(shield=True):
            with trio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()


@attrs.define
class Attached:
    """``pitrio attach`` as a process: write lines, read its stdout and stderr."""

    process: trio.Process
    out: Lines
    err: Lines

    async def type(self, line: str) -> None:
        """Send one line to its stdin."""
        assert self.process.stdin is not None
        await self.process.stdin.send_all(line.encode() + b"\n")

    async def close_input(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.aclose()

    async def exit_code(self, seconds: float = 20.0) -> int:
        with trio.fail_after(seconds):
            return await self.process.wait()


@asynccontextmanager
async def attach(env: Mapping[str, str], *args: str) -> AsyncIterator[Attached]:
    """Run ``pitrio attach ARGS`` with pipes on stdin, stdout and stderr."""
    process = await trio.lowlevel.open_process(
        [PITRIO, "attach", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(env),
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        yield Attached(process, Lines(process.stdout), Lines(process.stderr))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
