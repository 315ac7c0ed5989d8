"""A session with MCP servers: real server processes, the faux model with the fixtures' rules
(``<<tool {json}>>`` in a prompt calls that tool)."""

from __future__ import annotations

import atexit
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from pitrio.actors.model_router import FauxProvider, RouterConfig, start_model_router
from pitrio.actors.model_router.providers.faux_rules import FixtureRules
from pitrio.actors.session.bootstrap import SessionOptions, StartedSession, start_session
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.content import TextContent
from tests.stray_cancel import no_stray_cancel

SERVERS = Path(__file__).parent / "servers"
WAIT = 60.0
"""Seconds a test waits for something a server process does (two cores, many tests)."""

KILL_SERVER = signal.SIGUSR1
"""The signal a test sends to a process started with :func:`forked` to kill its server
(SIGKILL) and have the process end once the server is gone (SIGKILL itself would end the
stub at once, while the server might still answer for a moment)."""

_FORK_SERVER: list[str] = []
"""The socket of this test process's fork server, once started."""


def _fork_server() -> str:
    """The socket of this process's fork server (:mod:`tests.actors.mcp.servers.forks`),
    started on first use; it ends when this process does (its stdin closes)."""
    if _FORK_SERVER:
        return _FORK_SERVER[0]
    directory = tempfile.mkdtemp(prefix="pitrio-mcp-forks-")  # short: a socket path
    path = f"{directory}/socket"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    # Listening before it starts: a stub that connects while the SDK still imports waits
    # in the backlog.
    process = subprocess.Popen(
        [sys.executable, str(SERVERS / "forks.py"), str(listener.fileno())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        pass_fds=(listener.fileno(),),
        cwd=SERVERS,
        start_new_session=True,
    )
    listener.close()

    def stop() -> None:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        shutil.rmtree(directory, ignore_errors=True)

    atexit.register(stop)
    _FORK_SERVER.append(path)
    return path


def forked(*argv: str) -> list[str]:
    """The arguments for ``sys.executable`` that run the server ``python ARGV`` would run
    (a script and its arguments, or ``-m MODULE ...``), forked from a process that has
    already imported the ``mcp`` SDK (:mod:`tests.actors.mcp.servers.stub`): still a real
    server in its own process, on the pipes its client opened, with the client's working
    directory and environment, its exit status the process's; about a second of CPU less
    per start."""
    return ["-I", "-S", str(SERVERS / "stub.py"), _fork_server(), *argv]


def edge_server(markers: Path, **extra: Any) -> dict[str, Any]:
    """The config entry of the edge-case server, writing its markers into ``markers``; its
    tools are ``direct`` (declared) unless ``extra`` says otherwise (1.6.0's default is
    ``codemode``: see test_codemode_mcp)."""
    markers.mkdir(parents=True, exist_ok=True)
    return {
        "command": sys.executable,
        "args": forked(str(SERVERS / "edge.py"), str(markers)),
        "exposure": "direct",
        **extra,
    }


def time_server() -> dict[str, Any]:
    """The config entry of the third-party ``mcp-server-time`` (PyPI), offline, ``direct``."""
    return {
        "command": sys.executable,
        "args": forked("-m", "mcp_server_time", "--local-timezone", "UTC"),
        "exposure": "direct",
    }


@attrs.define
class McpSession:
    """The started session and where its files are."""

    started: StartedSession
    root: Path
    faux: FauxProvider | None = None
    """The model's provider (its ``requests`` say what each request declared)."""

    async def tool_results(self) -> list[ToolResultMessage]:
        """Every tool result in the session's messages."""
        messages = await self.started.session.messages()
        return [m for m in messages if isinstance(m, ToolResultMessage)]

    async def last_result(self) -> ToolResultMessage:
        """The latest tool result."""
        return (await self.tool_results())[-1]

    async def server(self, name: str) -> dict[str, Any]:
        """``get_state``'s entry for server ``name``."""
        state = await self.started.session.state()
        return next(s.to_json() for s in state.mcp_servers if s.name == name)


def text(result: ToolResultMessage) -> str:
    """A result's text parts joined."""
    return "".join(part.text for part in result.content if isinstance(part, TextContent))


@asynccontextmanager
async def mcp_session(
    root: Path,
    servers: dict[str, Any],
    *,
    settings: dict[str, Any] | None = None,
    start_limit: float = WAIT,
    top: dict[str, Any] | None = None,
    connected: bool = True,
    **options: Any,
) -> AsyncIterator[McpSession]:
    """A session in ``root`` whose ``--mcp-config`` file lists ``servers`` (started within
    ``start_limit`` seconds, ``inf`` for the tests that move a mock clock; ``top``: more keys
    of the file, such as ``autoEnableCodemode``); ``options`` are
    more :class:`SessionOptions` fields. The servers connect in the background (pi 1.6.0);
    with ``connected`` the session is yielded once each one's first start has ended (its
    tools registered, or its failure known)."""
    agent, work = root / "agent", root / "work"
    agent.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    if settings is not None:
        (agent / "settings.json").write_bytes(orjson.dumps(settings))
    config = root / "mcp-test.json"
    config.write_bytes(orjson.dumps({"mcpServers": servers, **(top or {})}))
    async with trio.open_nursery() as nursery:
        faux = FauxProvider(default=FixtureRules())
        router = await start_model_router(nursery, faux, config=RouterConfig(agent_dir=None))
        options = SessionOptions(
            cwd=str(work),
            model="faux/faux-1",
            agent_dir=agent,
            persist=False,
            mcp_config=(str(config),),
            **options,
        )
        with trio.fail_after(start_limit):
            started = await start_session(nursery, router, options)
            if connected and started.mcp is not None:
                await started.mcp.wait()
        with no_stray_cancel():
            yield McpSession(started, root, faux)
        nursery.cancel_scope.cancel()


async def wait_for(check: Callable[[], bool], what: str, seconds: float = WAIT) -> None:
    """Return once ``check()`` holds (an observable state: a file, a status), else fail."""
    with trio.move_on_after(seconds):
        while not check():  # noqa: ASYNC110 (files written by another process)
            await trio.sleep(0.02)
        return
    raise AssertionError(f"timed out waiting for {what}")
