"""``mcp.json`` as pi 1.6.0 reads it: files, the entry schema, project overrides, merging.

Files, in order: ``<agentDir>/mcp.json`` (scope ``global``), the project's ``mcp.json`` in its
config dir (``.pitrio``, and ``.pi`` for pi's agent dir; scope ``project``, read only when the
project is trusted), then each ``--mcp-config FILE`` (scope ``cli``, pitrio's). An entry
replaces an earlier one of the same name. A ``project`` or ``cli`` entry without ``command``,
``url`` and ``type`` is an override: it may set only ``enabled``, ``exposure`` and
``toolExposure`` of the server defined earlier and keeps the rest (credentials included).

An entry is a stdio server (``command``, ``args``, ``env``, ``cwd``) or a streamable-HTTP
one (``url``, ``headers``, ``oauth``); ``type`` may say ``stdio``, ``http`` or
``streamable-http`` (``sse`` is refused). Both take ``timeout`` (seconds), ``enabled``,
``exposure`` / ``toolExposure`` (:mod:`.naming`) and ``description``. A file may set
``autoEnableCodemode`` beside ``mcpServers`` (a later file's value wins). ``env`` and
``headers`` values are ``${VAR}`` templates or ``!command`` values, resolved when the server
is started (:mod:`.values`); a leading ``~/`` in ``command``, an argument or ``cwd`` is the
home directory, and a relative ``cwd`` is the session's.

pitrio's earlier fields still work: ``disabled: true`` (``enabled: false``), and the time
limits ``startupTimeoutMs`` / ``callTimeoutMs`` (with the ``settings.json`` defaults
``mcp.startupTimeoutMs`` / ``mcp.callTimeoutMs``); ``timeout`` sets both.

Parsing is pure (:func:`parse_file`); a bad entry is a problem naming its file and server and
only that entry is left out. Reading files is :func:`load_mcp_config`.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import attrs
import orjson

from pitrio.actors.mcp.naming import EXPOSURE_ALIASES, EXPOSURES, Exposure, mcp_namespace
from pitrio.actors.mcp.oauth_settings import check_oauth, is_loopback
from pitrio.errors import PitrioError

CONFIG_FILE = "mcp.json"
PROJECT_DIRS = (".pitrio",)
DEFAULT_STARTUP_TIMEOUT_MS = 30_000
DEFAULT_CALL_TIMEOUT_MS = 300_000
OVERRIDE_KEYS = ("enabled", "exposure", "toolExposure")

Transport = Literal["stdio", "http"]
Scope = Literal["global", "project", "cli", "client"]
"""``client``: servers a client gave the session (ACP's ``mcpServers``), after every file."""

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]+")


class McpConfigError(PitrioError, ValueError):
    """An ``--mcp-config`` file named on the command line cannot be read or is not JSON."""


@attrs.frozen(kw_only=True)
class McpServerConfig:
    """One configured MCP server (enabled or not)."""

    name: str
    source: str
    """The file that defines it (for messages)."""
    scope: Scope = "global"
    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = attrs.field(factory=dict)
    """As written: templates and ``!command`` values are resolved when the server starts."""
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    """As written, like :attr:`env`."""
    enabled: bool = True
    exposure: Exposure | None = None
    """The server's ``exposure`` (``None``: unset, which is ``codemode``)."""
    tool_exposure: tuple[tuple[str, Exposure], ...] = ()
    """``toolExposure`` entries in the file's order."""
    description: str | None = None
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT_MS / 1000
    """Seconds from spawning (or connecting) to a listed tool set."""
    call_timeout: float = DEFAULT_CALL_TIMEOUT_MS / 1000
    """Seconds a tool call may take before it is cancelled (on the server too)."""
    override: str | None = None
    """The file whose override entry changed ``enabled`` / exposure, if one did."""
    entry: Mapping[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    """The entry as written (an override is merged into it)."""
    literal: bool = False
    """``env``, ``headers``, ``command`` and ``args`` are used as given, with no templates,
    ``!command`` values or ``~/``: a client's server (scope ``client``), whose protocol
    (ACP) gives plain values."""


@attrs.frozen
class McpConfig:
    """The servers (disabled ones too, in first-seen order) and what could not be used."""

    servers: tuple[McpServerConfig, ...] = ()
    problems: tuple[str, ...] = ()
    auto_enable_codemode: bool | None = None
    """``autoEnableCodemode`` of the last file that sets it (``None``: unset, meaning true)."""

    @property
    def enabled(self) -> tuple[McpServerConfig, ...]:
        """The servers to connect."""
        return tuple(server for server in self.servers if server.enabled)


@attrs.frozen
class TimeLimits:
    """Default time limits in milliseconds (``settings.json``'s ``mcp`` object)."""

    startup_ms: float = DEFAULT_STARTUP_TIMEOUT_MS
    call_ms: float = DEFAULT_CALL_TIMEOUT_MS


def expand_home(value: str, home: str | None = None) -> str:
    """``~`` and ``~/...`` as the home directory, as a shell would."""
    if value == "~" or value.startswith("~/"):
        return (home or os.path.expanduser("~")) + value[1:]
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"{what} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise ValueError(f"{what} must be an object of strings")
    return dict(value)


def _millis(entry: Mapping[str, Any], key: str, default_ms: float) -> float:
    value = entry.get(key, default_ms)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{key} must be a positive number of milliseconds")
    return float(value) / 1000


def _exposure(value: Any, what: str) -> Exposure:
    value = EXPOSURE_ALIASES.get(value, value) if isinstance(value, str) else value
    if value not in EXPOSURES:
        raise ValueError(f"{what} must be one of {', '.join(EXPOSURES)}")
    exposure: Exposure = value
    return exposure


def _exposures(entry: Mapping[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    if entry.get("exposure") is not None:
        found["exposure"] = _exposure(entry["exposure"], "exposure")
    overrides = entry.get("toolExposure")
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ValueError("toolExposure must be an object of tool names to exposures")
        found["tool_exposure"] = tuple(
            (tool, _exposure(value, f"toolExposure {tool!r}")) for tool, value in overrides.items()
        )
    return found


def _common(entry: Mapping[str, Any], limits: TimeLimits) -> dict[str, Any]:
    """The fields both transports share."""
    enabled = entry.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError("enabled must be true or false")
    description = entry.get("description")
    if description is not None and not isinstance(description, str):
        raise ValueError("description must be a string")
    timeout = entry.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
    ):
        raise ValueError("timeout must be a positive number of seconds")
    common: dict[str, Any] = {
        "enabled": enabled and entry.get("disabled") is not True,
        "description": description,
        "startup_timeout": _millis(entry, "startupTimeoutMs", limits.startup_ms),
        "call_timeout": _millis(entry, "callTimeoutMs", limits.call_ms),
        **_exposures(entry),
    }
    if timeout is not None:  # pi's one per-request limit: the start-up and each call
        common["startup_timeout"] = common["call_timeout"] = float(timeout)
    return common


def _http(entry: Mapping[str, Any], url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("url must be an http or https URL")
    check_oauth(entry.get("oauth"))
    auth = entry.get("auth")
    if auth is not None:
        provider = auth.get("provider") if isinstance(auth, dict) else None
        if not isinstance(provider, str) or not provider:
            raise ValueError("auth.provider must be a provider name")
        if parts.scheme != "https" and not is_loopback(url):
            raise ValueError(
                "auth requires an https URL, or http on localhost, 127.0.0.1, or [::1]"
            )
    headers = _string_map(entry.get("headers", {}), "headers")
    return {"transport": "http", "url": url, "headers": headers}


def _stdio(entry: Mapping[str, Any], command: str) -> dict[str, Any]:
    cwd = entry.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise ValueError("cwd must be a string")
    return {
        "transport": "stdio",
        "command": command,
        "args": _strings(entry.get("args", []), "args"),
        "env": _string_map(entry.get("env", {}), "env"),
        "cwd": cwd,
    }


def parse_server(
    name: str, entry: Any, source: str, scope: Scope = "global", limits: TimeLimits = TimeLimits()
) -> McpServerConfig:
    """One entry; raises ``ValueError`` saying what is wrong with it."""
    if not _SERVER_NAME.fullmatch(name):
        raise ValueError("a server name may only have letters, digits, '_' and '-'")
    if not isinstance(entry, dict):
        raise ValueError("must be an object")
    common = _common(entry, limits)
    kind, url, command = entry.get("type"), entry.get("url"), entry.get("command")
    if kind == "sse":
        raise ValueError("the SSE transport is not supported (use its streamable-HTTP URL)")
    if isinstance(url, str) and kind in (None, "http", "streamable-http"):
        fields = _http(entry, url)
    elif isinstance(command, str) and command and kind in (None, "stdio"):
        fields = _stdio(entry, command)
    else:
        raise ValueError('needs "command" (a stdio server) or "url" (a streamable-HTTP server)')
    if scope == "project" and fields["transport"] == "http" and entry.get("auth") is not None:
        # A repository must not choose where the user's credential is sent.
        raise ValueError("auth is only allowed in the global mcp.json")
    return McpServerConfig(
        name=name,
        source=source,
        scope=scope,
        entry=entry,
        literal=scope == "client",
        **fields,
        **common,
    )


def is_override(entry: Mapping[str, Any]) -> bool:
    """An entry that only changes a server defined earlier: no ``command``, ``url``, ``type``."""
    return all(key not in entry for key in ("command", "url", "type"))


@attrs.define
class _Merge:
    """The servers read so far, by name, and the problems."""

    limits: TimeLimits
    servers: dict[str, McpServerConfig] = attrs.field(factory=dict)
    problems: list[str] = attrs.field(factory=list)
    auto_enable_codemode: bool | None = None

    def read(self, data: Any, source: str, scope: Scope) -> None:
        """Take in one file's JSON."""
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            self.problems.append(f"{source}: must be a JSON object with an mcpServers object")
            return
        auto = data.get("autoEnableCodemode")
        if isinstance(auto, bool):
            self.auto_enable_codemode = auto
        elif auto is not None:
            self.problems.append(f"{source}: autoEnableCodemode must be true or false")
        for name, entry in data.get("mcpServers", {}).items():
            try:
                self._entry(name, entry, source, scope)
            except ValueError as exc:
                self.problems.append(f"{source}: MCP server {name}: {exc}")

    def _entry(self, name: str, entry: Any, source: str, scope: Scope) -> None:
        if scope != "global" and isinstance(entry, dict) and is_override(entry):
            base = self.servers.get(name)
            if base is None:
                raise ValueError('needs "command" or "url", or an earlier server to override')
            extra = [key for key in entry if key not in OVERRIDE_KEYS]
            if extra:
                raise ValueError(f"an override may only set {', '.join(OVERRIDE_KEYS)}")
            merged = parse_server(
                name, {**base.entry, **entry}, base.source, base.scope, self.limits
            )
            self.servers[name] = attrs.evolve(merged, override=source)
            return
        server = parse_server(name, entry, source, scope, self.limits)
        clash = next(
            (
                other
                for other in self.servers
                if other != name and mcp_namespace(other) == mcp_namespace(name)
            ),
            None,
        )
        if clash is not None:
            raise ValueError(f"its name clashes with server {clash} ('-' and '_' are the same)")
        self.servers[name] = server  # a replaced entry keeps its place (pi's Map)


def parse_file(
    data: Any, source: str, scope: Scope = "global", limits: TimeLimits = TimeLimits()
) -> McpConfig:
    """One file's servers and problems (overrides need an earlier file: see :func:`merge_files`)."""
    return merge_files([(data, source, scope)], limits)


def merge_files(
    files: Sequence[tuple[Any, str, Scope]], limits: TimeLimits = TimeLimits()
) -> McpConfig:
    """The servers of several files' JSON, later entries replacing earlier ones by name."""
    merge = _Merge(limits)
    for data, source, scope in files:
        merge.read(data, source, scope)
    return McpConfig(
        tuple(merge.servers.values()), tuple(merge.problems), merge.auto_enable_codemode
    )


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


def read_json(path: Path, *, required: bool) -> tuple[Any, str | None]:
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
        return orjson.loads(raw.removeprefix(b"\xef\xbb\xbf")), None
    except orjson.JSONDecodeError as exc:
        if required:
            raise McpConfigError(f"MCP config file {path} is not valid JSON: {exc}") from None
        return None, f"{path}: not valid JSON ({exc})"


def user_config_file(agent_dir: Path) -> Path:
    """The agent dir's ``mcp.json``."""
    return agent_dir / CONFIG_FILE


def project_config_file(cwd: str, project_dirs: Sequence[str] = PROJECT_DIRS) -> Path:
    """The project's ``mcp.json``: the first config dir's that exists, else the first dir's."""
    candidates = [Path(cwd, name, CONFIG_FILE) for name in project_dirs]
    return next((path for path in candidates if path.exists()), candidates[0])


def load_mcp_config(
    agent_dir: Path,
    cwd: str,
    extra: Sequence[str] = (),
    limits: TimeLimits = TimeLimits(),
    project: bool = True,
    project_dirs: Sequence[str] = PROJECT_DIRS,
    client: tuple[Any, str] | None = None,
    registered: tuple[Any, str] | None = None,
) -> McpConfig:
    """Read and merge the agent dir's file, the project's (unless ``project=False``: an
    untrusted project's), ``extra`` (``--mcp-config``) ones and ``client``: an ``mcp.json``
    object a client gave (ACP's ``mcpServers``) and its name for messages, scope ``client``.
    ``registered``: the servers extensions registered (an ``mcp.json`` object and its name),
    read first, so a file's server of the same name replaces one (pi 1.6.0).

    Raises :class:`McpConfigError` for an ``extra`` file that is missing or not JSON (the user
    named it); a discovered file's problems are reported in :attr:`McpConfig.problems`.
    """
    sources: list[tuple[Path, Scope]] = [(user_config_file(agent_dir), "global")]
    if project:
        sources.append((project_config_file(cwd, project_dirs), "project"))
    sources += [(Path(cwd, name), "cli") for name in extra]
    files: list[tuple[Any, str, Scope]] = []
    if registered is not None:
        files.append((registered[0], registered[1], "global"))
    problems: list[str] = []
    for path, scope in sources:
        data, problem = read_json(path, required=scope == "cli")
        if problem is not None:
            problems.append(problem)
        if data is not None:
            files.append((data, str(path), scope))
    if client is not None:
        files.append((client[0], client[1], "client"))
    merged = merge_files(files, limits)
    return attrs.evolve(merged, problems=(*problems, *merged.problems))


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
