"""Driving pitrio's RPC server from trio tests: as a real process, or in this process.

:func:`rpc_process` starts ``python -m pitrio.transports.cli --mode rpc`` over real pipes in a
scratch directory (its own HOME, agent dir and cwd; no ``PITRIO_*`` or API-key variables from
the outer environment); :func:`served` runs an :class:`~pitrio.transports.rpc.server.RpcServer`
in the test's own trio run over memory streams. Both give an :class:`RpcClient`, which reads
the output line by line in the background and offers waits on what arrived.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio
import trio.testing

from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    FixtureRules,
    RouterConfig,
    start_model_router,
)
from pitrio.actors.model_router.providers.faux_rules import SUMMARIZER_PROMPT_START
from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session.runtime import SessionRuntime
from pitrio.messages.codec import dumps
from pitrio.messages.model import LlmContext
from pitrio.transports.rpc.server import RpcServer
from tests.stray_cancel import no_stray_cancel

WAIT_SECONDS = 15.0

# The recording settings of pi's fixtures (shared/fixtures/README.md).
FIXTURE_SETTINGS = {
    "quietStartup": True,
    "retry": {"enabled": True, "maxRetries": 2, "baseDelayMs": 50},
    "compaction": {"keepRecentTokens": 60},
}
# The recording's project directory.
PROJECT_FILES = {
    "notes.txt": "Project notes\n- first item\n- second item\n",
    "src/app.py": 'def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("world"))\n',
    "README.md": "# demo project\n\nA tiny project used while recording pi fixtures.\n",
}


@attrs.frozen
class Dirs:
    """A scratch installation: home, agent dir and project cwd."""

    root: Path
    home: Path
    agent: Path
    cwd: Path

    @classmethod
    def make(cls, root: Path, *, settings: Mapping[str, Any] | None = None) -> Dirs:
        """Create the directories (and the fixtures' project files and settings)."""
        home, agent, cwd = root / "home", root / "agent", root / "project"
        for directory in (home, agent, cwd):
            directory.mkdir(parents=True, exist_ok=True)
        for name, text in PROJECT_FILES.items():
            (cwd / name).parent.mkdir(parents=True, exist_ok=True)
            (cwd / name).write_text(text)
        (agent / "settings.json").write_bytes(orjson.dumps(settings or FIXTURE_SETTINGS))
        return cls(root=root, home=home, agent=agent, cwd=Path(os.path.realpath(cwd)))


def environment(dirs: Dirs, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: scratch dirs, fixture replies, nothing of the outer config."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PITRIO_", "PI_")) and not k.endswith("_API_KEY")
    }
    env.update(
        HOME=str(dirs.home),
        PITRIO_AGENT_DIR=str(dirs.agent),
        PITRIO_FAUX_SCRIPT="fixture-rules",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra or {})
    return env


def loads(line: bytes) -> Any:
    """One output line's value; lone surrogates (which orjson refuses) kept, as pi's
    clients read them."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


class RpcClient:
    """One side of an RPC conversation: writes commands, collects every line written back."""

    def __init__(self, stdin: trio.abc.SendStream, stdout: trio.abc.ReceiveStream) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.raw = bytearray()
        self.lines: list[dict[str, Any]] = []
        self.stderr = bytearray()
        self.stdout_closed = False
        self.by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.responses: dict[Any, dict[str, Any]] = {}
        self._changed = trio.Event()
        self._ids = 0

    async def read_stdout(self) -> None:
        """Collect stdout until it ends (run this in a nursery)."""
        pending = b""
        async for chunk in self.stdout:
            self.raw += chunk
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                value = loads(line)
                self.lines.append(value)
                self.by_type[value.get("type")].append(value)
                if value.get("type") == "response" and "id" in value:
                    self.responses.setdefault(value["id"], value)
            self._changed.set()
            self._changed = trio.Event()
        self.stdout_closed = True
        self._changed.set()

    async def send_raw(self, data: bytes) -> None:
        """Write bytes to stdin as they are."""
        await self.stdin.send_all(data)

    async def send(self, command: Mapping[str, Any]) -> None:
        """Write one command line."""
        await self.send_raw(dumps(dict(command)) + b"\n")  # lone surrogates escaped

    async def wait_until(
        self, condition: Callable[[list[dict[str, Any]]], bool], seconds: float = WAIT_SECONDS
    ) -> bool:
        """Wait until ``condition(lines)`` holds; ``False`` on timeout or when stdout ends."""
        with trio.move_on_after(seconds):
            while not condition(self.lines):
                if self.stdout_closed:
                    return False
                await self._changed.wait()
            return True
        return False

    async def response(self, request_id: Any, seconds: float = WAIT_SECONDS) -> dict[str, Any]:
        """The response with ``id``, once it arrived."""
        found = await self.wait_until(lambda lines: request_id in self.responses, seconds)
        assert found, f"no response {request_id!r}; stderr: {self.stderr.decode()[-2000:]}"
        return self.responses[request_id]

    async def request(self, command: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        """Send a command with a fresh id and return its response."""
        self._ids += 1
        request_id = f"r{self._ids}"
        await self.send({"id": request_id, **command, **fields})
        return await self.response(request_id)

    async def data(self, command: Mapping[str, Any], **fields: Any) -> Any:
        """Send a command that must succeed; returns its ``data`` (``None`` if absent)."""
        response = await self.request(command, **fields)
        assert response["success"] is True, response
        return response.get("data")

    async def event(self, kind: str, count: int = 1) -> dict[str, Any]:
        """The ``count``-th event of type ``kind``, once it arrived."""
        found = await self.wait_until(lambda lines: len(self.by_type[kind]) >= count)
        assert found, f"no {kind} #{count}; stderr: {self.stderr.decode()[-2000:]}"
        return self.by_type[kind][count - 1]

    async def close_stdin(self) -> None:
        """End the input (EOF)."""
        await self.stdin.aclose()


class RpcProcess(RpcClient):
    """A running ``pitrio --mode rpc`` and everything it wrote so far."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        super().__init__(process.stdin, process.stdout)
        self.process = process

    async def read_stderr(self) -> None:
        """Collect stderr until it ends."""
        assert self.process.stderr is not None
        async for chunk in self.process.stderr:
            self.stderr += chunk

    async def wait_exit(self, seconds: float = WAIT_SECONDS) -> int:
        """The exit code, once the process ended."""
        with trio.fail_after(seconds):
            return await self.process.wait()


def slow_summaries() -> Callable[[LlmContext], FauxReply]:
    """The fixture rules, every reply unpaced but a compaction's summary, which streams at
    the provider's pace: a test that aborts a compaction has it slow, and the prompts that
    make something to compact take no time."""
    rules = FixtureRules()

    def reply(context: LlmContext) -> FauxReply:
        answer = rules(context)
        if context.system_prompt.startswith(SUMMARIZER_PROMPT_START):
            return answer
        return attrs.evolve(answer, chunk_delay=0.0)

    return reply


def is_response(line: Mapping[str, Any], request_id: Any) -> bool:
    """Whether ``line`` is the response to ``request_id``."""
    return line.get("type") == "response" and line.get("id") == request_id


def events_of(lines: Sequence[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events of type ``kind`` in ``lines``."""
    return [line for line in lines if line.get("type") == kind]


@asynccontextmanager
async def rpc_process(
    dirs: Dirs,
    *args: str,
    env: Mapping[str, str] | None = None,
    model: str = "faux/faux-1",
) -> AsyncIterator[RpcProcess]:
    """Run ``pitrio --mode rpc --model <model> *args``; killed (if still running) on exit."""
    command = [sys.executable, "-m", "pitrio.transports.cli", "--mode", "rpc"]
    if model:
        command += ["--model", model]
    process = await trio.lowlevel.open_process(
        [*command, *args],
        cwd=dirs.cwd,
        env=environment(dirs, env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    rpc = RpcProcess(process)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(rpc.read_stdout)
            nursery.start_soon(rpc.read_stderr)
            try:
                with no_stray_cancel():
                    yield rpc
            finally:
                if process.returncode is None:
                    process.kill()
                with trio.CancelScope(shield=True), trio.move_on_after(5):
                    await process.wait()
                # The readers end at EOF; do not let a stuck pipe hold the test.
                nursery.cancel_scope.deadline = trio.current_time() + 2
    finally:
        if process.returncode is None:
            process.kill()


@asynccontextmanager
async def served(
    root: Path,
    faux: FauxProvider | None = None,
    *,
    model: str = "faux/faux-1",
    settings: Mapping[str, Any] | None = None,
    server_type: type[RpcServer] = RpcServer,
) -> AsyncIterator[RpcClient]:
    """An :class:`RpcServer` (or ``server_type``) in this process, over memory streams (no
    pacing by default)."""
    dirs = Dirs.make(root, settings=settings)
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery,
            faux or FauxProvider(default=FixtureRules()),
            config=RouterConfig(catalogue=False),
        )
        runtime = SessionRuntime(nursery, router)
        await runtime.start(
            SessionOptions(
                cwd=str(dirs.cwd),
                model=model,
                agent_dir=dirs.agent,
                session_dir=str(dirs.agent / "sessions"),
            )
        )
        client_send, server_receive = trio.testing.memory_stream_one_way_pair()
        server_send, client_receive = trio.testing.memory_stream_one_way_pair()
        server = server_type(runtime, router, server_send)
        client = RpcClient(client_send, client_receive)
        served_all = trio.Event()

        async def serve() -> None:
            await server.serve(server_receive)
            await server_send.aclose()
            served_all.set()

        nursery.start_soon(client.read_stdout)
        nursery.start_soon(serve)
        try:
            with no_stray_cancel():
                yield client
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                if not served_all.is_set():
                    await client.close_stdin()
                await served_all.wait()
                await runtime.aclose()
            nursery.cancel_scope.cancel()
