"""Where an ACP agent's sessions live: in this process (:class:`LocalSessions`, the default)
or in a running ``pitrio serve`` (:class:`DaemonSessions`, ``pitrio acp --connect URL``).

Either gives :class:`~pitrio.transports.acp.bridge.Bridge` objects speaking the same RPC
commands and events: an in-process RPC server's pipes, or the daemon's session websocket
(whose frames are the same lines with a ``seq``). Closing an ACP session ends a local session,
but only this client's connection to a daemon's: the daemon's session, its other clients and
its run go on.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError, open_websocket_url

from pitrio.errors import collapse_groups
from pitrio.sdk.store import SessionInfo, list_all_sessions, list_sessions, session_dir
from pitrio.sdk.tools import delegated_file_tools
from pitrio.transports.acp.bridge import Ask, Bridge, run_bridge, serve_link
from pitrio.transports.acp.jsonrpc import INTERNAL_ERROR, RESOURCE_NOT_FOUND, RpcError
from pitrio.transports.acp.messages import Update
from pitrio.transports.attach_connect import Token, refused, unreachable, ws_url
from pitrio.transports.websocket_pings import answer_pings_only_while_open

if TYPE_CHECKING:
    from pitrio.sdk.models import ModelRouterHandle
    from pitrio.sdk.session import SessionOptions

# The daemon pings its clients: a ping during this client's close must not fail the close.
answer_pings_only_while_open()

Notify = Callable[[Bridge, Update], Awaitable[None]]


McpServers = tuple[tuple[str, dict[str, Any]], ...]
"""A client's MCP servers (``mcpServers``) as ``mcp.json`` entries by name."""


class Sessions(Protocol):
    """What the methods need of a session store."""

    async def create(self, cwd: str, servers: McpServers = ()) -> Bridge:
        """A new session in ``cwd``, running, with the client's MCP servers too."""

    async def open(self, session_id: str, cwd: str, servers: McpServers = ()) -> Bridge:
        """An existing session, running (``-32002`` when there is none)."""

    async def listing(self, cwd: str | None) -> list[dict[str, Any]]:
        """ACP ``SessionInfo`` objects, newest first (of ``cwd`` only, when given)."""


def _iso(value: datetime.datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def session_entry(info: SessionInfo) -> dict[str, Any]:
    """A ``SessionInfo`` of ``session/list`` from pitrio's catalogue."""
    entry: dict[str, Any] = {
        "sessionId": info.id,
        "cwd": info.cwd,
        "updatedAt": _iso(info.modified),
    }
    title = info.name or info.first_message
    if title:
        entry["title"] = title[:200]
    return entry


class LocalSessions:
    """Sessions run in this process, in the session dirs of the agent dir."""

    def __init__(
        self,
        nursery: Callable[[], trio.Nursery],
        router: ModelRouterHandle,
        options: SessionOptions,
        notify: Notify,
        ask: Ask,
    ) -> None:
        self._nursery, self._router, self._base = nursery, router, options
        self._notify, self._ask = notify, ask

    editor_files = False
    """Whether ``read``/``write``/``edit`` go through the editor's ``fs/*`` methods (the
    client declared both, and ``--no-editor-fs`` was not given)."""

    def _editor_tools(self, cwd: str, session: list[str]) -> list[Any]:
        """The file tools through the editor, for the session whose id ``session`` will hold."""

        async def read_text(path: str) -> str:
            params = {"sessionId": session[0], "path": path}
            result = await self._ask("fs/read_text_file", params)
            content = result.get("content") if isinstance(result, dict) else None
            if not isinstance(content, str):
                raise RpcError(INTERNAL_ERROR, "fs/read_text_file gave no content")
            return content

        async def write_text(path: str, content: str) -> None:
            params = {"sessionId": session[0], "path": path, "content": content}
            await self._ask("fs/write_text_file", params)

        return delegated_file_tools(cwd, read_text, write_text)

    async def _start(self, options: SessionOptions) -> Bridge:
        session: list[str] = [options.session_id or ""]
        if self.editor_files:
            cwd = options.cwd or "/"
            options = attrs.evolve(
                options, tools=[*options.tools, *self._editor_tools(cwd, session)]
            )
        with collapse_groups():
            bridge: Bridge = await self._nursery().start(
                run_bridge, self._router, options, self._notify, self._ask
            )
        session[0] = bridge.session_id
        return bridge

    def _options(self, cwd: str, **changes: Any) -> SessionOptions:
        return attrs.evolve(self._base, cwd=cwd, continue_recent=False, fork=None, **changes)

    async def create(self, cwd: str, servers: McpServers = ()) -> Bridge:
        """A new session file in ``cwd``'s session dir (written at its first reply), with the
        client's MCP servers after pitrio's configured ones."""
        options = self._options(cwd, session=None, session_id=None, mcp_servers=servers)
        return await self._start(options)

    def _find(self, session_id: str, cwd: str) -> SessionInfo:
        override = self._base.session_dir
        for info in list_sessions(session_dir(cwd, override=override)):
            if info.id == session_id:
                return info
        if override is None:
            for info in list_all_sessions():
                if info.id == session_id:
                    return info
        raise RpcError(RESOURCE_NOT_FOUND, f"Session not found: {session_id}")

    async def open(self, session_id: str, cwd: str, servers: McpServers = ()) -> Bridge:
        """The session file with that id: the ``cwd``'s session dir first, then every one."""
        info = await trio.to_thread.run_sync(self._find, session_id, cwd)
        return await self._start(self._options(cwd, session=str(info.path), mcp_servers=servers))

    async def listing(self, cwd: str | None) -> list[dict[str, Any]]:
        """pitrio's session catalogue."""
        override = self._base.session_dir
        if cwd is not None:
            infos = await trio.to_thread.run_sync(
                list_sessions, session_dir(cwd, override=override)
            )
        elif override is not None:
            infos = await trio.to_thread.run_sync(list_sessions, Path(override))
        else:
            infos = await trio.to_thread.run_sync(list_all_sessions)
        return [session_entry(info) for info in infos]


@attrs.frozen
class Daemon:
    """A running ``pitrio serve``: its address and the token to present."""

    url: str
    token: Token
    model: str | None = None
    """The model a session created here starts with (``--model``)."""

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The websocket handshake's headers."""
        value = self.token.value
        return [(b"Authorization", f"Bearer {value}".encode())] if value else []


class DaemonSessions:
    """The sessions of a running daemon, reached over its websockets."""

    def __init__(
        self, nursery: Callable[[], trio.Nursery], daemon: Daemon, notify: Notify, ask: Ask
    ) -> None:
        self._nursery, self.daemon = nursery, daemon
        self._notify, self._ask = notify, ask

    def _failure(self, exc: BaseException, what: str) -> RpcError:
        if isinstance(exc, ConnectionRejected):
            return RpcError(
                INTERNAL_ERROR, refused(exc.status_code, exc.body, self.daemon.token, what)
            )
        return RpcError(INTERNAL_ERROR, unreachable(self.daemon.url, exc))

    async def _host(self, command: dict[str, Any]) -> Any:
        """One command on ``/v1/host``: its data; its error as an :class:`RpcError`."""
        url = ws_url(self.daemon.url, "/v1/host")
        try:
            async with open_websocket_url(url, extra_headers=self.daemon.headers()) as host:
                await host.send_message(json.dumps({"id": "acp", **command}))
                while True:
                    frame = json.loads(await host.get_message())
                    if frame.get("type") == "response" and frame.get("id") == "acp":
                        break
        except (ConnectionRejected, HandshakeError, OSError, ConnectionClosed) as exc:
            raise self._failure(exc, "the daemon") from None
        if not frame.get("success"):
            error = str(frame.get("error"))
            code = RESOURCE_NOT_FOUND if "not found" in error.lower() else INTERNAL_ERROR
            raise RpcError(code, error)
        return frame.get("data")

    async def _attach(self, session_id: str, cwd: str) -> Bridge:
        url = ws_url(self.daemon.url, f"/v1/sessions/{session_id}")

        def connect(query: str) -> Any:
            return open_websocket_url(url + query, extra_headers=self.daemon.headers())

        try:
            with collapse_groups():
                bridge: Bridge = await self._nursery().start(
                    serve_link, connect, session_id, cwd, self._notify, self._ask
                )
        except (ConnectionRejected, HandshakeError, OSError, ConnectionClosed) as exc:
            raise self._failure(exc, f"session {session_id}") from None
        return bridge

    async def create(self, cwd: str, servers: McpServers = ()) -> Bridge:
        """A new daemon session in ``cwd``; the client's MCP servers are not passed on (the
        daemon's sessions have the daemon's MCP configuration: an editor's commands are not
        run on the daemon's side)."""
        fields: dict[str, Any] = {"type": "create", "cwd": cwd}
        if self.daemon.model:
            fields["model"] = self.daemon.model
        created = await self._host(fields)
        return await self._attach(str(created["sessionId"]), cwd)

    async def open(self, session_id: str, cwd: str, servers: McpServers = ()) -> Bridge:
        """A daemon session (loaded by the daemon when it was not in memory); as
        :meth:`create`, without the client's MCP servers."""
        opened = await self._host({"type": "open", "sessionId": session_id})
        return await self._attach(session_id, str(opened.get("cwd") or cwd))

    async def listing(self, cwd: str | None) -> list[dict[str, Any]]:
        """The daemon's sessions (its order: newest first)."""
        rows = (await self._host({"type": "list"})).get("sessions") or []
        entries = []
        for row in rows:
            if cwd is not None and row.get("cwd") != cwd:
                continue
            entry: dict[str, Any] = {"sessionId": row.get("id"), "cwd": row.get("cwd")}
            if isinstance(row.get("modified"), str) and row["modified"]:
                entry["updatedAt"] = row["modified"]
            if isinstance(row.get("title"), str) and row["title"]:
                entry["title"] = row["title"][:200]
            entries.append(entry)
        return entries
