"""MCP servers an extension registers after start-up (pi 1.6.0: "servers registered later
connect right away, and ``unregisterMcpServer()`` closes the connection and makes the
server's tools unreachable").

Each such server gets its own MCP actor in a cancel scope of the session's nursery, so
closing it is cancelling that scope (the actor ends its connection task, which ends the
server process or HTTP session). Beside the actor runs the server's own
:class:`~pitrio.actors.mcp.live.McpToolSet`: its tools are registered with the session's tool
executor (``direct`` ones active) when it connects and again after each
``notifications/tools/list_changed``, and removed on close; the ``mcp_servers`` prompt
section is rendered again over the start-up servers and these. :meth:`LateMcpServers.sync` brings
the running set to the registrations as they are when it runs, under a lock, so calls made
in any order converge on the latest registrations. A server registered during ``setup``
started with the session's other servers; unregistering it (or registering another entry
under its name) closes it in their MCP actor and takes its tools away in the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from pitrio.actors.mcp.config import McpServerConfig, parse_file
from pitrio.actors.mcp.live import McpToolSet, listed_server
from pitrio.actors.mcp.naming import declared_exposure
from pitrio.actors.mcp.prompt import SECTION, ListedServer, render_servers_section
from pitrio.actors.mcp.search_tool import ToolSearch
from pitrio.actors.mcp.session import UPDATES
from pitrio.actors.mcp.state import McpServerState

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.events import RegisteredMcpServer
    from pitrio.actors.tool_executor import ToolExecutorHandle


class _Sections(Protocol):
    async def set_prompt_section(self, name: str, text: str | None) -> None:
        """Replace (``None``: remove) one of the session's prompt sections."""
        ...


class _Closes(Protocol):
    async def close(self, name: str) -> None:
        """Close server ``name`` for good (the start-up MCP actor's handle)."""
        ...


class _Reports(Protocol):
    def report(self, path: str, event: str, error: BaseException | str) -> None:
        """Send an ``extension_error`` for ``path`` / ``event``."""
        ...


class SessionPort(Protocol):
    """What late servers need of the session: ``extensions.api.SessionPort`` has it (named
    here so that the API can import this module without a circle)."""

    @property
    def session(self) -> _Sections:
        """The session's handle."""
        ...

    @property
    def runner(self) -> _Reports:
        """The extensions' runner (reports their errors)."""
        ...

    @property
    def tools(self) -> ToolExecutorHandle:
        """The session's tool executor."""
        ...

    @property
    def nursery(self) -> trio.Nursery:
        """Where a late server's MCP actor runs."""
        ...

    @property
    def cwd(self) -> str:
        """The session's working directory."""
        ...


SOURCE = "servers registered by extensions"


@attrs.define
class _Running:
    """A server started after start-up: its entry, what closes it, its tools."""

    config: dict[str, Any]
    scope: trio.CancelScope
    done: trio.Event
    live: McpToolSet | None = None
    """The server's tool set (its tools, its line of the section)."""
    handle: Any = None
    """The server's MCP actor's handle (its state for ``get_state``)."""


class LateMcpServers:
    """The session's servers registered after start-up (see the module docstring)."""

    def __init__(
        self,
        *,
        started: tuple[str, ...],
        listed: Callable[[], tuple[ListedServer, ...]],
        search: ToolSearch | None = None,
        startup: _Closes | None = None,
        startup_tools: McpToolSet | None = None,
        from_setup: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self._started = set(started)
        self._listed = listed
        """The start-up servers as the prompt section lists them now (they connect in the
        background, and say more of themselves once connected)."""
        self._startup = startup
        """The start-up servers' MCP actor, which closes those registered during ``setup``."""
        self._startup_tools = startup_tools
        """The start-up servers' tool set, which withdraws a closed server's tools."""
        self._setup = {name: dict(config) for name, config in (from_setup or {}).items()}
        """Servers an extension registered during ``setup`` that started with the session
        and are still open: their registered entries."""
        self._search = search
        """``tool_search`` of the session (made here, and registered, for the first late
        server with deferred tools when the session started without one)."""
        self._running: dict[str, _Running] = {}
        self._lock = trio.Lock()

    def states(self) -> tuple[McpServerState, ...]:
        """The open servers' states (``get_state``'s ``mcpServers``), in start order."""
        found = (r.handle.state_of(name) for name, r in self._running.items())
        return tuple(state for state in found if state is not None)

    @property
    def running(self) -> tuple[str, ...]:
        """The names of the servers started after start-up that are still open."""
        return tuple(self._running)

    async def sync(self, port: SessionPort, servers: Mapping[str, RegisteredMcpServer]) -> None:
        """Close the servers no longer registered (or registered anew), start the new ones,
        then render the prompt section again. ``servers`` is read under the lock: the
        registrations as they are then."""
        async with self._lock:
            for name in list(self._setup):
                current = servers.get(name)
                if current is None or current.config != self._setup[name]:
                    await self._close_setup(name)
            for name in list(self._running):
                current = servers.get(name)
                if current is None or current.config != self._running[name].config:
                    await self._close(port, name)
            for name, registration in list(servers.items()):
                if name not in self._started and name not in self._running:
                    await self._open(port, registration)
            await port.session.set_prompt_section(SECTION, self.section())

    def section(self) -> str | None:
        """The ``mcp_servers`` section over the start-up servers and these."""
        late = [line for r in self._running.values() if r.live for line in r.live.listed]
        listed = [*self._listed(), *late]
        return render_servers_section(listed, declared_exposure)

    async def _open(self, port: SessionPort, registration: RegisteredMcpServer) -> None:
        config = parse_file({"mcpServers": {registration.name: registration.config}}, SOURCE)
        enabled = [server for server in config.servers if server.enabled]
        if not enabled:
            return
        server = enabled[0]
        try:
            from pitrio.actors.mcp.actor import start_mcp
        except ImportError:
            self._report(port, registration, "the mcp package is not installed")
            return
        if "deferred" in listed_server(server, None).exposures(declared_exposure):
            await self._searchable(port)
        done = trio.Event()
        running = _Running(config=dict(registration.config), scope=trio.CancelScope(), done=done)
        self._running[server.name] = running

        async def section() -> None:
            await port.session.set_prompt_section(SECTION, self.section())

        def tool_set(handle: Any) -> McpToolSet:
            # Its tools follow the server's listings (list_changed) like the start-up ones.
            running.handle = handle
            running.live = McpToolSet(
                [server], handle, search=self._search, activation=_direct, resources=False
            )
            return running.live

        running.scope = await port.nursery.start(
            _serve, start_mcp, server, port.cwd, done, tool_set, port.tools, section
        )
        live = running.live
        assert live is not None
        await live.wait()
        for problem in live.problems:
            self._report(port, registration, problem)

    async def _searchable(self, port: SessionPort) -> None:
        """Make and activate ``tool_search`` for deferred tools when the session has none."""
        if self._search is None:
            self._search = ToolSearch({})
            tools = port.tools
            self._search.attach(lambda: tools)
            await port.tools.register(self._search.tool())

    async def _close(self, port: SessionPort, name: str) -> None:
        running = self._running.pop(name)
        names = () if running.live is None else running.live.registered
        running.scope.cancel()
        await running.done.wait()  # the connection and the server process are gone
        if self._search is not None:
            self._search.remove(names)
        await port.tools.unregister(names)

    async def _close_setup(self, name: str) -> None:
        """Close a server that started with the session: its MCP actor ends its connection
        and tells the start-up tool set, which withdraws its tools (from the executor and
        ``tool_search``) and its line of the prompt section; registered again (with another
        entry) it then starts as a later one."""
        del self._setup[name]
        if self._startup is not None:
            await self._startup.close(name)
        if self._startup_tools is not None:
            await self._startup_tools.wait_closed(name)
        self._started.discard(name)

    @staticmethod
    def _report(port: SessionPort, registration: RegisteredMcpServer, problem: str) -> None:
        port.runner.report(
            registration.extension_path,
            "register_mcp_server",
            f'MCP server "{registration.name}": {problem}',
        )


def _direct(_name: str, exposure: str) -> bool:
    """A late server's tools: ``direct`` ones active, the others registered inactive."""
    return exposure == "direct"


async def _serve(
    start_mcp: Any,
    server: McpServerConfig,
    cwd: str,
    done: trio.Event,
    tool_set: Callable[[Any], McpToolSet],
    executor: ToolExecutorHandle,
    section: Callable[[], Awaitable[None]],
    *,
    task_status: trio.TaskStatus[trio.CancelScope] = trio.TASK_STATUS_IGNORED,
) -> None:
    """One server's MCP actor and tool set, until its scope is cancelled (the server is
    closed with it); ``done`` is set once it has ended."""
    try:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                send, receive = trio.open_memory_channel[Any](UPDATES)
                handle = await start_mcp(nursery, [server], cwd=cwd, updates=send)
                nursery.start_soon(tool_set(handle).run, receive, executor, section)
                nursery.start_soon(handle.connect_all)
                task_status.started(scope)
    finally:
        done.set()


__all__ = ["LateMcpServers"]
