"""The MCP actor: one session's MCP servers, each started and owned by a task of the actor.

Beside the tool executor in the session's nursery. For each configured server the actor keeps
a slot (status, tool listing, last error, the live connection); only the actor's own tasks
touch it. A server is started on first demand (:meth:`McpHandle.connect`; the session's
start asks for all of them at once) by a connection task that spawns it (or opens its HTTP
session), runs the MCP handshake and lists its tools within the server's start-up limit, then
holds the connection until the server goes away or the actor ends.

Tool calls do not pass through the inbox: a handle gets the live ``ClientSession`` and calls
the tool in the caller's task (the tool batch's), so abort is plain trio cancellation of that
task, which the SDK turns into ``notifications/cancelled`` for the server.

Each listing of a server's tools is sent on the actor's ``updates`` channel (when given): at
connect, and again after the server announces ``notifications/tools/list_changed`` (pi 1.6.0
lists the tools again then); a failed start is sent too. The session's MCP tool set
(:mod:`.live`) registers what they say.

A server that closes its output (it exited or crashed) is marked ``exited`` before any call
waiting on it fails, so the failure can name the server and what it printed on stderr; the
next :meth:`McpHandle.connect` starts it again. The statuses are published for ``get_state``
without a round trip (:mod:`pitrio.actors.latest`).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext, suppress
from typing import IO, Any

import anyio
import attrs
import mcp_types
import trio
from mcp import ClientSession
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from pitrio.actors._actor import Actor, Address, Handle, Reply
from pitrio.actors.latest import Latest, LatestReader
from pitrio.actors.mcp.config import McpServerConfig, expand_home
from pitrio.actors.mcp.oauth import (
    auth_provider,
    connection_auth,
    provider_auth,
    sign_in_required,
    uses_oauth,
)
from pitrio.actors.mcp.state import McpServerError, McpServerState, ServerStatus
from pitrio.actors.mcp.values import resolve_values
from pitrio.errors import PitrioError, unwrap_group
from pitrio.messages.ostext import check_environment, check_os_text, check_os_texts

CLIENT_INFO = mcp_types.Implementation(name="pitrio", version="0.1.0")
STDERR_TAIL = 400
"""Characters of a failed server's stderr quoted in its error."""
MAX_TOOL_PAGES = 100


@attrs.frozen(eq=False)
class Connection:
    """A live server: its client session and the tools it listed."""

    server: str
    session: ClientSession
    tools: tuple[mcp_types.Tool, ...]
    generation: int
    instructions: str | None = None
    """What the server said of itself when it connected (the prompt's server summary)."""
    has_resources: bool = False
    """Whether it offers resources (the resource tools reach it)."""


@attrs.frozen
class Connect:
    """Answer with the live connection of ``name``, starting the server if it is not up."""

    name: str
    reply: Reply[Connection]


@attrs.frozen
class Lost:
    """A caller found ``connection`` broken (an HTTP server gone, a transport error): drop
    it, so the next connect starts the server again."""

    connection: Connection
    error: str


@attrs.frozen
class Close:
    """Close server ``name`` for good (an extension unregistered it): its connection ends,
    its process with it, and it is no longer configured; answered once that is done."""

    name: str
    reply: Reply[None]


McpCommand = Connect | Lost | Close


@attrs.frozen(eq=False)
class ServerUpdate:
    """What the actor tells the session's tool set: ``name`` connected (or listed its tools
    anew) with ``connection``, could not be started (``error``), or was closed (``closed``)."""

    name: str
    connection: Connection | None = None
    error: str | None = None
    closed: bool = False
    """The server was closed for good (:class:`Close`): its tools and line go."""


@attrs.define
class _Slot:
    """One server's state, touched only by the actor's tasks."""

    config: McpServerConfig
    status: ServerStatus = "stopped"
    tools: tuple[mcp_types.Tool, ...] = ()
    error: str | None = None
    connection: Connection | None = None
    generation: int = 0
    waiters: list[Reply[Connection]] = attrs.field(factory=list)
    ended: trio.Event = attrs.field(factory=trio.Event)
    """Set to end the live connection (its task then closes it)."""
    serving: bool = False
    """A connection task of this server is running."""
    closers: list[Reply[None]] = attrs.field(factory=list)
    """:class:`Close` requests answered when that task ends."""


def _errlog(config: McpServerConfig) -> AbstractContextManager[IO[bytes] | None]:
    """Where a stdio server's stderr goes: a temporary file, quoted when the server fails."""
    if config.transport != "stdio":
        return nullcontext()
    return tempfile.TemporaryFile()


def describe(exc: BaseException) -> str:
    """An exception as one short line (the leaf of a group; its class when it says nothing)."""
    leaf = unwrap_group(exc)
    if isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    text = str(leaf).strip()
    if isinstance(leaf, OSError) and leaf.strerror:
        text = f"{leaf.strerror}: {leaf.filename}" if leaf.filename else leaf.strerror
    return text or type(leaf).__name__


def stderr_tail(errlog: IO[bytes] | None) -> str:
    """The end of what a server wrote on stderr, as `` (stderr: ...)`` or nothing."""
    if errlog is None or errlog.closed:
        return ""
    try:
        errlog.seek(0, 2)
        size = errlog.tell()
        errlog.seek(max(0, size - 4 * STDERR_TAIL))
        text = errlog.read().decode("utf-8", "replace").strip()
    except OSError:
        return ""
    if not text:
        return ""
    return f" (stderr: {text[-STDERR_TAIL:]})"


@asynccontextmanager
async def open_transport(
    config: McpServerConfig, cwd: str, errlog: IO[bytes] | None, auth: Any = None
) -> AsyncIterator[TransportStreams]:
    """The server's message streams: a spawned stdio process or a streamable-HTTP session.

    ``auth`` (an ``httpx2.Auth``) overrides the OAuth of a server that uses it (sign-in)."""
    what = f'MCP server "{config.name}"'
    if config.transport == "stdio":
        from mcp import StdioServerParameters, stdio_client

        if config.literal:  # a client's plain values
            command, args, env = config.command, list(config.args), dict(config.env)
        else:
            command = expand_home(config.command)
            args = [expand_home(arg) for arg in config.args]
            env = await resolve_values(config.env, f"{what} env")
        # Refused here with the field named, not deep in the SDK's spawn.
        check_os_texts([command, *args], f"MCP server {config.name} argument")
        check_environment(env, f"MCP server {config.name} environment")
        if config.cwd:
            check_os_text(config.cwd, f"MCP server {config.name} cwd")
        params = StdioServerParameters(
            command=command,
            args=args,
            env=env or None,
            cwd=os.path.join(cwd, expand_home(config.cwd or ".")),
        )
        # The SDK passes errlog to the subprocess as its stderr: it needs a real file.
        async with stdio_client(params, errlog=errlog) as streams:  # type: ignore[arg-type]
            yield streams
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        if config.literal:
            headers = dict(config.headers)
        else:
            headers = await resolve_values(config.headers, f"{what} header")
        provider = auth_provider(config)
        if auth is None and provider is not None:
            auth = provider_auth(config, provider)
        elif auth is None and uses_oauth(config):
            auth = connection_auth(config)
        async with (
            create_mcp_http_client(headers=headers, auth=auth) as client,
            streamable_http_client(config.url, http_client=client) as streams,
        ):
            yield streams


async def list_all_tools(session: ClientSession) -> tuple[mcp_types.Tool, ...]:
    """Every tool the server lists, following its pages."""
    listing = await session.list_tools()
    tools = list(listing.tools)
    cursor = listing.next_cursor
    for _ in range(MAX_TOOL_PAGES):
        if not cursor:
            break
        listing = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))
        tools.extend(listing.tools)
        cursor = listing.next_cursor
    return tuple(tools)


class McpActor(Actor[McpCommand]):
    """Owns one session's MCP servers: their processes or HTTP sessions, states and errors."""

    def __init__(
        self,
        servers: Sequence[McpServerConfig],
        *,
        cwd: str,
        capacity: int = 32,
        updates: trio.MemorySendChannel[ServerUpdate] | None = None,
    ):
        super().__init__(name="mcp", capacity=capacity)
        self._cwd = cwd
        self._updates = updates
        self._slots = {server.name: _Slot(server) for server in servers}
        self._view = Latest(self._states())
        self.address.published = self._view.reader()

    def _states(self) -> tuple[McpServerState, ...]:
        return tuple(
            McpServerState(
                name=slot.config.name,
                status=slot.status,
                tools=tuple(tool.name for tool in slot.tools),
                error=slot.error,
            )
            for slot in self._slots.values()
        )

    def _publish(self) -> None:
        self._view.publish(self._states())

    async def handle(self, command: McpCommand) -> None:
        """A connect is answered at once when the server is up, else once it is (or failed);
        a lost connection of the current generation marks the server exited and ends it."""
        match command:
            case Connect(name=name, reply=reply):
                slot = self._slots.get(name)
                if slot is None:
                    reply.fail(McpServerError(f"MCP server {name} is not configured"))
                elif slot.status == "running" and slot.connection is not None:
                    reply.set(slot.connection)
                else:
                    slot.waiters.append(reply)
                    if slot.status != "starting":
                        slot.status = "starting"
                        slot.generation += 1
                        self._publish()
                        slot.ended = trio.Event()
                        slot.serving = True
                        self.nursery.start_soon(self._serve, slot, slot.generation)
            case Lost(connection=connection, error=error):
                slot = self._slots.get(connection.server)
                if slot is not None and slot.generation == connection.generation:
                    if slot.status == "running":
                        slot.status, slot.connection, slot.error = "exited", None, error
                        self._publish()
                    slot.ended.set()
            case Close(name=name, reply=reply):
                slot = self._slots.pop(name, None)
                if slot is None or not slot.serving:
                    reply.set(None)
                else:
                    slot.closers.append(reply)
                    slot.ended.set()
                if slot is not None:
                    self._publish()
                    await self._tell(ServerUpdate(name, closed=True))
                    waiters, slot.waiters = slot.waiters, []
                    for waiter in waiters:
                        waiter.fail(McpServerError(f"MCP server {name} was closed"))

    # -- the connection task (one per start of a server) -------------------------------------

    async def _serve(self, slot: _Slot, generation: int) -> None:
        config = slot.config
        try:
            with _errlog(config) as errlog:
                started, failure = await self._connection(slot, generation, errlog)
                tail = stderr_tail(errlog)
        finally:
            slot.serving = False
            closers, slot.closers = slot.closers, []
            for reply in closers:
                reply.set(None)
        if not started:
            error = f"MCP server {config.name} failed to start: {failure}{tail}"
            if failure == str(sign_in_required(config.name, provider=auth_provider(config))):
                error = failure  # the whole message, saying what to do
            if self._failed(slot, generation, error):
                await self._tell(ServerUpdate(config.name, error=error))
        else:
            self._exited(slot, generation, tail)

    async def _connection(
        self, slot: _Slot, generation: int, errlog: IO[bytes] | None
    ) -> tuple[bool, str]:
        """Start the server, publish it running, hold it until it ends; (started, why not)."""
        config = slot.config
        ended = slot.ended
        started = False
        try:
            deadline = trio.current_time() + config.startup_timeout
            with trio.CancelScope(deadline=deadline) as start_scope:
                async with open_transport(config, self._cwd, errlog) as (read, write):
                    # Messages pass through a relay so that the end of the server's output
                    # is seen here first: the slot says "exited" before any call fails.
                    relay_send, relay_recv = anyio.create_memory_object_stream[
                        SessionMessage | Exception
                    ](0)
                    # A tool-list change only wakes the refresher (the handler runs in the
                    # session's reader, which a request made there would deadlock); one
                    # pending wake-up covers any number of announcements.
                    changed_send, changed_recv = trio.open_memory_channel[None](1)

                    async def on_message(message: object) -> None:
                        await trio.lowlevel.checkpoint()
                        if isinstance(message, mcp_types.ToolListChangedNotification):
                            with suppress(trio.WouldBlock, trio.ClosedResourceError):
                                changed_send.send_nowait(None)

                    async with trio.open_nursery() as inner:
                        inner.start_soon(
                            self._relay, slot, generation, read, relay_send, ended, errlog
                        )
                        async with ClientSession(
                            relay_recv, write, client_info=CLIENT_INFO, message_handler=on_message
                        ) as s:
                            hello = await s.initialize()
                            tools = await list_all_tools(s)
                            start_scope.deadline = math.inf
                            started = True
                            live = Connection(
                                config.name,
                                s,
                                tools,
                                generation,
                                instructions=hello.instructions,
                                has_resources=hello.capabilities.resources is not None,
                            )
                            self._running(slot, generation, live)
                            await self._tell(ServerUpdate(config.name, live))
                            inner.start_soon(self._refresh, slot, live, changed_recv)
                            await ended.wait()
                        inner.cancel_scope.cancel()
        except Exception as exc:
            return started, describe(exc)
        if start_scope.cancelled_caught and not started:
            return False, f"it did not start within {config.startup_timeout:g} s"
        return started, "it closed the connection before it was ready"

    async def _relay(
        self,
        slot: _Slot,
        generation: int,
        read: Any,
        send: anyio.abc.ObjectSendStream[SessionMessage | Exception],
        ended: trio.Event,
        errlog: IO[bytes] | None,
    ) -> None:
        try:
            async with send:
                async for message in read:
                    await send.send(message)
                # The server's output ended: mark it before the session sees the end.
                if slot.status == "running":
                    self._exited(slot, generation, stderr_tail(errlog))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the session closed first (the actor is ending)
        finally:
            ended.set()

    async def _refresh(
        self, slot: _Slot, live: Connection, changed: trio.MemoryReceiveChannel[None]
    ) -> None:
        """List the tools again after each ``notifications/tools/list_changed`` (pi 1.6.0's
        ``refreshTools``): a failed listing keeps the old tools and says why in the error."""
        async for _ in changed:
            try:
                tools = await list_all_tools(live.session)
            except Exception as exc:
                if slot.generation == live.generation and slot.status == "running":
                    slot.error = f"Failed to refresh tools: {describe(exc)}"
                    self._publish()
                continue
            if slot.generation != live.generation or slot.status != "running":
                return
            live = attrs.evolve(live, tools=tools)
            slot.tools, slot.connection, slot.error = tools, live, None
            self._publish()
            await self._tell(ServerUpdate(live.server, live))

    async def _tell(self, update: ServerUpdate) -> None:
        """Send ``update`` to the session's tool set (waiting while it is busy: only this
        server's connection task waits); nothing when nobody listens."""
        if self._updates is not None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._updates.send(update)

    def _running(self, slot: _Slot, generation: int, connection: Connection) -> None:
        if slot.generation != generation:
            return
        slot.status, slot.tools, slot.error = "running", connection.tools, None
        slot.connection = connection
        self._publish()
        waiters, slot.waiters = slot.waiters, []
        for reply in waiters:
            reply.set(connection)

    def _failed(self, slot: _Slot, generation: int, error: str) -> bool:
        if slot.generation != generation:
            return False
        slot.status, slot.error, slot.connection = "failed", error, None
        self._publish()
        waiters, slot.waiters = slot.waiters, []
        signing = sign_in_required(slot.config.name, provider=auth_provider(slot.config))
        for reply in waiters:
            reply.fail(signing if error == str(signing) else McpServerError(error))
        return True

    def _exited(self, slot: _Slot, generation: int, tail: str) -> None:
        if slot.generation != generation or slot.status != "running":
            return
        slot.status, slot.connection = "exited", None
        slot.error = f"MCP server {slot.config.name} exited{tail}"
        self._publish()


class McpHandle(Handle[McpCommand]):
    """Typed access to an :class:`McpActor`."""

    async def connect(self, name: str) -> Connection:
        """The live connection of server ``name``, started if it is not up.

        Raises :class:`McpServerError` (naming the server) when it cannot be started.
        """
        try:
            return await self.ask(lambda reply: Connect(name, reply))
        except McpServerError:
            raise
        except PitrioError as exc:  # the actor stopped: the session is ending
            raise McpServerError(f"MCP server {name}: {exc}") from None

    async def connect_all(self) -> dict[str, Connection | McpServerError]:
        """Start every configured server at once; each one's connection or error."""
        results: dict[str, Connection | McpServerError] = {}

        async def one(name: str) -> None:
            try:
                results[name] = await self.connect(name)
            except McpServerError as exc:
                results[name] = exc

        async with trio.open_nursery() as nursery:
            for state in self.servers():
                nursery.start_soon(one, state.name)
        return results

    async def lost(self, connection: Connection, error: str) -> None:
        """Report ``connection`` broken: the server shows ``exited`` with ``error`` and is
        started again on next use."""
        with suppress(PitrioError):  # the actor is gone: nothing to restart
            await self.tell(Lost(connection, error))

    async def close(self, name: str) -> None:
        """Close server ``name`` for good and wait until its connection (and process) ended."""
        with suppress(PitrioError):  # the actor is gone: so is the server
            await self.ask(lambda reply: Close(name, reply))

    def servers(self) -> tuple[McpServerState, ...]:
        """Each server's state (the actor's latest snapshot: no round trip)."""
        reader: LatestReader[tuple[McpServerState, ...]] = self._address.published
        return reader.get()

    def state_of(self, name: str) -> McpServerState | None:
        """One server's state."""
        for state in self.servers():
            if state.name == name:
                return state
        return None


async def start_mcp(
    nursery: trio.Nursery,
    servers: Sequence[McpServerConfig],
    *,
    cwd: str,
    updates: trio.MemorySendChannel[ServerUpdate] | None = None,
) -> McpHandle:
    """Start an :class:`McpActor` in ``nursery`` (no server is started yet); ``updates``
    receives each listing of a server's tools and each failed start."""
    actor = McpActor(servers, cwd=cwd, updates=updates)
    address: Address[McpCommand] = await nursery.start(actor.run)
    return McpHandle(address)
