"""The object an extension's ``setup(api)`` receives (spec §7.2, without a terminal UI).

Registration (``on``, ``register_tool``, ``register_command``, ``register_flag``) works during
``setup`` and later. Calls that act on the session work once it has started (``bind``); during
``setup`` they raise :class:`ExtensionApiError`. ``send_message`` and ``send_user_message``
are fire-and-forget, as in pi: they return at once and a failure is reported as an
``extension_error`` of ``<runtime>``; this also means a handler can call them without waiting
on the run it is part of.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors.mcp.config import parse_file
from pitrio.actors.mcp.naming import mcp_namespace
from pitrio.actors.session.extensions.asks import ExtensionApiError as ExtensionApiError
from pitrio.actors.session.extensions.registry import (
    EVENT_NAMES,
    Command,
    CommandHandler,
    Extension,
    Flag,
    Handler,
)
from pitrio.actors.session.extensions.virtual_models import (
    ExtensionVirtualModel,
    SessionVirtualModels,
    VirtualModelError,
)
from pitrio.actors.tool_executor import AgentTool, NestedCall, current_call
from pitrio.errors import PitrioError
from pitrio.messages.agent import CustomMessage, now_ms
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.ostext import check_os_text, check_os_texts

if TYPE_CHECKING:
    from pitrio.actors.model_router import ModelRouterHandle
    from pitrio.actors.session.extensions.events import RegisteredMcpServer
    from pitrio.actors.session.extensions.late_mcp import LateMcpServers
    from pitrio.actors.session.extensions.runner import ExtensionRunner
    from pitrio.actors.session.handle import SessionHandle
    from pitrio.actors.tool_executor import ToolExecutorHandle

DeliverAs = Literal["steer", "followUp", "nextTurn"]


@attrs.frozen(kw_only=True)
class ExecResult:
    """The outcome of :meth:`ExtensionAPI.exec`."""

    stdout: str
    stderr: str
    code: int
    killed: bool


@attrs.define
class SessionPort:
    """What the API reaches once the session runs: its handles and a nursery for the
    fire-and-forget calls."""

    session: SessionHandle
    tools: ToolExecutorHandle
    runner: ExtensionRunner
    nursery: trio.Nursery
    cwd: str
    router: ModelRouterHandle
    notify: Callable[[str, Any], None] | None = None
    """Queues a notification for the extensions' handlers, in order (the session's)."""


class EventBus:
    """A small publish/subscribe bus shared by the extensions of one session."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Callable[[Any], Any]]] = {}

    def on(self, channel: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``handler(data)`` for every :meth:`emit` on ``channel``; returns an
        unsubscribe function."""
        self._handlers.setdefault(channel, []).append(handler)

        def unsubscribe() -> None:
            handlers = self._handlers.get(channel, [])
            if handler in handlers:
                handlers.remove(handler)

        return unsubscribe

    def emit(self, channel: str, data: Any = None) -> None:
        """Deliver ``data`` to ``channel``'s handlers, in subscription order."""
        for handler in list(self._handlers.get(channel, [])):
            handler(data)


class _Registration:
    """One ``on()`` registration: calls its handler (identity marks the registration)."""

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    def __call__(self, *args: Any) -> Any:
        return self.handler(*args)


class ExtensionAPI:
    """``api`` of one extension."""

    def __init__(self, extension: Extension, bus: EventBus, holder: PortHolder) -> None:
        self._extension = extension
        self.events = bus
        self._holder = holder

    @property
    def path(self) -> str:
        """The extension's path."""
        return self._extension.path

    @property
    def cwd(self) -> str:
        """The session's working directory."""
        return self._holder.cwd

    # -- registration -----------------------------------------------------------------------

    def on(self, event: str, handler: Handler) -> Callable[[], None]:
        """Handle ``event`` (spec §7.3) with ``handler(event, ctx)``; returns a function that
        removes this registration only (pi 1.6.0). A dispatch already in progress is not
        affected either way: the runner walks a copy of the handler list."""
        if event not in EVENT_NAMES:
            raise ExtensionApiError(f"Unknown extension event: {event!r}")
        # A registration is a one-element holder, so removing it takes this registration out
        # even when the same function was registered twice.
        registration = _Registration(handler)
        self._extension.handlers.setdefault(event, []).append(registration)

        def unsubscribe() -> None:
            handlers = self._extension.handlers.get(event, [])
            for index, item in enumerate(handlers):
                if item is registration:
                    # A new list, not an in-place removal: a reader iterating the old one
                    # (a dispatch in progress) keeps what it started with.
                    self._extension.handlers[event] = handlers[:index] + handlers[index + 1 :]
                    return

        return unsubscribe

    def register_tool(self, tool: AgentTool) -> None:
        """Add a tool (a built-in of the same name is replaced); after start-up it is
        registered and activated at once."""
        self._extension.tools.append(tool)
        port = self._holder.port
        if port is not None:
            port.nursery.start_soon(self._register_late, port, tool)

    async def _register_late(self, port: SessionPort, tool: AgentTool) -> None:
        try:
            await port.tools.register(tool)
        except PitrioError as exc:
            port.runner.report(self.path, "register_tool", exc)

    async def execute_tool(self, name: str, args: dict[str, Any] | None = None) -> NestedCall:
        """pi 1.6.0's ``ctx.executeTool``, from a tool's body: run another tool the session's
        tools may call (active ``direct`` ones, every ``codemode`` / ``deferred`` one) as a
        call nested in the running one: id ``<calling id>/<n>``, the same validation and
        ``tool_call`` / ``tool_result`` hooks, events with ``parentToolCallId``, recorded in
        the calling result's ``nestedCalls``. Failures come back as ``is_error``; outside a
        tool's body it raises :class:`ExtensionApiError`."""
        call = current_call()
        if call is None:
            raise ExtensionApiError("execute_tool() works only inside a tool's execution")
        return await call.execute_tool(name, args)

    def register_command(
        self, name: str, handler: CommandHandler, *, description: str | None = None
    ) -> None:
        """A slash command ``/name args``: ``handler(args, ctx)`` runs instead of a prompt."""
        name = name.lstrip("/")
        if not name or any(char.isspace() for char in name):
            raise ExtensionApiError(f"Invalid command name: {name!r}")
        self._extension.commands.append(
            Command(name=name, description=description, handler=handler, extension=self._extension)
        )

    def register_flag(
        self,
        name: str,
        *,
        type: Literal["boolean", "string"] = "boolean",
        default: Any = None,
        description: str | None = None,
    ) -> None:
        """Declare ``--name``; only this extension can read its value."""
        self._extension.flags[name] = Flag(
            name=name, description=description, type=type, default=default
        )

    def get_flag(self, name: str) -> Any:
        """The value of a flag this extension declared (its default when not given)."""
        flag = self._extension.flags.get(name)
        if flag is None:
            return None
        return self._extension.flag_values.get(name, flag.default)

    def register_provider(self, name: str, config: dict[str, Any]) -> None:
        """Add a provider with its models, ``config`` being a ``models.json`` provider block
        (``baseUrl``, ``api``, ``apiKey``, ``models``, ...). Called during ``setup`` it takes
        effect before the session picks its model; later, at once (an invalid block is then an
        ``extension_error``). The router is the process's: every session sees the provider."""
        port = self._holder.port
        if port is None:
            self._holder.pending_providers.append((name, dict(config), self.path))
            return

        async def register() -> None:
            try:
                await port.router.register_provider(name, dict(config), source=self.path)
            except PitrioError as exc:
                port.runner.report(self.path, "register_provider", exc)

        port.nursery.start_soon(register)

    async def unregister_provider(self, name: str) -> None:
        """Remove a provider's models."""
        await self._port("unregister_provider").router.unregister_provider(name)

    # -- the running session ------------------------------------------------------------------

    def _port(self, what: str) -> SessionPort:
        port = self._holder.port
        if port is None:
            raise ExtensionApiError(f"{what} is not available before the session has started")
        return port

    def send_message(
        self,
        custom_type: str,
        content: str | Sequence[TextContent | ImageContent],
        *,
        display: bool = True,
        details: Any = None,
        trigger_turn: bool = False,
        deliver_as: DeliverAs | None = None,
    ) -> None:
        """Send a custom message (it reaches the model as a user message): queued while a
        run streams, held for the next turn, starting a run, or just recorded (spec §3.5)."""
        port = self._port("send_message")
        message = CustomMessage(
            custom_type=custom_type,
            content=content if isinstance(content, str) else tuple(content),
            display=display,
            details=details,
            timestamp=now_ms(),
        )

        async def send() -> None:
            try:
                await port.session.send_custom_message(
                    message, trigger_turn=trigger_turn, deliver_as=deliver_as
                )
            except PitrioError as exc:
                port.runner.report("<runtime>", "send_message", exc)

        port.nursery.start_soon(send)

    def send_user_message(
        self,
        content: str | Sequence[TextContent | ImageContent],
        *,
        deliver_as: Literal["steer", "followUp"] | None = None,
    ) -> None:
        """Send a user message as a prompt (no command dispatch, no template expansion)."""
        port = self._port("send_user_message")
        images: tuple[ImageContent, ...] = ()
        if isinstance(content, str):
            text = content
        else:
            text = "\n".join(part.text for part in content if isinstance(part, TextContent))
            images = tuple(part for part in content if isinstance(part, ImageContent))

        async def send() -> None:
            try:
                await port.session.submit(
                    text,
                    images=images,
                    streaming_behavior=deliver_as,
                    expand=False,
                    source="extension",
                )
            except PitrioError as exc:
                port.runner.report("<runtime>", "send_user_message", exc)

        port.nursery.start_soon(send)

    async def append_entry(self, custom_type: str, data: Any = None) -> str:
        """Record a ``custom`` entry (extension state; never sent to the model); its id."""
        session = self._port("append_entry").session
        return await session.invoke(lambda actor: actor.append_custom_entry(custom_type, data))

    async def set_session_name(self, name: str) -> str:
        """Name the session."""
        return await self._port("set_session_name").session.set_session_name(name)

    async def get_session_name(self) -> str | None:
        """The session's name."""
        return (await self._port("get_session_name").session.state()).session_name

    async def set_label(self, entry_id: str, label: str | None) -> None:
        """Set (or clear, with ``None``) an entry's label."""
        session = self._port("set_label").session
        await session.invoke(lambda actor: actor.set_label(entry_id, label))

    async def exec(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        cwd: str | None = None,
        time_limit: float | None = None,
    ) -> ExecResult:
        """Run a program (no shell) and collect its output; killed after ``time_limit`` s."""
        port = self._port("exec")
        # An extension passes on what a user or model typed: refused with the field named.
        check_os_text(command, "exec command")
        check_os_texts(args, "exec argument")
        if cwd is not None:
            check_os_text(cwd, "exec cwd", from_os=True)  # often the session's, OS-named
        killed = False
        with trio.move_on_after(time_limit if time_limit is not None else float("inf")) as scope:
            done = await trio.run_process(
                [command, *args],
                cwd=cwd or port.cwd,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                env=dict(os.environ),
            )
        if scope.cancelled_caught:
            killed = True
            return ExecResult(stdout="", stderr="", code=-1, killed=killed)
        return ExecResult(
            stdout=done.stdout.decode("utf-8", "replace"),
            stderr=done.stderr.decode("utf-8", "replace"),
            code=done.returncode,
            killed=killed,
        )

    async def get_active_tools(self) -> list[str]:
        """Names of the tools the model may call."""
        return [tool.name for tool in await self._port("get_active_tools").tools.active_tools()]

    async def get_callable_tools(self) -> list[str]:
        """Names of the tools :meth:`execute_tool` and codemode scripts may call (pi 1.6.0's
        ``getCallableToolNames``): the active ``direct`` ones and every ``codemode`` or
        ``deferred`` one."""
        tools = await self._port("get_callable_tools").tools.callable_tools()
        return [tool.name for tool in tools if tool.exposure != "model-only"]

    async def get_all_tools(self) -> list[AgentTool]:
        """Every registered tool."""
        return list(await self._port("get_all_tools").tools.all_tools())

    async def set_active_tools(self, names: Sequence[str]) -> None:
        """Choose the tools the model may call (from the next request on)."""
        await self._port("set_active_tools").tools.set_active(names)

    async def get_commands(self) -> list[dict[str, Any]]:
        """Extension commands, then prompt templates, then skills (``get_commands``)."""
        return await self._port("get_commands").session.commands()

    async def set_model(self, provider: str, model_id: str) -> bool:
        """Switch model; ``False`` when it is not available."""
        try:
            await self._port("set_model").session.set_model(provider, model_id)
        except ExtensionApiError:
            raise
        except PitrioError:
            return False
        return True

    async def get_thinking_level(self) -> str:
        """The thinking level in effect."""
        return (await self._port("get_thinking_level").session.state()).agent.thinking_level

    async def set_thinking_level(self, level: str) -> str:
        """Set the thinking level (clamped to the model); the level in effect."""
        return await self._port("set_thinking_level").session.set_thinking_level(level)

    # -- virtual models (pi 1.6.0) --------------------------------------------------------------

    def register_virtual_model(self, model: ExtensionVirtualModel) -> None:
        """Add a virtual model to this session: selectable like any model (``set_model``,
        ``get_available_models``), each request of it routed by ``model.route(request, ctx)``
        to a physical model first. Registering the same ``provider/id`` again replaces it;
        one another extension registered raises :class:`ExtensionApiError`. Only this session
        sees it (see DESIGN-NOTES "Extension virtual models")."""
        try:
            self._holder.virtual_models.register(model, self.path)
        except VirtualModelError as exc:
            raise ExtensionApiError(str(exc)) from None

    def unregister_virtual_model(self, provider: str, model_id: str) -> None:
        """Remove a virtual model this extension registered."""
        self._holder.virtual_models.unregister(provider, model_id, self.path)

    # -- MCP servers (pi 1.6.0) -----------------------------------------------------------------

    def register_mcp_server(self, name: str, config: dict[str, Any]) -> None:
        """Add an MCP server (``config``: an ``mcpServers`` entry of ``mcp.json``) for this
        session; registering the name again replaces this extension's entry. During ``setup``
        it starts with the session, beside the ``mcp.json`` servers (a server there of the same
        name wins). Raises :class:`ExtensionApiError` for an invalid entry or a name another
        extension registered (or one differing only in ``-`` / ``_``)."""
        problem = mcp_entry_problem(name, config)
        if problem is not None:
            raise ExtensionApiError(
                f'Invalid MCP server registered by extension "{self.path}": {problem}'
            )
        servers = self._holder.mcp_servers
        owner = servers.get(name)
        if owner is not None and owner.extension_path != self.path:
            raise ExtensionApiError(
                f'MCP server "{name}" is already registered by extension "{owner.extension_path}"'
            )
        clash = next(
            (s for s in servers if s != name and mcp_namespace(s) == mcp_namespace(name)), None
        )
        if clash is not None:
            raise ExtensionApiError(
                f'MCP server "{name}" conflicts with registered server "{clash}"'
            )
        from pitrio.actors.session.extensions.events import RegisteredMcpServer

        registration = RegisteredMcpServer(name=name, config=dict(config), extension_path=self.path)
        servers[name] = registration
        self._mcp_changed()

    def unregister_mcp_server(self, name: str) -> None:
        """Remove an MCP server this extension registered (others' are left alone)."""
        server = self._holder.mcp_servers.get(name)
        if server is not None and server.extension_path == self.path:
            del self._holder.mcp_servers[name]
            self._mcp_changed()

    def get_mcp_servers(self) -> list[RegisteredMcpServer]:
        """Every MCP server the session's extensions registered, in registration order."""
        return list(self._holder.mcp_servers.values())

    def _mcp_changed(self) -> None:
        """After start-up: ``mcp_servers_change`` for the extensions that handle it, and the
        built-in MCP support connects or closes the servers; with that support off
        (``--no-mcp``) and no handler, each server registered now is reported."""
        port = self._holder.port
        if port is None:
            return
        from pitrio.actors.session.extensions.events import McpServersChangeEvent

        event = McpServersChangeEvent(servers=tuple(self._holder.mcp_servers.values()))
        handled = port.runner.has("mcp_servers_change")
        if handled:
            if port.notify is not None:
                port.notify("mcp_servers_change", event)
            else:
                port.nursery.start_soon(port.runner.notify, "mcp_servers_change", event)
        late = self._holder.late_mcp
        if late is not None:  # the built-in MCP support connects them (pi 1.6.0)
            port.nursery.start_soon(late.sync, port, self._holder.mcp_servers)
            return
        if handled:
            return
        for server in event.servers:
            if server.name not in self._holder.mcp_reported:
                self._holder.mcp_reported.add(server.name)
                port.runner.report(
                    server.extension_path,
                    "register_mcp_server",
                    f'MCP server "{server.name}" is registered after start-up, but no loaded '
                    "extension connects MCP servers (pitrio connects those registered while "
                    "extensions load)",
                )


def mcp_entry_problem(name: str, config: Any) -> str | None:
    """Why ``config`` is not a valid ``mcpServers`` entry named ``name`` (``None``: valid)."""
    checked = parse_file({"mcpServers": {name: config}}, "the extension")
    if checked.problems:
        return checked.problems[0].removeprefix("the extension: ")
    return None


@attrs.define
class PortHolder:
    """Where the session's port appears once the session runs (shared by every extension's
    API object of one session)."""

    port: SessionPort | None = None
    cwd: str = ""
    pending_providers: list[tuple[str, dict[str, Any], str]] = attrs.field(factory=list)
    """``register_provider`` calls made during ``setup``: registered before the session
    resolves its model."""
    mcp_servers: dict[str, RegisteredMcpServer] = attrs.field(factory=dict)
    """MCP servers the extensions registered, in registration order (those registered during
    ``setup`` start with the session's ``mcp.json`` servers)."""
    mcp_reported: set[str] = attrs.field(factory=set)
    """Servers registered after start-up already reported as not connected."""
    late_mcp: LateMcpServers | None = None
    virtual_models: SessionVirtualModels = attrs.field(factory=SessionVirtualModels)
    """The virtual models the session's extensions registered (this session's only)."""
    """What connects servers registered after start-up (``None``: the session's MCP support
    is off, ``--no-mcp``)."""

    def mcp_config(self) -> dict[str, Any] | None:
        """The registered servers as an ``mcp.json`` object (``None``: none)."""
        if not self.mcp_servers:
            return None
        return {"mcpServers": {name: dict(s.config) for name, s in self.mcp_servers.items()}}
