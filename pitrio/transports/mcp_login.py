"""``pitrio mcp login|logout``: MCP OAuth sign-in outside a session, as pi 1.6.0's.

``login <server> [-l] [--timeout <seconds>]`` connects first (a server that lets us in is
"already signed in"), then prints the authorization URL and waits (``--timeout``, default
300 s) for the browser to come back to the loopback callback or, on a terminal, for the
redirected URL to be pasted. ``logout <server> [-l]``
deletes the server's entry in ``mcp-auth.json``. Both exit 1 on a usage error, an unknown
server or one that does not use OAuth; ``login`` also when the sign-in fails.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import trio

from pitrio.transports.mcp_options import UsageError, parse_options

if TYPE_CHECKING:
    from pitrio.sdk.mcp_manage import CredentialFile, McpServerConfig


class McpCommand(Protocol):
    """What sign-in needs of a ``pitrio mcp`` run (``mcp_cli.McpCommand`` has it; named here
    so that the two modules import in one direction only)."""

    @property
    def sdk(self) -> Any:
        """:mod:`pitrio.sdk.mcp_manage` (imported by the run, on use)."""
        ...

    @property
    def agent(self) -> Path:
        """The agent directory."""
        ...

    @property
    def cwd(self) -> str:
        """The working directory (whose project files may hold the server)."""
        ...

    @property
    def out(self) -> Callable[[str], None]:
        """Writes a line to stdout."""
        ...

    @property
    def err(self) -> Callable[[str], None]:
        """Writes a line to stderr."""
        ...


DEFAULT_TIMEOUT = 300.0


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, to suggest a configured name for a mistyped one."""
    previous = list(range(len(b) + 1))
    for i, left in enumerate(a, 1):
        current = [i]
        for j, right in enumerate(b, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (left != right))
            )
        previous = current
    return previous[-1]


PASTE_PROMPT = "If the browser cannot reach this machine, paste the URL it was redirected to: "


def _paste_reader() -> Callable[[], Awaitable[str | None]] | None:
    """On a terminal (as pi): ask on stderr for the redirected URL, read a line of stdin."""
    if not sys.stdin.isatty():
        return None

    async def read() -> str | None:
        sys.stderr.write(PASTE_PROMPT)
        sys.stderr.flush()
        # The thread stays blocked in readline when the callback wins; it is a daemon.
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        return line.strip() or None

    return read


def run_sign_in_command(command: McpCommand, name: str, args: list[str]) -> int:
    """``login`` or ``logout`` (``name``) with ``args``; the exit code."""
    known = {"local": "flag", "timeout": "value"} if name == "login" else {"local": "flag"}
    parsed = parse_options(args, known)  # type: ignore[arg-type]
    if len(parsed.positional) != 1:
        raise UsageError(f'Usage: pitrio mcp {name} <server> [-l]\nSee "pitrio mcp --help".')
    (server,) = parsed.positional
    sdk = command.sdk
    trusted = sdk.project_trusted(command.agent, command.cwd)
    config = sdk.load_mcp_config(
        command.agent,
        command.cwd,
        project=trusted,
        project_dirs=sdk.project_dir_names(command.agent),
    )
    entry = next((s for s in config.servers if s.name == server), None)
    if entry is None:
        names = [s.name for s in config.servers]
        close = next((n for n in names if edit_distance(n, server) <= 2), None)
        hint = f' Did you mean "{close}"?' if close else ""
        command.err(
            f'No MCP server named "{server}".{hint} Configured: {", ".join(names) or "none"}.'
        )
        return 1
    if "local" in parsed.values and entry.scope != "project":
        command.err(
            f'MCP server "{server}" is defined in {entry.source}, not in the project; omit --local.'
        )
        return 1
    if not sdk.uses_oauth(entry):
        command.err(
            f'MCP server "{server}" does not use OAuth. '
            "Only HTTP servers without an Authorization header do."
        )
        return 1
    credentials = sdk.CredentialFile(command.agent / "mcp-auth.json")
    if name == "logout":
        removed = credentials.remove(entry.name, entry.url)
        command.out(
            f'Signed out of MCP server "{server}".'
            if removed
            else f'No stored credentials for MCP server "{server}".'
        )
        return 0
    raw = parsed.value("timeout")
    try:
        timeout = DEFAULT_TIMEOUT if raw is None else float(raw)
    except ValueError:
        timeout = math.nan
    if not math.isfinite(timeout) or timeout <= 0:
        command.err("--timeout must be a positive number of seconds.")
        return 1
    return trio.run(_login, command, entry, credentials, timeout)


async def _login(
    command: McpCommand, entry: McpServerConfig, credentials: CredentialFile, seconds: float
) -> int:
    """Connect, or sign in and connect, within ``seconds`` for the sign-in."""
    sdk = command.sdk
    name = entry.name
    try:
        tools = await sdk.connect_and_list(entry, command.cwd)
    except Exception as exc:
        # Connecting first also records the server's challenge (the scope it asks for).
        challenge = sdk.sign_in_challenge(exc)
        if challenge is None:
            command.err(f'MCP server "{name}" failed to connect: {sdk.describe(exc)}')
            return 1
    else:
        command.out(f'Already signed in to MCP server "{name}" ({tools} tools).')
        return 0

    def show(url: str) -> None:
        command.out(f'Sign in to MCP server "{name}" in your browser:\n{url}')

    tools = -1
    with trio.move_on_after(seconds):
        try:
            tools = await sdk.sign_in(
                entry, command.cwd, show, credentials, _paste_reader(), challenge
            )
        except Exception as exc:
            command.err(f'Sign-in to MCP server "{name}" failed: {sdk.describe(exc)}')
            return 1
    if tools < 0:
        command.err(
            f'Sign-in to MCP server "{name}" was cancelled or not completed'
            f" within {round(seconds)} seconds."
        )
        return 1
    command.out(f'Signed in to MCP server "{name}" ({tools} tools).')
    return 0
