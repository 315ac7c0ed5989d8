"""mcpServers configuration: the format, merging by name, limits, variables, files."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson
import pytest

from pitrio.actors.mcp import config as mcp_config
from pitrio.actors.mcp.config import (
    McpConfigError,
    McpConfigFlag,
    TimeLimits,
    expand,
    limits_from_settings,
    load_mcp_config,
    parse_servers,
)


def test_stdio_and_http_entries_in_claude_desktops_format() -> None:
    data = {
        "mcpServers": {
            "files": {"command": "npx", "args": ["-y", "server", "/tmp"], "env": {"A": "1"}},
            "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer t"}},
            "typed": {"type": "streamable-http", "url": "http://127.0.0.1:9/x"},
        }
    }
    found, problems = parse_servers(data, "f.json", environ={})
    assert problems == []
    files, remote, typed = found["files"], found["remote"], found["typed"]
    assert files is not None and remote is not None and typed is not None
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


def test_a_bad_entry_is_a_problem_naming_file_and_server_and_only_it_is_left_out() -> None:
    data = {
        "mcpServers": {
            "ok": {"command": "x"},
            "nocommand": {"args": []},
            "badargs": {"command": "x", "args": "no"},
            "sse": {"type": "sse", "url": "http://h"},
            "slowstart": {"command": "x", "startupTimeoutMs": -1},
            "off": {"command": "x", "disabled": True},
        }
    }
    found, problems = parse_servers(data, "f.json", environ={})
    assert list(found) == ["ok", "off"] and found["off"] is None
    assert problems == [
        "f.json: MCP server nocommand: command must be a non-empty string",
        "f.json: MCP server badargs: args must be a list of strings",
        "f.json: MCP server sse: type 'sse' is not supported (stdio or http)",
        "f.json: MCP server slowstart: startupTimeoutMs must be a positive number of milliseconds",
    ]
    assert parse_servers([], "g.json")[1] == [
        "g.json: must be a JSON object with an mcpServers object"
    ]
    assert parse_servers({"mcpServers": 3}, "g.json")[1] == ["g.json: mcpServers must be an object"]


def test_variables_expand_from_the_environment() -> None:
    environ = {"TOKEN": "s3cret", "EMPTY": ""}
    assert expand("Bearer ${TOKEN}", environ) == "Bearer s3cret"
    assert expand("${MISSING}|${MISSING:-dflt}|${EMPTY:-e}", environ) == "|dflt|e"
    found, _ = parse_servers(
        {
            "mcpServers": {
                "s": {"command": "${TOKEN}", "args": ["${TOKEN}"], "env": {"K": "${TOKEN}"}}
            }
        },
        "f",
        environ=environ,
    )
    server = found["s"]
    assert server is not None
    assert (server.command, server.args, dict(server.env)) == (
        "s3cret",
        ("s3cret",),
        {"K": "s3cret"},
    )


def test_time_limits_come_from_settings_and_entries_override_them() -> None:
    limits = limits_from_settings({"startupTimeoutMs": 5000, "callTimeoutMs": 0})
    assert limits == TimeLimits(startup_ms=5000, call_ms=mcp_config.DEFAULT_CALL_TIMEOUT_MS)
    assert limits_from_settings("nonsense") == TimeLimits()
    found, _ = parse_servers(
        {"mcpServers": {"a": {"command": "x"}, "b": {"command": "x", "callTimeoutMs": 1500}}},
        "f",
        limits,
    )
    a, b = found["a"], found["b"]
    assert a is not None and b is not None
    assert (a.startup_timeout, a.call_timeout) == (5.0, 300.0)
    assert b.call_timeout == 1.5


def _write(path: Path, servers: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({"mcpServers": servers}))


def test_files_merge_by_name_agent_dir_then_project_then_command_line(tmp_path: Path) -> None:
    agent, cwd = tmp_path / "agent", tmp_path / "work"
    _write(agent / "mcp.json", {"a": {"command": "agent-a"}, "b": {"command": "agent-b"}})
    _write(cwd / ".pitrio" / "mcp.json", {"b": {"command": "project-b"}, "c": {"command": "c"}})
    _write(tmp_path / "extra.json", {"c": {"disabled": True}, "d": {"url": "http://h/mcp"}})
    config = load_mcp_config(agent, str(cwd), [str(tmp_path / "extra.json")], environ={})
    assert config.problems == ()
    assert [(s.name, s.command or s.url) for s in config.servers] == [
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
