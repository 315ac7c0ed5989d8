"""The ACP methods pitrio serves: each reads its params (``-32602`` when they are wrong),
acts on the sessions of :class:`~pitrio.transports.acp.agent.AcpServer`, and returns its
result (and, where ACP wants it after the answer, what to send next).

Session ids are pitrio's own session ids (the UUID in the session file's header), so a
``session/list`` entry, a ``session/load`` and ``pitrio --session`` name the same session.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from pitrio.transports.acp.bridge import Bridge, Config, close_bridge
from pitrio.transports.acp.jsonrpc import RESOURCE_NOT_FOUND, Request, RpcError, invalid_params
from pitrio.transports.acp.messages import (
    PROTOCOL_VERSION,
    ConfigUpdate,
    ModeUpdate,
    SelectOption,
    absolute_path,
    mcp_servers,
    params_object,
    prompt_blocks,
    string_param,
)

if TYPE_CHECKING:
    from pitrio.transports.acp.backends import Sessions


class AcpServer(Protocol):
    """What the handlers use of the shell (:class:`~pitrio.transports.acp.agent.AcpServer`):
    a protocol, so the shell imports the handlers and not the other way round."""

    sessions: dict[str, Bridge]
    session_nursery: trio.Nursery
    backend: Sessions

    def client_files(self, declared: bool) -> None:
        """Whether the client's ``fs`` methods serve the file tools."""


After = Callable[[], Awaitable[None]] | None
Result = tuple[Any, After]

PAGE_SIZE = 50
"""Sessions in one ``session/list`` page."""

STEER_META = "pitrio/streamingBehavior"
"""The ``_meta`` key of a ``session/prompt`` asking for ``"steer"`` (pitrio's own): a prompt
that arrives during a run is otherwise a follow-up."""


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("pitrio")
    except metadata.PackageNotFoundError:
        return "unknown"


def _cursor(value: str | None) -> int:
    if value is None:
        return 0
    try:
        offset = int(base64.urlsafe_b64decode(value.encode()).decode().removeprefix("o:"))
    except (ValueError, UnicodeError):
        raise invalid_params("unknown cursor") from None
    if offset < 0:
        raise invalid_params("unknown cursor")
    return offset


def _next_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"o:{offset}".encode()).decode()


class Methods:
    """The handlers, by ACP method name."""

    def __init__(self, server: AcpServer) -> None:
        self.server = server
        self._handlers: dict[str, Callable[[Any], Awaitable[Result]]] = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new,
            "session/load": self.load,
            "session/resume": self.resume,
            "session/list": self.list_sessions,
            "session/close": self.close,
            "session/prompt": self.prompt,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
        }
        self._opening = trio.Lock()
        self._held: dict[int, Bridge] = {}
        """Prompt requests read and not yet handled (by ``id`` of their params): the bridge
        each holds."""

    def handler(self, method: str) -> Callable[[Any], Awaitable[Result]] | None:
        """The handler of a request's method."""
        return self._handlers.get(method)

    async def notification(self, method: str, params: Any) -> None:
        """A notification: ``session/cancel`` (others are ignored, as JSON-RPC wants no
        answer to a notification, not even an error)."""
        if method == "session/cancel" and isinstance(params, dict):
            bridge = self.server.sessions.get(str(params.get("sessionId")))
            if bridge is not None:
                self.server.session_nursery.start_soon(bridge.cancel)

    # -- set-up --------------------------------------------------------------------------

    async def initialize(self, params: Any) -> Result:
        """Protocol version 1 and what pitrio can do."""
        fields = params_object(params)
        version = fields.get("protocolVersion")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise invalid_params("protocolVersion must be a non-negative integer")
        capabilities = fields.get("clientCapabilities")
        fs = capabilities.get("fs") if isinstance(capabilities, dict) else None
        both = isinstance(fs, dict) and fs.get("readTextFile") is True
        both = both and isinstance(fs, dict) and fs.get("writeTextFile") is True
        self.server.client_files(both)
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
                # streamable HTTP as pitrio's MCP client speaks it; no SSE (pi 1.6.0 refuses it)
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": [],
            "agentInfo": {"name": "pitrio", "title": "pitrio", "version": _version()},
        }, None

    async def authenticate(self, params: Any) -> Result:
        """No ACP sign-in: providers' credentials are pitrio's own (``pitrio login``,
        ``auth.json``, environment), so any method is accepted with nothing to do."""
        string_param(params_object(params), "methodId")
        return {}, None

    # -- sessions --------------------------------------------------------------------------

    def bridge(self, params: Any) -> Bridge:
        """The open session a request names (``-32002`` when none)."""
        session_id = string_param(params_object(params), "sessionId")
        bridge = self.server.sessions.get(str(session_id))
        if bridge is None or bridge.closed.is_set():
            raise RpcError(RESOURCE_NOT_FOUND, f"Session not found: {session_id}")
        return bridge

    async def _setup(self, bridge: Bridge) -> dict[str, Any]:
        config = await bridge.config()
        return {
            "modes": _modes(config),
            "configOptions": [option.to_json() for option in _config_options(config)],
        }

    async def new(self, params: Any) -> Result:
        """``session/new``: a fresh session in ``cwd``."""
        fields = params_object(params)
        cwd = absolute_path(fields, "cwd")
        bridge = await self.server.backend.create(cwd, mcp_servers(fields))
        self.server.sessions[bridge.session_id] = bridge
        result = {"sessionId": bridge.session_id, **await self._setup(bridge)}
        return result, bridge.send_commands

    async def _open(self, params: Any) -> Bridge:
        fields = params_object(params)
        session_id = string_param(fields, "sessionId")
        cwd = absolute_path(fields, "cwd")
        servers = mcp_servers(fields)
        assert session_id is not None
        async with self._opening:  # one opening of a file at a time: it has one writer
            bridge = self.server.sessions.get(session_id)
            if bridge is not None and not bridge.closed.is_set():
                return bridge
            bridge = await self.server.backend.open(session_id, cwd, servers)
            self.server.sessions[bridge.session_id] = bridge
            return bridge

    async def load(self, params: Any) -> Result:
        """``session/load``: the whole conversation replayed as updates, then the answer."""
        bridge = await self._open(params)
        await bridge.replay()
        return await self._setup(bridge), bridge.send_commands

    async def resume(self, params: Any) -> Result:
        """``session/resume``: the session opened again, nothing replayed."""
        bridge = await self._open(params)
        return await self._setup(bridge), bridge.send_commands

    async def list_sessions(self, params: Any) -> Result:
        """``session/list``: pitrio's session catalogue, newest first, in pages."""
        fields = params_object(params)
        cwd = string_param(fields, "cwd", required=False)
        offset = _cursor(string_param(fields, "cursor", required=False))
        entries = await self.server.backend.listing(cwd)
        result: dict[str, Any] = {"sessions": entries[offset : offset + PAGE_SIZE]}
        if offset + PAGE_SIZE < len(entries):
            result["nextCursor"] = _next_cursor(offset + PAGE_SIZE)
        return result, None

    async def close(self, params: Any) -> Result:
        """``session/close``: a local session's run aborted and the session ended (its file
        stays); a daemon's session only loses this client."""
        bridge = self.bridge(params)
        self.server.sessions.pop(bridge.session_id, None)
        await close_bridge(bridge)
        return {}, None

    async def close_all(self) -> None:
        """Every session ended (the client has gone)."""
        for bridge in list(self.server.sessions.values()):
            await close_bridge(bridge)
        self.server.sessions.clear()

    # -- a conversation ------------------------------------------------------------------------

    async def prompt(self, params: Any) -> Result:
        """``session/prompt``: answered with the stop reason when the run settles."""
        held = self._held.pop(id(params), None)
        try:
            bridge = self.bridge(params)
            if held is not bridge:
                if held is not None:
                    held.release()
                bridge.hold()  # the session was opened after the request was read
            held = bridge
            text, images = prompt_blocks(params)
        except RpcError:
            if held is not None:
                held.release()
            raise
        meta = params.get("_meta")
        steer = isinstance(meta, dict) and meta.get(STEER_META) == "steer"
        return {"stopReason": await bridge.prompt(text, images, steer=steer)}, None

    def read(self, request: Request) -> None:
        """Called as each request is read, in order: a prompt holds its session's bridge, so a
        ``session/cancel`` read after it cannot overtake it (:meth:`Bridge.hold`)."""
        if request.method != "session/prompt" or not isinstance(request.params, dict):
            return
        bridge = self.server.sessions.get(str(request.params.get("sessionId")))
        if bridge is not None and not bridge.closed.is_set():
            bridge.hold()
            self._held[id(request.params)] = bridge

    async def set_config_option(self, params: Any) -> Result:
        """``session/set_config_option``: ``model`` (``provider/id``) or ``thinking`` (a level
        the model offers); answered with every option, then ``current_mode_update``."""
        bridge = self.bridge(params)
        config_id = string_param(params, "configId")
        value = params.get("value")
        if not isinstance(value, str):
            raise invalid_params("value must be a string")
        if config_id == "model":
            if value not in (choice for choice, _ in (await bridge.config()).models):
                raise invalid_params(f"unknown model {value!r}")
            await bridge.set_model(value)
        elif config_id == "thinking":
            if value not in (await bridge.config()).levels:
                raise invalid_params(f"the model offers no thinking level {value!r}")
            await bridge.set_thinking(value)
        else:
            raise invalid_params(f"unknown config option {config_id!r}")
        config = await bridge.config()

        async def after() -> None:
            await bridge.notify(ModeUpdate(config.level))

        return {"configOptions": [option.to_json() for option in _config_options(config)]}, after

    async def set_mode(self, params: Any) -> Result:
        """``session/set_mode``: the modes are the thinking levels the model offers; answered,
        then ``config_option_update``."""
        bridge = self.bridge(params)
        mode = string_param(params, "modeId")
        assert mode is not None
        if mode not in (await bridge.config()).levels:
            raise invalid_params(f"unknown mode {mode!r}")
        await bridge.set_thinking(mode)
        config = await bridge.config()

        async def after() -> None:
            await bridge.notify(ConfigUpdate(tuple(_config_options(config))))

        return {}, after


def _config_options(config: Config) -> list[SelectOption]:
    """The ``model`` and ``thinking`` options."""
    return [
        SelectOption("model", "Model", config.model, config.models, "model"),
        SelectOption(
            "thinking",
            "Thinking",
            config.level,
            tuple((name, name) for name in config.levels),
            "thought_level",
        ),
    ]


def _modes(config: Config) -> dict[str, Any]:
    """ACP's modes: the thinking levels."""
    return {
        "currentModeId": config.level,
        "availableModes": [
            {"id": name, "name": f"Thinking: {name}", "description": f"thinking level {name}"}
            for name in config.levels
        ],
    }
