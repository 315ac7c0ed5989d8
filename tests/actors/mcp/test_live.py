"""MCP servers connecting in the background and changing their tools (pi 1.6.0), through a
real server process whose tool list changes (tests/actors/mcp/servers/changing.py)."""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from pitrio.actors.mcp.live import STILL_CONNECTING
from pitrio.messages.events import ExtensionUiRequest, ToolExecutionStart
from tests.actors.mcp.support import SERVERS, WAIT, McpSession, forked, mcp_session, text

CHANGING = SERVERS / "changing.py"


def changing_server(*args: str, **extra: Any) -> dict[str, Any]:
    """The config entry of the changing server (``direct`` unless ``extra`` says)."""
    return {
        "command": sys.executable,
        "args": forked(str(CHANGING), *args),
        "exposure": "direct",
        **extra,
    }


def declared(s: McpSession) -> list[str]:
    """The MCP tools the latest model request declared."""
    assert s.faux is not None
    return [t.name for t in s.faux.last_request.context.tools if t.name.startswith("mcp__")]


async def open_gate(gate: Path) -> None:
    """Let the gated server go on with its start-up (it reads a line from the FIFO)."""

    def write() -> None:
        with gate.open("w") as fifo:  # blocks until the server has opened its end
            fifo.write("go\n")

    await trio.to_thread.run_sync(write)


async def test_a_server_announcing_new_tools_has_them_declared_from_the_next_request(
    tmp_path: Path,
) -> None:
    async with mcp_session(tmp_path, {"changing": changing_server()}) as s:
        live = s.started.mcp
        assert live.applied == 1  # connected, tools registered
        await s.started.session.prompt('<<mcp__changing__grow {"name": "fresh"}>>')
        assert text(await s.last_result()) == "added fresh"
        # The server announced notifications/tools/list_changed: listed again, applied.
        await live.wait_applied(2)
        assert (await s.server("changing"))["tools"] == ["grow", "shrink", "fresh"]
        await s.started.session.prompt("<<mcp__changing__fresh {}>>")
        assert declared(s) == [
            "mcp__changing__grow",
            "mcp__changing__shrink",
            "mcp__changing__fresh",
        ]
        assert text(await s.last_result()) == "grown fresh"
        # Withdrawn: no longer declared, and unreachable.
        await s.started.session.prompt('<<mcp__changing__shrink {"name": "fresh"}>>')
        await live.wait_applied(3)
        await s.started.session.prompt("<<mcp__changing__fresh {}>>")
        assert declared(s) == ["mcp__changing__grow", "mcp__changing__shrink"]
        result = await s.last_result()
        assert result.is_error and "mcp__changing__fresh" in text(result)
        assert (await s.server("changing"))["tools"] == ["grow", "shrink"]


async def test_deferred_tools_a_server_adds_are_found_by_tool_search(tmp_path: Path) -> None:
    server = changing_server(exposure="deferred", toolExposure={"grow": "direct"})
    async with mcp_session(tmp_path, {"changing": server}) as s:
        live = s.started.mcp
        await s.started.session.prompt('<<mcp__changing__grow {"name": "weather_report"}>>')
        await live.wait_applied(2)
        await s.started.session.prompt('<<tool_search {"query": "weather report"}>>')
        result = await s.last_result()
        assert result.details == {"loaded": ["mcp__changing__weather_report"]}, text(result)
        await s.started.session.prompt("<<mcp__changing__weather_report {}>>")
        assert "mcp__changing__weather_report" in declared(s)
        assert text(await s.last_result()) == "grown weather_report"


async def test_the_session_starts_before_a_slow_server_and_its_first_prompt_waits(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    servers = {"changing": changing_server(str(gate))}
    async with mcp_session(tmp_path, servers, connected=False) as s:
        # Started, and get_state answered, while the server is still connecting.
        assert (await s.server("changing"))["status"] == "starting"
        assert not [t for t in await s.started.tools.active_tools() if t.name.startswith("mcp_")]
        assert s.faux is not None and s.faux.requests == []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.started.session.prompt, "hello")
            await open_gate(gate)
        # The first prompt waited for the server with direct tools: its request has them.
        first = [t.name for t in s.faux.requests[0].context.tools if t.name.startswith("mcp__")]
        assert first == ["mcp__changing__grow", "mcp__changing__shrink"]
        assert (await s.server("changing"))["status"] == "running"


async def test_the_first_prompt_waits_ten_seconds_at_most_then_later_requests_have_the_tools(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1  # real time passes (the model's pacing); the jump passes the 10 s
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    servers = {"changing": changing_server(str(gate))}
    async with mcp_session(tmp_path, servers, connected=False, start_limit=math.inf) as s:
        events = await s.started.session.subscribe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.started.session.prompt, "hello")
            await trio.testing.wait_all_tasks_blocked()  # the run waits for the server
            assert s.faux is not None and s.faux.requests == []
            mock_clock.jump(10)
        assert declared(s) == []  # still connecting: the prompt went on without them
        notice = None
        while notice is None:
            event = (await events.receive()).event
            if isinstance(event, ExtensionUiRequest) and event.method == "notify":
                notice = event
        assert (notice.message, notice.notify_type) == (STILL_CONNECTING, "info")
        await open_gate(gate)
        await s.started.mcp.wait()
        await s.started.session.prompt("again")
        assert declared(s) == ["mcp__changing__grow", "mcp__changing__shrink"]


async def test_a_codemode_script_waits_for_the_server_it_names(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    os.mkfifo(gate)
    servers = {"changing": changing_server(str(gate), exposure="codemode")}
    script = "return (await tools.mcp__changing__grow({name: 'late'})).content[0].text"
    async with mcp_session(tmp_path, servers, connected=False) as s:
        feed = await s.started.session.subscribe(capacity=1024)
        async with trio.open_nursery() as nursery:
            # No direct tools: the prompt does not wait; the script does.
            nursery.start_soon(
                s.started.session.prompt, "<<codemode " + json.dumps({"code": script}) + ">>"
            )
            with trio.fail_after(WAIT):
                while True:
                    event = (await feed.receive()).event
                    if isinstance(event, ToolExecutionStart) and event.tool_name == "codemode":
                        break
            await trio.testing.wait_all_tasks_blocked()
            assert (await s.server("changing"))["status"] == "starting"
            await open_gate(gate)
        result = await s.last_result()
        assert (result.is_error, text(result).endswith("Output:\nadded late")) == (False, True), (
            text(result)
        )
