"""MCP tools of 1.6.0's default exposure (``codemode``) reached from a codemode script in a
session: the mock model calls ``codemode``, the script calls the time server and ``read``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from pitrio.messages.events import ToolExecutionStart
from tests.actors.mcp.support import WAIT, mcp_session, text, time_server

SCRIPT = (
    "const [a, b] = await Promise.all([\n"
    "  tools.mcp__time__get_current_time({timezone: 'UTC'}),\n"
    "  tools.read({path: 'hello.txt'}),\n"
    "]);\n"
    "return {zone: JSON.parse(a.content[0].text).timezone, b}"
)


def default_time() -> dict[str, Any]:
    entry = time_server()
    del entry["exposure"]  # 1.6.0's default: codemode
    return entry


async def test_codemode_reaches_default_exposure_tools_and_reports_nested_calls(
    tmp_path: Path,
) -> None:
    async with mcp_session(tmp_path, {"time": default_time()}) as s:
        active = {tool.name: tool for tool in await s.started.tools.active_tools()}
        assert "codemode" in active  # activated for the server, as autoEnableCodemode says
        assert not any(name.startswith("mcp__time__") for name in active)
        listing = active["codemode"].description
        assert "## mcp__time" in listing and "### `mcp__time__get_current_time`" in listing
        assert "From codemode: `await tools.read(args)`" in active["read"].description
        (s.root / "work" / "hello.txt").write_text("hello there")
        feed = await s.started.session.subscribe(capacity=1024)
        await s.started.session.prompt("<<codemode " + json.dumps({"code": SCRIPT}) + ">>")
        events: list[Any] = []
        with trio.fail_after(WAIT):
            while not events or events[-1].type != "agent_end":
                events.append((await feed.receive()).event)
        result = await s.last_result()
        assert not result.is_error, text(result)
        assert text(result).endswith('Output:\n{"zone":"UTC","b":"hello there"}')
        nested = result.nested_calls
        assert nested is not None and nested.complete
        assert sorted(call.name for call in nested.calls) == [
            "mcp__time__get_current_time",
            "read",
        ]
        starts = [e for e in events if isinstance(e, ToolExecutionStart)]
        parents = {e.tool_name: e.parent_tool_call_id for e in starts}
        assert parents["codemode"] is None
        assert parents["read"] == parents["mcp__time__get_current_time"] == result.tool_call_id


async def test_without_auto_enable_the_tools_are_unreachable_and_said_so(tmp_path: Path) -> None:
    config = {"time": default_time()}
    async with mcp_session(tmp_path, config, top={"autoEnableCodemode": False}) as s:
        names = [tool.name for tool in await s.started.tools.active_tools()]
        assert "codemode" not in names
        assert any("neither is active" in notice for notice in s.started.notices)


async def test_hostile_scripts_fail_and_the_session_stays_usable(tmp_path: Path) -> None:
    scripts = [
        ('// @options: {"timeout_ms": 1500}\nwhile (true) {}', "Script timed out:"),
        ("return 'x'.repeat(1 << 30).length", "RangeError"),
        ("await tools.nope({})", "tools.nope does not exist"),
        ("throw new Error('thrown on purpose')", "Error: thrown on purpose"),
        ("return 2 + 2", None),
    ]
    async with mcp_session(tmp_path, {}, tool_patterns=("+codemode",)) as s:
        for code, expected in scripts:
            await s.started.session.prompt("<<codemode " + json.dumps({"code": code}) + ">>")
            result = await s.last_result()
            if expected is None:
                assert not result.is_error and text(result).endswith("Output:\n4")
            else:
                assert result.is_error and text(result).startswith("Script failed"), text(result)
                assert expected in text(result), text(result)
