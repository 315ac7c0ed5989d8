"""MCP servers in a session, through real server processes: the third-party time server and
an edge-case server of the tests (tests/actors/mcp/servers/edge.py)."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import trio

from pitrio.messages.content import ImageContent, TextContent
from tests.actors.mcp.servers.edge import PNG
from tests.actors.mcp.support import (
    KILL_SERVER,
    SERVERS,
    edge_server,
    forked,
    mcp_session,
    text,
    time_server,
    wait_for,
)


async def test_the_time_servers_tools_are_agent_tools_and_answer(tmp_path: Path) -> None:
    async with mcp_session(tmp_path, {"time": time_server()}) as s:
        names = [tool.name for tool in await s.started.tools.active_tools()]
        assert "mcp__time__get_current_time" in names and "mcp__time__convert_time" in names
        (tool,) = [
            t for t in await s.started.tools.active_tools() if t.name == "mcp__time__convert_time"
        ]
        assert tool.parameters["required"] == ["source_timezone", "time", "target_timezone"]
        await s.started.session.prompt('<<mcp__time__get_current_time {"timezone": "UTC"}>>')
        result = await s.last_result()
        assert not result.is_error, text(result)
        answer = json.loads(text(result))
        assert answer["timezone"] == "UTC" and answer["datetime"].endswith("+00:00")
        assert result.details == {"server": "time", "tool": "get_current_time"}
        # The server's own error (an unknown zone) is an error result with its words.
        await s.started.session.prompt('<<mcp__time__get_current_time {"timezone": "Nowhere/X"}>>')
        result = await s.last_result()
        assert result.is_error
        assert "Nowhere/X" in text(result)
        assert await s.server("time") == {
            "name": "time",
            "status": "running",
            "tools": ["get_current_time", "convert_time"],
        }


async def test_abort_cancels_parallel_slow_calls_on_the_server(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    async with mcp_session(tmp_path, {"edge": edge_server(markers)}) as s:
        prompt = 'PARALLEL <<mcp__edge__slow {"label": "a"}>> <<mcp__edge__slow {"label": "b"}>>'
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.started.session.prompt, prompt)
            # Both calls are running on the server at once: a parallel batch.
            await wait_for(
                lambda: (
                    (markers / "slow-a.started").exists() and (markers / "slow-b.started").exists()
                ),
                "both slow calls to start",
            )
            await s.started.session.abort()
        results = await s.tool_results()
        assert [(r.tool_name, r.is_error, text(r)) for r in results] == [
            ("mcp__edge__slow", True, "Operation aborted"),
            ("mcp__edge__slow", True, "Operation aborted"),
        ]
        # The server was told (notifications/cancelled) and its handlers were cancelled.
        await wait_for(
            lambda: (
                (markers / "slow-a.cancelled").exists() and (markers / "slow-b.cancelled").exists()
            ),
            "the server to see both cancellations",
        )
        assert (await s.server("edge"))["status"] == "running"


async def test_a_crashing_server_is_an_error_naming_it_then_restarts(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    async with mcp_session(tmp_path, {"edge": edge_server(markers)}) as s:
        await s.started.session.prompt('<<mcp__edge__crash {"message": "boom"}>>')
        result = await s.last_result()
        assert result.is_error
        assert text(result).startswith("MCP server edge exited (stderr: ")
        assert "edge server dying: boom" in text(result)
        state = await s.server("edge")
        assert state["status"] == "exited" and "boom" in state["error"]
        # The session still answers.
        await s.started.session.prompt("are you there?")
        assert await s.started.session.last_assistant_text() == "You said: are you there?"
        # The next use starts the server again.
        await s.started.session.prompt('<<mcp__edge__typed {"count": 2, "name": "ab"}>>')
        result = await s.last_result()
        assert (result.is_error, text(result)) == (False, "abab")
        assert len((markers / "starts").read_text().splitlines()) == 2
        assert (await s.server("edge"))["status"] == "running"


async def test_a_large_result_keeps_its_ends_and_its_whole_text_in_a_file(tmp_path: Path) -> None:
    async with mcp_session(tmp_path, {"edge": edge_server(tmp_path / "m")}) as s:
        # ~2 MB from the server
        await s.started.session.prompt('<<mcp__edge__big {"lines": 20000}>>')
        result = await s.last_result()
        assert not result.is_error
        (part,) = result.content
        assert isinstance(part, TextContent) and len(part.text.encode()) < 21 * 1024
        assert "\n000000 " + "x" * 93 + "\n000001 " in part.text
        assert "019999 " + "x" * 93 + "\n\n[Full output: " in part.text
        full = trio.Path(result.details["fullOutputPath"])
        try:
            whole = "\n".join(f"{n:06d} " + "x" * 93 for n in range(20000))
            assert await full.read_text() == whole
            assert (await full.stat()).st_mode & 0o777 == 0o600
        finally:
            await full.unlink()


async def test_an_image_result_is_an_image_part(tmp_path: Path) -> None:
    async with mcp_session(tmp_path, {"edge": edge_server(tmp_path / "m")}) as s:
        await s.started.session.prompt("<<mcp__edge__picture {}>>")
        result = await s.last_result()
        assert result.content == (
            ImageContent(data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        )


async def test_arguments_are_checked_against_the_servers_schema(tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    async with mcp_session(tmp_path, {"edge": edge_server(markers)}) as s:
        await s.started.session.prompt('<<mcp__edge__typed {"count": "many"}>>')
        result = await s.last_result()
        assert result.is_error
        assert text(result).startswith('Validation failed for tool "mcp__edge__typed":\n')
        assert "name: missing" in text(result)  # pi 1.6.0 (pi-schema) wording
        assert not (markers / "typed.called").exists()  # never reached the server
        # A loose scalar is converted as for the built-in tools.
        await s.started.session.prompt('<<mcp__edge__typed {"count": "3", "name": "z"}>>')
        assert text(await s.last_result()) == "zzz"
        # A tool's own failure carries its message.
        await s.started.session.prompt("<<mcp__edge__fail {}>>")
        result = await s.last_result()
        assert (result.is_error, text(result)) == (
            True,
            "Error executing tool fail: the edge server refuses",
        )


async def test_a_server_that_cannot_start_is_a_warning_and_a_failed_status(
    tmp_path: Path,
) -> None:
    missing = str(tmp_path / "no-such-server")
    dying = {"command": "python3", "args": ["-c", "import sys; sys.stderr.write('no config\\n')"]}
    async with mcp_session(
        tmp_path, {"gone": {"command": missing}, "dying": dying, "time": time_server()}
    ) as s:
        # The servers connect in the background (pi 1.6.0): the problems are the tool set's,
        # told to the clients once every server's first start has ended.
        notices = s.started.mcp.problems
        assert f"MCP server gone failed to start: No such file or directory: {missing}" in notices
        (dying_notice,) = [n for n in notices if "dying" in n]
        assert dying_notice.startswith("MCP server dying failed to start: ")
        assert dying_notice.endswith("(stderr: no config)")
        assert (await s.server("gone"))["status"] == "failed"
        assert (await s.server("time"))["status"] == "running"
        names = [tool.name for tool in await s.started.tools.active_tools()]
        assert not any(name.startswith(("mcp__gone__", "mcp__dying__")) for name in names)


async def _http_server(port_file: Path, port: int = 0) -> trio.Process:
    process = await trio.lowlevel.open_process(
        [sys.executable, *forked(str(SERVERS / "http_edge.py"), str(port_file), str(port))]
    )
    await wait_for(port_file.exists, "the HTTP server to listen")
    return process


async def _stop(process: trio.Process) -> None:
    process.send_signal(KILL_SERVER)
    with trio.CancelScope(shield=True):
        await process.wait()


async def test_a_streamable_http_server_with_headers_gone_and_back(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    process = await _http_server(port_file)
    try:
        port = int(port_file.read_text())
        remote = {
            "url": f"http://127.0.0.1:{port}/mcp",
            "headers": {"Authorization": "!echo Bearer t0ken"},  # a !command value
            "exposure": "direct",
        }
        async with mcp_session(tmp_path, {"remote": remote}) as s:
            await s.started.session.prompt("<<mcp__remote__whoami {}>>")
            result = await s.last_result()
            why = s.started.notices
            assert (result.is_error, text(result)) == (False, "auth=Bearer t0ken"), why
            assert (await s.server("remote"))["status"] == "running"
            # The server goes away: an error naming it, then a reconnect once it is back.
            await _stop(process)
            await s.started.session.prompt("<<mcp__remote__whoami {}>>")
            result = await s.last_result()
            assert result.is_error and text(result).startswith("MCP server remote"), text(result)
            state = await s.server("remote")
            assert state["status"] == "exited" and state["error"] == text(result)
            process = await _http_server(tmp_path / "port-again", port)
            await s.started.session.prompt("<<mcp__remote__whoami {}>>")
            result = await s.last_result()
            assert (result.is_error, text(result)) == (False, "auth=Bearer t0ken")
    finally:
        await _stop(process)
