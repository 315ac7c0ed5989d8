"""``mcpServers`` configuration: files, merging by server name, per-server time limits.

The format is Claude Desktop's and Cursor's: ``{"mcpServers": {"<name>": {...}}}`` where an
entry is either a stdio server (``command``, ``args``, ``env``, optional ``cwd``) or a
streamable-HTTP one (``url``, ``headers``); ``"type"`` may say ``"stdio"`` or ``"http"``
(``"streamable-http"`` too) and is otherwise inferred. pitrio adds ``disabled``,
``startupTimeoutMs`` and ``callTimeoutMs`` per server; ``${VAR}`` and ``${VAR:-default}`` in
``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` read the environment.

Files, later ones replacing earlier entries of the same name: ``<agentDir>/mcp.json``, the
project's ``<cwd>/.pitrio/mcp.json``, then each ``--mcp-config FILE`` in order. The default
time limits come from ``settings.json`` (``mcp.startupTimeoutMs``, ``mcp.callTimeoutMs``).

Parsing is pure (:func:`parse_servers`); a bad entry is a problem naming its file and server,
and only that entry is left out. Reading files is :func:`load_mcp_config`.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson

from pitrio.errors import PitrioError

CONFIG_FILE = "mcp.json"
PROJECT_DIR = ".pitrio"
DEFAULT_STARTUP_TIMEOUT_MS = 30_000
DEFAULT_CALL_TIMEOUT_MS = 300_000

Transport = Literal["stdio", "http"]

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(PitrioError, ValueError):
    """An ``--mcp-config`` file named on the command line cannot be read or is not JSON."""


@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One configured MCP server."""

    name: str
    source: str
    """The file it was read from (for messages)."""
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_MS / 1000
    """Seconds from spawning (or connecting) to a listed tool set."""
    call_timeout: float = DEFAULT_CALL_TIMEOUT_MS / 1000
    """Seconds a tool call may take before it is cancelled (on the server too)."""


@attrs.frozen
class McpConfig:
    """The effective servers (in first-seen order) and what could not be used."""

    servers: tuple[McpServerConfig, ...] = ()
    problems: tuple[str, ...] = ()


@attrs.frozen
class TimeLimits:
    """Default time limits in milliseconds (``settings.json``'s ``mcp`` object)."""

    startup_ms: float = DEFAULT_STARTUP_TIMEOUT_MS
    call_ms: float = DEFAULT_CALL_TIMEOUT_MS


def expand(text: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` replaced from ``environ`` (unset: empty or default)."""

    def value(match: re.Match[str]) -> str:
        found = environ.get(match.group(1))
        if found:
            return found
        return match.group(2) if match.group(2) is not None else (found or "")

    return _VARIABLE.sub(value, text)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ValueError(f"{what} must be an object of strings")
    return dict(value)


def _timeout(entry: Mapping[str, Any], key: str, default_ms: float) -> float:
    value = entry.get(key, default_ms)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{key} must be a positive number of milliseconds")
    return float(value) / 1000


def _server(
    name: str, entry: Any, source: str, limits: TimeLimits, environ: Mapping[str, str]
) -> McpServerConfig | None:
    """One entry, or ``None`` when it is disabled; raises ``ValueError`` naming the problem."""
    if not isinstance(entry, dict):
        raise ValueError("must be an object")
    if entry.get("disabled") is True:
        return None
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http"):
        raise ValueError(f"type {kind!r} is not supported (stdio or http)")
    common: dict[str, Any] = {
        "name": name,
        "source": source,
        "startup_timeout": _timeout(entry, "startupTimeoutMs", limits.startup_ms),
        "call_timeout": _timeout(entry, "callTimeoutMs", limits.call_ms),
    }
    if kind == "http":
        url = entry.get("url")
        if not isinstance(url, str) or not url:
            raise ValueError("url must be a non-empty string")
        headers = _string_map(entry.get("headers", {}), "headers")
        return McpServerConfig(
            transport="http",
            url=expand(url, environ),
            headers={key: expand(value, environ) for key, value in headers.items()},
            **common,
        )
    command = entry.get("command")
    if not isinstance(command, str) or not command:
        raise ValueError("command must be a non-empty string")
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError("cwd must be a string")
    env = _string_map(entry.get("env", {}), "env")
    return McpServerConfig(
        transport="stdio",
        command=expand(command, environ),
        args=tuple(expand(arg, environ) for arg in _strings(entry.get("args", []), "args")),
        env={key: expand(value, environ) for key, value in env.items()},
        cwd=None if cwd is None else expand(cwd, environ),
        **common,
    )


def parse_servers(
    data: Any,
    source: str,
    limits: TimeLimits = TimeLimits(),
    environ: Mapping[str, str] | None = None,
) -> tuple[dict[str, McpServerConfig | None], list[str]]:
    """The entries of one file's JSON (``None`` for a disabled one) and its problems."""
    environ = os.environ if environ is None else environ
    if not isinstance(data, dict):
        return {}, [f"{source}: must be a JSON object with an mcpServers object"]
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        return {}, [f"{source}: mcpServers must be an object"]
    found: dict[str, McpServerConfig | None] = {}
    problems: list[str] = []
    for name, entry in servers.items():
        if not name.strip():
            problems.append(f"{source}: an MCP server name must not be empty")
            continue
        try:
            found[name] = _server(name, entry, source, limits, environ)
        except ValueError as exc:
            problems.append(f"{source}: MCP server {name}: {exc}")
    return found, problems


def merge(layers: Sequence[Mapping[str, McpServerConfig | None]]) -> tuple[McpServerConfig, ...]:
    """Later layers replace earlier entries by name; a disabled entry removes the server."""
    merged: dict[str, McpServerConfig | None] = {}
    for layer in layers:
        merged.update(layer)
    return tuple(server for server in merged.values() if server is not None)


def limits_from_settings(mcp_settings: Any) -> TimeLimits:
    """The default limits from ``settings.json``'s ``mcp`` object (bad values: defaults)."""
    if not isinstance(mcp_settings, dict):
        return TimeLimits()

    def number(key: str, default: float) -> float:
        value = mcp_settings.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            return default
        return float(value)

    return TimeLimits(
        startup_ms=number("startupTimeoutMs", DEFAULT_STARTUP_TIMEOUT_MS),
        call_ms=number("callTimeoutMs", DEFAULT_CALL_TIMEOUT_MS),
    )


def _read(path: Path, *, required: bool) -> tuple[Any, str | None]:
    """A file's JSON, or why not; a missing optional file is just absent."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if required:
            raise McpConfigError(f"MCP config file not found: {path}") from None
        return None, None
    except OSError as exc:
        if required:
            raise McpConfigError(f"Cannot read MCP config file {path}: {exc.strerror}") from None
        return None, f"{path}: cannot be read ({exc.strerror})"
    try:
        return orjson.loads(raw), None
    except orjson.JSONDecodeError as exc:
        if required:
            raise McpConfigError(f"MCP config file {path} is not valid JSON: {exc}") from None
        return None, f"{path}: not valid JSON ({exc})"


def config_files(agent_dir: Path, cwd: str) -> tuple[Path, Path]:
    """The two discovered files: the agent dir's and the project's."""
    return agent_dir / CONFIG_FILE, Path(cwd) / PROJECT_DIR / CONFIG_FILE


def load_mcp_config(
    agent_dir: Path,
    cwd: str,
    extra: Sequence[str] = (),
    limits: TimeLimits = TimeLimits(),
    environ: Mapping[str, str] | None = None,
    project: bool = True,
) -> McpConfig:
    """Read and merge the discovered files and ``extra`` (``--mcp-config``) ones
    (``project=False``: not the project's file, an untrusted project's).

    Raises :class:`McpConfigError` for an ``extra`` file that is missing or not JSON (the user
    named it); a discovered file's problems are reported in :attr:`McpConfig.problems`.
    """
    layers: list[dict[str, McpServerConfig | None]] = []
    problems: list[str] = []
    user_file, project_file = config_files(agent_dir, cwd)
    sources = [(user_file, False)] + ([(project_file, False)] if project else [])
    sources += [(Path(cwd, name), True) for name in extra]
    for path, required in sources:
        data, problem = _read(path, required=required)
        if problem is not None:
            problems.append(problem)
        if data is None:
            continue
        found, found_problems = parse_servers(data, str(path), limits, environ)
        layers.append(found)
        problems.extend(found_problems)
    return McpConfig(servers=merge(layers), problems=tuple(problems))


_CLI_FILES: list[str] = []


def cli_config_files() -> tuple[str, ...]:
    """The ``--mcp-config`` files given on this process's command line (:class:`McpConfigFlag`)."""
    return tuple(_CLI_FILES)


class McpConfigFlag(argparse.Action):
    """``--mcp-config FILE`` (repeatable): the files join every session this process starts.

    The command line's sessions are started far from the parser (RPC, print and JSON modes);
    like ``--trace``, the flag is recorded for the process instead of threaded through each.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        """Record the file, absolute (sessions may run in another directory)."""
        if isinstance(values, str):
            _CLI_FILES.append(os.path.abspath(values))
            setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])
