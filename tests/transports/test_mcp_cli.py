"""``pitrio mcp``'s command line (the whole command against real pi:
tests/interop/test_pi_mcp_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pitrio.transports.mcp_cli import (
    ADD_OPTIONS,
    McpCommand,
    UsageError,
    build_entry,
    parse_options,
)


def test_options_end_at_the_servers_command_so_its_own_pass_through() -> None:
    parsed = parse_options(["srv", "-l", "npx", "--yes", "--url", "x"], ADD_OPTIONS, 2)
    assert parsed.positional == ["srv", "npx", "--yes", "--url", "x"]
    assert parsed.values == {"local": True}
    parsed = parse_options(["srv", "--env", "A=1", "--env", "B=2", "--", "cmd"], ADD_OPTIONS, 2)
    assert (parsed.positional, parsed.lists) == (["srv", "cmd"], {"env": ["A=1", "B=2"]})
    with pytest.raises(UsageError, match="Unknown option --nope"):
        parse_options(["srv", "--nope"], ADD_OPTIONS, 2)
    with pytest.raises(UsageError, match="--url needs a value"):
        parse_options(["srv", "--url"], ADD_OPTIONS, 2)


def test_entries_as_pi_mcp_add_writes_them() -> None:
    http = parse_options(
        [
            "d",
            "--url",
            "https://h/mcp",
            "--bearer-token-env-var",
            "TOK",
            "--oauth-callback-port",
            "8765",
        ],
        ADD_OPTIONS,
        2,
    )
    assert build_entry(http) == {
        "url": "https://h/mcp",
        "headers": {"Authorization": "Bearer ${TOK}"},
        "oauth": {"callbackPort": 8765},
    }
    stdio = parse_options(
        ["t", "--exposure", "direct", "--cwd", "sub", "--", "uvx", "tool", "-v"], ADD_OPTIONS, 2
    )
    assert build_entry(stdio) == {
        "command": "uvx",
        "args": ["tool", "-v"],
        "cwd": "sub",
        "exposure": "direct",
    }
    with pytest.raises(UsageError, match="--header is only for HTTP servers"):
        build_entry(parse_options(["t", "--header", "A=1", "--", "x"], ADD_OPTIONS, 2))
    with pytest.raises(UsageError, match="--env takes KEY=VALUE"):
        build_entry(parse_options(["t", "--env", "A", "--", "x"], ADD_OPTIONS, 2))


def test_add_keeps_the_rest_of_the_file_and_its_indentation(tmp_path: Path) -> None:
    agent, work = tmp_path / "agent", tmp_path / "work"
    agent.mkdir()
    work.mkdir()
    (agent / "mcp.json").write_text(
        '{\n\t"other": 1,\n\t"mcpServers": {"a": {"command": "x"}}\n}\n'
    )
    out: list[str] = []
    command = McpCommand(agent, str(work), out.append, out.append)
    assert command.add(["b", "--", "y", "--flag"]) == 0
    text = (agent / "mcp.json").read_text()
    assert text.startswith('{\n\t"other": 1,\n\t"mcpServers": {\n\t\t"a"')
    assert json.loads(text)["mcpServers"]["b"] == {"command": "y", "args": ["--flag"]}
    assert command.add(["b", "--", "z"]) == 0 and out[-2].startswith(
        'Replaced global MCP server "b"'
    )
    assert command.remove(["b"]) == 0 and command.remove(["b"]) == 1
    assert list(json.loads((agent / "mcp.json").read_text())["mcpServers"]) == ["a"]


def test_the_commands_sdk_loads_the_mcp_sdk_only_for_sign_in_names() -> None:
    # `pitrio mcp add` and `remove` edit a file: the MCP SDK (~0.45 s) is not theirs to load.
    probe = (
        "import json, sys\n"
        "from pitrio.sdk import mcp_manage\n"
        "before = 'mcp' in sys.modules\n"
        "mcp_manage.parse_server, mcp_manage.add_server, mcp_manage.remove_server\n"
        "editing = 'mcp' in sys.modules\n"
        "from pitrio.sdk.mcp_manage import sign_in, describe\n"
        "print(json.dumps([before, editing, 'mcp' in sys.modules, callable(sign_in)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, False, True, True]
