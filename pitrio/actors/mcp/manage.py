"""``pitrio mcp``'s work outside a session: editing an ``mcp.json`` and checking servers.

:func:`add_server` and :func:`remove_server` change one entry of a file's ``mcpServers`` and
keep everything else, rewriting the file with the indentation it had (two spaces for a new
one). :func:`check_servers` connects every enabled server once, as a session would, and
reports its state, tools and error; :func:`project_trusted` answers whether a session would
read the project's file (a saved ``trust.json`` decision of the cwd or a parent).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio.actors.mcp.config import McpServerConfig
from pitrio.actors.mcp.naming import DEFAULT_EXPOSURE, tool_exposure
from pitrio.errors import PitrioError

_INDENT = re.compile(r"^([ \t]+)\S", re.MULTILINE)


class McpFileError(PitrioError):
    """An ``mcp.json`` cannot be read, is not an object with an ``mcpServers`` object, or
    cannot be written."""


def _edit(path: Path, change: Callable[[dict[str, Any], dict[str, Any]], bool]) -> None:
    """Read ``path`` (an empty object when missing), let ``change(document, servers)`` edit
    the servers, and write the file back when it says so."""
    try:
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff")
    except FileNotFoundError:
        text = None
    except OSError as exc:
        raise McpFileError(f"{path}: {exc.strerror}") from None
    try:
        document = {} if text is None else json.loads(text)
    except json.JSONDecodeError as exc:
        raise McpFileError(f"{path}: not valid JSON ({exc})") from None
    servers = document.get("mcpServers", {}) if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise McpFileError(f"{path}: must be a JSON object with an mcpServers object")
    if not change(document, servers):
        return
    found = _INDENT.search(text or "")
    indent = found.group(1) if found else "  "
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=indent, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise McpFileError(f"{path}: {exc.strerror}") from None


def add_server(path: Path, name: str, entry: Mapping[str, Any]) -> bool:
    """Add or replace server ``name`` in the file (created when missing); whether an entry
    was replaced."""
    replaced = False

    def change(document: dict[str, Any], servers: dict[str, Any]) -> bool:
        nonlocal replaced
        replaced = name in servers
        servers[name] = dict(entry)
        document["mcpServers"] = servers
        return True

    _edit(path, change)
    return replaced


def remove_server(path: Path, name: str) -> bool:
    """Remove server ``name`` from the file; ``False`` when the file does not define it."""
    if not path.exists():
        return False
    removed = False

    def change(document: dict[str, Any], servers: dict[str, Any]) -> bool:
        nonlocal removed
        removed = servers.pop(name, None) is not None
        return removed

    _edit(path, change)
    return removed


@attrs.frozen
class ServerReport:
    """What ``pitrio mcp list`` says of one server."""

    server: McpServerConfig
    state: str
    """``disabled``, ``connected``, ``needs-auth`` or ``failed``."""
    tools: tuple[str, ...] = ()
    resources: bool = False
    error: str | None = None

    @property
    def exposure(self) -> str:
        """The server's exposure (``codemode`` when unset)."""
        return self.server.exposure or DEFAULT_EXPOSURE

    def tool_overrides(self) -> dict[str, str]:
        """The tools whose exposure differs from the server's."""
        found: dict[str, str] = {}
        for tool in self.tools:
            exposure = tool_exposure(self.server.exposure, self.server.tool_exposure, tool)
            if exposure != self.exposure:
                found[tool] = exposure
        return found

    def transport(self) -> str:
        """The URL, or the command line."""
        server = self.server
        return (
            server.url if server.transport == "http" else " ".join([server.command, *server.args])
        )

    def to_json(self) -> dict[str, Any]:
        """1.6.0's ``pi mcp list --json`` entry."""
        server = self.server
        data: dict[str, Any] = {
            "name": server.name,
            "scope": server.scope,
            "source": server.source,
            **({"override": server.override} if server.override else {}),
            "enabled": server.enabled,
            "exposure": self.exposure,
            "transport": self.transport(),
            "state": self.state,
            "tools": list(self.tools),
        }
        overrides = self.tool_overrides()
        if overrides:
            data["toolExposure"] = overrides
        if self.resources:
            data["resources"] = True
        if self.error is not None:
            data["error"] = self.error
        return data


async def check_servers(servers: Sequence[McpServerConfig], cwd: str) -> list[ServerReport]:
    """Connect every enabled server at once (each within its start-up limit) and report."""
    from pitrio.actors.mcp.actor import start_mcp
    from pitrio.actors.mcp.oauth import McpSignInRequired

    enabled = [server for server in servers if server.enabled]
    outcomes: dict[str, Any] = {}
    if enabled:
        async with trio.open_nursery() as nursery:
            handle = await start_mcp(nursery, enabled, cwd=cwd)
            outcomes = await handle.connect_all()
            nursery.cancel_scope.cancel()
    reports: list[ServerReport] = []
    for server in servers:
        outcome = outcomes.get(server.name)
        if not server.enabled:
            reports.append(ServerReport(server, "disabled"))
        elif isinstance(outcome, McpSignInRequired):
            reports.append(ServerReport(server, "needs-auth", error=str(outcome)))
        elif isinstance(outcome, Exception) or outcome is None:
            reports.append(ServerReport(server, "failed", error=str(outcome or "not started")))
        else:
            tools = tuple(dict.fromkeys(tool.name for tool in outcome.tools))
            reports.append(ServerReport(server, "connected", tools, outcome.has_resources))
    return reports
