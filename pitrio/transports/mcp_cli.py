"""``pitrio mcp``: add, remove and check MCP servers without a session (pi 1.6.0's ``pi mcp``).

``add <server> [options] -- <command> [args...]`` or ``add <server> [options] --url <url>``
writes an entry to the agent dir's ``mcp.json`` (``-l`` / ``--local``: the project's);
``remove <server> [-l]`` takes one out; ``list [--json]`` connects every enabled server and
prints its state, tools and errors. Each exits 1 on a usage error or failure (``list``: an
invalid entry or an enabled server that did not connect), else 0. ``login <server> [-l]
[--timeout <seconds>]`` signs in to an OAuth HTTP server (the URL to open is printed; no
browser is started, as ``pitrio auth login``); ``logout <server> [-l]`` deletes its stored
credentials (:mod:`pitrio.transports.mcp_login`).

Options stop at ``--`` or at the second positional argument (``add <server> <command>``), so
a command's own options pass through untouched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from pitrio.transports.mcp_options import HINT as HINT
from pitrio.transports.mcp_options import Kind as Kind
from pitrio.transports.mcp_options import Parsed as Parsed
from pitrio.transports.mcp_options import UsageError as UsageError
from pitrio.transports.mcp_options import parse_options as parse_options

HELP = """Usage:
  pitrio mcp add <server> [options] -- <command> [args...]
  pitrio mcp add <server> [options] --url <url>
  pitrio mcp remove <server> [-l]
  pitrio mcp list [--json]
  pitrio mcp login <server> [-l] [--timeout <seconds>]
  pitrio mcp logout <server> [-l]

Add, remove and check MCP servers and sign in to OAuth servers without starting a
session. The servers are read from the agent dir's mcp.json and, when the project is
trusted, the project's (.pitrio/mcp.json; .pi/mcp.json too with pi's agent dir).

Commands:
  add <server>            add a server to mcp.json, or replace the one of that name
  remove <server>         remove a server from mcp.json
  list                    connect each enabled server and show its state, tools and errors
                          (exit status 1 when an entry is invalid or a server did not connect)
  login <server>          sign in to an OAuth server (open the printed URL in a browser)
  logout <server>         delete the stored OAuth credentials

Options of add, remove, login and logout:
  -l, --local             the project's mcp.json instead of the agent dir's

Options of add:
  --url <url>             a streamable-HTTP server (instead of a command)
  --env <KEY=VALUE>       an environment variable of a stdio server (repeatable)
  --cwd <dir>             the working directory of a stdio server
  --header <KEY=VALUE>    an HTTP header (repeatable)
  --bearer-token-env-var <NAME>
                          send "Authorization: Bearer ${NAME}"
  --oauth-client-id <id>, --oauth-client-secret <secret>, --oauth-callback-port <port>,
  --oauth-client-name <name>, --oauth-client-registration <auto|cimd|dcr>
                          written to the entry's oauth object
  --exposure <mode>       codemode (the default), deferred, direct or hidden
  --description <text>    what the server offers, in a sentence

Options of list:
  --json                  print the report as JSON

Options of login:
  --timeout <seconds>     time limit for the whole sign-in (default: 300)"""

ADD_OPTIONS: Mapping[str, Kind] = {
    "local": "flag",
    "url": "value",
    "env": "list",
    "cwd": "value",
    "header": "list",
    "bearer-token-env-var": "value",
    "oauth-client-id": "value",
    "oauth-client-secret": "value",
    "oauth-callback-port": "value",
    "oauth-client-name": "value",
    "oauth-client-registration": "value",
    "exposure": "value",
    "description": "value",
}
HTTP_ONLY = (
    "header",
    "bearer-token-env-var",
    "oauth-client-id",
    "oauth-client-secret",
    "oauth-callback-port",
    "oauth-client-name",
    "oauth-client-registration",
)
STDIO_ONLY = ("env", "cwd")
OAUTH_FIELDS = {
    "oauth-client-id": "clientId",
    "oauth-client-secret": "clientSecret",
    "oauth-callback-port": "callbackPort",
    "oauth-client-name": "clientName",
    "oauth-client-registration": "clientRegistration",
}


def _pairs(option: str, pairs: Sequence[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--{option} takes KEY=VALUE, not {pair!r}.")
        found[key] = value
    return found


def build_entry(parsed: Parsed) -> dict[str, Any]:
    """The ``mcpServers`` entry ``add``'s options describe (not yet validated)."""
    url = parsed.value("url")
    wrong = next(
        (o for o in (STDIO_ONLY if url else HTTP_ONLY) if o in parsed.values or o in parsed.lists),
        None,
    )
    if wrong is not None:
        kind = "stdio servers" if url else "HTTP servers (--url)"
        raise UsageError(f"--{wrong} is only for {kind}.")
    entry: dict[str, Any]
    if url is not None:
        headers = _pairs("header", parsed.lists.get("header", []))
        bearer = parsed.value("bearer-token-env-var")
        if bearer is not None:
            headers["Authorization"] = f"Bearer ${{{bearer}}}"
        oauth: dict[str, Any] = {}
        for option, key in OAUTH_FIELDS.items():
            value = parsed.value(option)
            if value is not None:
                oauth[key] = int(value) if key == "callbackPort" and value.isdigit() else value
        entry = {"url": url, **({"headers": headers} if headers else {})}
        if oauth:
            entry["oauth"] = oauth
    else:
        executable, *args = parsed.positional[1:]
        env = _pairs("env", parsed.lists.get("env", []))
        entry = {"command": executable, **({"args": args} if args else {})}
        if env:
            entry["env"] = env
        if parsed.value("cwd") is not None:
            entry["cwd"] = parsed.value("cwd")
    for option in ("exposure", "description"):
        if parsed.value(option) is not None:
            entry[option] = parsed.value(option)
    return entry


class McpCommand:
    """One run of ``pitrio mcp``, writing to ``out`` and ``err``."""

    def __init__(
        self, agent: Path, cwd: str, out: Callable[[str], None], err: Callable[[str], None]
    ):
        from pitrio.sdk import mcp_manage

        self.sdk = mcp_manage
        self.agent, self.cwd, self.out, self.err = agent, cwd, out, err

    def project_file(self) -> Path:
        """The project's ``mcp.json`` (of its config dirs, the first that has one)."""
        return self.sdk.project_config_file(self.cwd, self.sdk.project_dir_names(self.agent))

    def add(self, args: Sequence[str]) -> int:
        """``add``: write the entry; 0, or 1 with the reason on ``err``."""
        parsed = parse_options(args, ADD_OPTIONS, max_positional=2)
        url = parsed.value("url")
        if not parsed.positional or (url is None) == (len(parsed.positional) < 2):
            raise UsageError(
                "Usage: pitrio mcp add <server> [options] (--url <url> | -- <command> [args...])"
                f"\n{HINT}"
            )
        name = parsed.positional[0]
        entry = build_entry(parsed)
        try:
            self.sdk.parse_server(name, entry, "the command line")
        except ValueError as exc:
            self.err(f"MCP server {name}: {exc}")
            return 1
        local = "local" in parsed.values
        path = self.project_file() if local else self.sdk.user_config_file(self.agent)
        replaced = self.sdk.add_server(path, name, entry)
        scope = "project" if local else "global"
        self.out(f'{"Replaced" if replaced else "Added"} {scope} MCP server "{name}" in {path}.')
        if local and not self.sdk.project_trusted(self.agent, self.cwd):
            self.out(f"The project is not trusted: sessions ignore {path} until it is.")
        self.out("Check it with: pitrio mcp list")
        return 0

    def remove(self, args: Sequence[str]) -> int:
        """``remove``: take the entry out; 1 when the file does not define it."""
        parsed = parse_options(args, {"local": "flag"})
        if len(parsed.positional) != 1:
            raise UsageError(f"Usage: pitrio mcp remove <server> [-l]\n{HINT}")
        (name,) = parsed.positional
        local = "local" in parsed.values
        path = self.project_file() if local else self.sdk.user_config_file(self.agent)
        scope = "project" if local else "global"
        if self.sdk.remove_server(path, name):
            self.out(f'Removed {scope} MCP server "{name}" from {path}.')
            return 0
        where = ""
        config = self.sdk.load_mcp_config(
            self.agent, self.cwd, project_dirs=self.sdk.project_dir_names(self.agent)
        )
        other = next((s for s in config.servers if s.name == name and s.scope != scope), None)
        if other is not None:
            flag = "use --local" if other.scope == "project" else "leave out --local"
            where = f" It is defined in {other.source} ({flag})."
        self.err(f'No {scope} MCP server named "{name}" in {path}.{where}')
        return 1

    def list(self, args: Sequence[str]) -> int:
        """``list``: connect and report; 1 when an entry is invalid or a server failed."""
        parsed = parse_options(args, {"json": "flag"})
        if parsed.positional:
            raise UsageError(f"Usage: pitrio mcp list [--json]\n{HINT}")
        trusted = self.sdk.project_trusted(self.agent, self.cwd)
        config = self.sdk.load_mcp_config(
            self.agent,
            self.cwd,
            project=trusted,
            project_dirs=self.sdk.project_dir_names(self.agent),
        )
        project_file = self.project_file()
        note = None
        if not trusted and project_file.exists():
            note = f"{project_file} is ignored: the project is not trusted."
        reports = trio.run(self.sdk.check_servers, config.servers, self.cwd)
        failed = bool(config.problems) or any(
            r.state not in ("connected", "disabled") for r in reports
        )
        if "json" in parsed.values:
            payload: dict[str, Any] = {
                "servers": [report.to_json() for report in reports],
                "errors": list(config.problems),
                **({"note": note} if note else {}),
            }
            self.out(json.dumps(payload, indent=2, ensure_ascii=False))
            return 1 if failed else 0
        if not reports and not config.problems:
            self.out(
                f"No MCP servers configured (add them to {self.sdk.user_config_file(self.agent)})."
            )
        for report in reports:
            self._print_report(report)
        for problem in config.problems:
            self.out(f"config error: {problem}")
        if note:
            self.out(note)
        return 1 if failed else 0

    def _print_report(self, report: Any) -> None:
        count = len(report.tools)
        state = f"connected, {count} tool{'' if count == 1 else 's'}"
        if report.state != "connected":
            state = "needs sign-in" if report.state == "needs-auth" else report.state
        self.out(f"{report.server.name}: {state} ({report.exposure}, {report.server.scope})")
        self.out(f"  {report.transport()}")
        if report.server.override:
            self.out(f"  project override: {report.server.override}")
        if report.state == "needs-auth":
            self.out(f"  sign in with: pitrio mcp login {report.server.name}")
        overrides = report.tool_overrides()
        if report.tools:
            shown = [f"{t} [{overrides[t]}]" if t in overrides else t for t in report.tools]
            self.out(f"  tools: {', '.join(shown)}")
        if report.resources:
            self.out("  offers resources")
        if report.error:
            self.out("  " + report.error.replace("\n", "\n  "))


def build_parser() -> argparse.ArgumentParser:
    """The commands and options of ``pitrio mcp``, for the completion script only (the
    command parses its arguments itself: a server's command line passes through)."""
    parser = argparse.ArgumentParser(prog="pitrio mcp", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add = commands.add_parser("add", help="add or replace a server")
    add.add_argument("server")
    for option, kind in ADD_OPTIONS.items():
        if kind == "flag":
            add.add_argument(f"--{option}", action="store_true")
        else:
            add.add_argument(f"--{option}")
    remove = commands.add_parser("remove", help="remove a server")
    remove.add_argument("server")
    remove.add_argument("-l", "--local", action="store_true")
    listing = commands.add_parser("list", help="connect each server and report it")
    listing.add_argument("--json", action="store_true")
    return parser


def run_mcp_command(argv: list[str]) -> int:
    """Run ``pitrio mcp <argv...>``; returns the exit code."""
    if not argv or argv[0] == "help" or "--help" in argv or "-h" in argv:
        print(HELP)
        return 0
    from pitrio.sdk.mcp_manage import McpFileError, agent_dir

    def out(line: str) -> None:
        print(line)

    def err(line: str) -> None:
        sys.stderr.write(line + "\n")

    command = McpCommand(agent_dir(), os.getcwd(), out, err)
    name, rest = argv[0], argv[1:]
    try:
        if name == "add":
            return command.add(rest)
        if name == "remove":
            return command.remove(rest)
        if name == "list":
            return command.list(rest)
        if name in ("login", "logout"):
            from pitrio.transports.mcp_login import run_sign_in_command

            return run_sign_in_command(command, name, rest)
        raise UsageError(f'Unknown mcp command "{name}". {HINT}')
    except (UsageError, McpFileError) as exc:
        err(str(exc))
        return 1
