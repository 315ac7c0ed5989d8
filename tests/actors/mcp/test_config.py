"""mcpServers configuration: the format, merging by name, limits, variables, files."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.mcp import config as mcp_config
from pitrio.actors.mcp.config import (
    McpConfigError,
    McpConfigFlag,
    TimeLimits,
    expand_home,
    limits_from_settings,
    load_mcp_config,
    merge_files,
    parse_file,
    parse_server,
)
from pitrio.actors.mcp.oauth_settings import loopback
from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.mcp.values import resolve_value, resolve_values


def test_stdio_and_http_entries_in_the_shared_mcpservers_format() -> None:
    data = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server", "/tmp"], "env": {"A": "1"}},
            "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
            "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/x"},
        }
    }
    config = parse_file(data, "f.json")
    assert config.problems == ()
    files, remote, typed = config.servers
    assert (files.transport, files.command, files.args) == (
        "stdio",
        "npx",
        ("-y", "server", "/tmp"),
    )
    assert dict(files.env) == {"A": "1"}
    assert (remote.transport, remote.url) == ("http", "http://127.0.0.1:9/mcp")
    assert dict(remote.headers) == {"Authorization": "Bearer t"}
    assert typed.transport == "http"
    assert (files.startup_timeout, files.call_timeout) == (30.0, 300.0)
    assert (files.enabled, files.exposure, files.tool_exposure, files.description) == (
        True,
        None,
        (),
        None,
    )


def test_pi_fields_exposure_tool_exposure_description_timeout_enabled() -> None:
    data = {
        "autoEnableCodemode": False,
        "mcpServers": {
            "gh": {
                "url": "https://h/mcp",
                "exposure": "codemode-deferred",
                "toolExposure": {"search_code": "direct", "delete_*": "hidden"},
                "description": "GitHub",
                "timeout": 5,
                "enabled": False,
            }
        },
    }
    config = parse_file(data, "f.json")
    (gh,) = config.servers
    assert config.auto_enable_codemode is False and config.enabled == ()
    assert gh.exposure == "codemode" and gh.enabled is False and gh.description == "GitHub"
    assert gh.tool_exposure == (("search_code", "direct"), ("delete_*", "hidden"))
    assert (gh.startup_timeout, gh.call_timeout) == (5.0, 5.0)


def test_a_bad_entry_is_a_problem_naming_file_and_server_and_only_it_is_left_out() -> None:
    data = {
        "mcpServers": {
            "ok": {"command": "x"},
            "nocommand": {"args": []},
            "badargs": {"command": "x", "args": "no"},
            "sse": {"type": "sse", "url": "http://h"},
            "slowstart": {"command": "x", "startupTimeoutMs": -1},
            "bad name": {"command": "x"},
            "badexp": {"command": "x", "exposure": "loud"},
            "badtime": {"command": "x", "timeout": 0},
            "ftp": {"url": "ftp://h/x"},
            "off": {"command": "x", "disabled": True},
        },
        "autoEnableCodemode": "yes",
    }
    config = parse_file(data, "f.json")
    assert [s.name for s in config.servers] == ["ok", "off"]
    assert [s.name for s in config.enabled] == ["ok"]
    assert config.problems == (
        "f.json: autoEnableCodemode must be true or false",
        'f.json: MCP server nocommand: needs "command" (a stdio server) or "url" (a '
        "streamable-HTTP server)",
        "f.json: MCP server badargs: args must be a list of strings",
        "f.json: MCP server sse: the SSE transport is not supported (use its streamable-HTTP URL)",
        "f.json: MCP server slowstart: startupTimeoutMs must be a positive number of milliseconds",
        "f.json: MCP server bad name: a server name may only have letters, digits, '_' and '-'",
        "f.json: MCP server badexp: exposure must be one of codemode, deferred, direct, hidden",
        "f.json: MCP server badtime: timeout must be a positive number of seconds",
        "f.json: MCP server ftp: url must be an http or https URL",
    )
    assert parse_file([], "g.json").problems == (
        "g.json: must be a JSON object with an mcpServers object",
    )


def test_names_differing_only_in_dash_and_underscore_clash() -> None:
    config = parse_file({"mcpServers": {"a-b": {"command": "x"}, "a_b": {"command": "y"}}}, "f")
    assert [s.name for s in config.servers] == ["a-b"]
    assert config.problems == (
        "f: MCP server a_b: its name clashes with server a-b ('-' and '_' are the same)",
    )


def test_a_project_override_changes_only_enabled_and_exposure() -> None:
    user = {"mcpServers": {"t": {"url": "http://h/mcp", "headers": {"K": "${SECRET}"}}}}
    project = {
        "mcpServers": {
            "t": {"enabled": False, "exposure": "direct"},
            "u": {"enabled": False},
            "v": {"exposure": "direct"},
        }
    }
    config = merge_files([(user, "user.json", "global"), (project, "p.json", "project")])
    (t,) = config.servers
    assert (t.enabled, t.exposure, dict(t.headers), t.source, t.override) == (
        False,
        "direct",
        {"K": "${SECRET}"},
        "user.json",
        "p.json",
    )
    assert config.problems == (
        'p.json: MCP server u: needs "command" or "url", or an earlier server to override',
        'p.json: MCP server v: needs "command" or "url", or an earlier server to override',
    )
    sneaky = {"mcpServers": {"t": {"enabled": True, "headers": {"K": "stolen"}}}}
    config = merge_files([(user, "user.json", "global"), (sneaky, "p.json", "project")])
    assert config.problems == (
        "p.json: MCP server t: an override may only set enabled, exposure, toolExposure",
    )
    assert dict(config.servers[0].headers) == {"K": "${SECRET}"}


def test_time_limits_come_from_settings_and_entries_override_them() -> None:
    limits = limits_from_settings({"startupTimeoutMs": 5000, "callTimeoutMs": 0})
    assert limits == TimeLimits(startup_ms=5000, call_ms=mcp_config.DEFAULT_CALL_TIMEOUT_MS)
    assert limits_from_settings("nonsense") == TimeLimits()
    config = parse_file(
        {"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "callTimeoutMs": 1500}}},
        "f",
        limits=limits,
    )
    a, b = config.servers
    assert (a.startup_timeout, a.call_timeout) == (5.0, 300.0)
    assert b.call_timeout == 1.5


def _write(path: Path, servers: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({"mcpServers": servers}))


def test_files_merge_by_name_agent_dir_then_project_then_command_line(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    _write(agent / "mcp.json", {"a": {"command": "agent-a"}, "b": {"command": "agent-b"}})
    _write(cwd / ".pitrio" / "mcp.json", {"b": {"command": "project-b"}, "c": {"command": "c"}})
    _write(tmp_path / "extra.json", {"c": {"enabled": False}, "d": {"url": "http://h/mcp"}})
    config = load_mcp_config(agent, str(cwd), [str(tmp_path / "extra.json")])
    assert config.problems == ()
    assert [s.scope for s in config.servers] == ["global", "project", "project", "cli"]
    assert [(s.name, s.command or s.url) for s in config.enabled] == [
        ("a", "agent-a"),
        ("b", "project-b"),
        ("d", "http://h/mcp"),
    ]


def test_a_broken_discovered_file_is_a_problem_a_named_one_an_error(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    (agent / "mcp.json").write_text("{not json")
    config = load_mcp_config(agent, str(cwd))
    assert config.servers == ()
    (problem,) = config.problems
    assert problem.startswith(f"{agent / 'mcp.json'}: not valid JSON")
    with pytest.raises(McpConfigError, match=r"MCP config file not found: .*missing\.json"):
        load_mcp_config(agent, str(cwd), [str(tmp_path / "missing.json")])
    (tmp_path / "bad.json").write_text("[")
    with pytest.raises(McpConfigError, match=r"bad\.json is not valid JSON"):
        load_mcp_config(agent, str(cwd), [str(tmp_path / "bad.json")])


def test_the_command_line_flag_records_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_config, "_CLI_FILES", [])
    monkeypatch.chdir(tmp_path)
    parser = argparse.ArgumentParser()
    parser.add_argument("--mcp-config", action=McpConfigFlag)
    args = parser.parse_args(["--mcp-config", "one.json", "--mcp-config", "/abs/two.json"])
    assert args.mcp_config == ["one.json", "/abs/two.json"]
    assert mcp_config.cli_config_files() == (str(tmp_path / "one.json"), "/abs/two.json")


async def test_env_and_header_values_are_templates_or_commands() -> None:
    environ = {"TOKEN": "s3cret", "EMPTY": ""}
    assert await resolve_value("Bearer ${TOKEN}", "h", environ) == "Bearer s3cret"
    assert await resolve_value("!printf ' out \\n'", "h", environ) == "out"
    with pytest.raises(
        McpServerError, match=r"^Failed to resolve h from environment variable: EMPTY$"
    ):
        await resolve_value("${EMPTY}", "h", environ)
    with pytest.raises(McpServerError, match=r"^Failed to resolve e from shell command: exit 3$"):
        await resolve_value("!exit 3", "e", environ)
    resolved = await resolve_values({"A": "$TOKEN", "B": "plain"}, "MCP server x env", environ)
    assert resolved == {"A": "s3cret", "B": "plain"}


def test_home_is_expanded_in_commands_and_cwd() -> None:
    assert expand_home("~/bin/x", "/home/u") == "/home/u/bin/x"
    assert expand_home("~", "/home/u") == "/home/u"
    assert expand_home("a~/b", "/home/u") == "a~/b"


def test_a_clients_servers_come_last_and_keep_their_values_as_given(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    _write(agent / "mcp.json", {"a": {"command": "agent-a", "env": {"K": "${HOME}"}}})
    client = {
        "mcpServers": {
            "a": {"command": "~/editor-a", "env": {"K": "${HOME}"}},
            "h": {"type": "http", "url": "http://h/mcp", "headers": {"X": "!echo no"}},
        }
    }
    config = load_mcp_config(agent, str(cwd), client=(client, "the client"))
    assert config.problems == ()
    assert [(s.name, s.scope, s.source, s.literal) for s in config.servers] == [
        ("a", "client", "the client", True),
        ("h", "client", "the client", True),
    ]
    assert config.servers[0].command == "~/editor-a"
    assert dict(config.servers[1].headers) == {"X": "!echo no"}
    alone = load_mcp_config(agent, str(cwd))
    assert [(s.scope, s.literal) for s in alone.servers] == [("global", False)]


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ([], "oauth must be an object"),
        ({"clientId": 1}, "oauth.clientId must be a string"),
        ({"callbackPort": 0}, "oauth.callbackPort must be a port number"),
        ({"callbackPort": True}, "oauth.callbackPort must be a port number"),
        (
            {"callbackUrl": "http://example.com/callback"},
            "oauth.callbackUrl must be an http URI on localhost, 127.0.0.1, or [::1] "
            "without query or fragment",
        ),
        (
            {"callbackUrl": "http://127.0.0.1/cb?x=1"},
            "oauth.callbackUrl must be an http URI",
        ),
        (
            {"callbackUrl": "http://127.0.0.1:8000/cb", "callbackPort": 9000},
            "oauth.callbackUrl and oauth.callbackPort name different ports",
        ),
        ({"clientName": " "}, "oauth.clientName must be a non-empty string"),
        ({"clientRegistration": "x"}, 'oauth.clientRegistration must be "auto", "dcr", or "cimd"'),
        (
            {"clientRegistration": "cimd", "clientId": "a"},
            'oauth.clientRegistration "cimd" cannot be combined with oauth.clientId',
        ),
        (
            {"clientRegistration": "cimd", "callbackUrl": "http://[::1]:8/callback"},
            'oauth.clientRegistration "cimd" requires oauth.callbackUrl on localhost',
        ),
        (
            {"authServerMetadataUrl": "http://example.com/.well-known/openid-configuration"},
            "oauth.authServerMetadataUrl must be an https URL, or http on localhost",
        ),
    ],
)
def test_oauth_settings_are_checked_as_pi_checks_them(oauth: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_server("remote", {"url": "https://mcp.example.com/mcp", "oauth": oauth}, "test")


def test_valid_oauth_settings_are_accepted() -> None:
    for oauth in (
        {"clientId": "a", "clientSecret": "${S}", "callbackPort": 8765, "scope": "a b"},
        {"callbackUrl": "http://localhost:8765/callback", "callbackPort": 8765},
        {"callbackUrl": "http://[::1]/back", "clientRegistration": "dcr"},
        {"clientRegistration": "cimd", "callbackUrl": "http://localhost/callback"},
        {"authServerMetadataUrl": "https://example.okta.com/.well-known/openid-configuration"},
        {"authServerMetadataUrl": "http://127.0.0.1:9/.well-known/oauth-authorization-server"},
    ):
        parse_server("remote", {"url": "https://mcp.example.com/mcp", "oauth": oauth}, "test")


@pytest.mark.parametrize(
    ("oauth", "bind", "port", "path", "fixed"),
    [
        ({}, "127.0.0.1", None, "/callback", None),
        ({"callbackPort": 8765}, "127.0.0.1", 8765, "/callback", "http://127.0.0.1:8765/callback"),
        ({"callbackUrl": "http://localhost/back"}, "127.0.0.1", None, "/back", None),
        (
            {"callbackUrl": "http://LocalHost:9000/back"},
            "127.0.0.1",
            9000,
            "/back",
            "http://LocalHost:9000/back",  # as written: servers compare it as a string
        ),
        (
            {"callbackUrl": "http://[::1]/cb", "callbackPort": 7},
            "::1",
            7,
            "/cb",
            "http://[::1]:7/cb",
        ),
    ],
)
def test_the_loopback_callback_follows_callback_url_and_port(
    oauth: dict[str, Any], bind: str, port: int | None, path: str, fixed: str | None
) -> None:
    settings = loopback(oauth)
    assert (settings.bind_host, settings.port, settings.path, settings.fixed_redirect) == (
        bind,
        port,
        path,
        fixed,
    )
    if fixed is None:
        assert settings.redirect_for(4321) == f"http://{settings.redirect_host}:4321{path}"


@pytest.mark.parametrize(
    ("entry", "scope", "message"),
    [
        ({"auth": {"provider": ""}}, "global", "auth.provider must be a provider name"),
        ({"auth": "anthropic"}, "global", "auth.provider must be a provider name"),
        (
            {"url": "http://mcp.example.com/mcp", "auth": {"provider": "anthropic"}},
            "global",
            "auth requires an https URL, or http on localhost, 127.0.0.1, or [::1]",
        ),
        ({"auth": {"provider": "anthropic"}}, "project", "auth is only allowed in the global"),
    ],
)
def test_auth_provider_is_checked_as_pi_checks_it(
    entry: dict[str, Any], scope: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_server("remote", {"url": "https://mcp.example.com/mcp", **entry}, "test", scope)
    accepted = parse_server(
        "remote", {"url": "http://127.0.0.1:9/mcp", "auth": {"provider": "anthropic"}}, "test"
    )
    assert accepted.entry["auth"] == {"provider": "anthropic"}
