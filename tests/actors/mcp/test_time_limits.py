"""The start-up and per-call time limits, on a mock clock moved by hand once the server is
seen (from its marker files) to be in the state the limit is about.

The clock runs at real speed otherwise (``rate = 1``): the SDK's stdio shutdown waits for the
process by polling the clock.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.actors.mcp.support import McpSession, edge_server, mcp_session, text, wait_for

# Writes its marker, then never answers the handshake.
HANG = "import pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text('up'); time.sleep(600)"


async def test_a_server_that_never_answers_fails_at_its_start_up_limit(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    marker = tmp_path / "hang.up"
    hang: dict[str, Any] = {
        "command": sys.executable,
        "args": ["-c", HANG, str(marker)],
        "startupTimeoutMs": 1_000_000,
    }
    servers = {"hang": hang, "edge": edge_server(tmp_path / "m", startupTimeoutMs=1_000_000)}
    ready = trio.Event()
    found: list[McpSession] = []

    async def start() -> None:
        async with mcp_session(tmp_path, servers, start_limit=math.inf) as s:
            found.append(s)
            ready.set()
            await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(start)
        await wait_for(marker.exists, "the hanging server to be spawned")
        await wait_for(lambda: (tmp_path / "m" / "starts").exists(), "the edge server")
        assert not ready.is_set()  # mcp_session waits for the servers' first starts
        mock_clock.jump(1001)
        with trio.fail_after(1060):
            await ready.wait()
        (s,) = found
        assert (
            "MCP server hang failed to start: it did not start within 1000 s"
            in s.started.mcp.problems
        )
        assert (await s.server("hang"))["status"] == "failed"
        nursery.cancel_scope.cancel()


async def test_a_call_past_its_limit_is_cancelled_and_an_error_naming_the_server(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1
    markers = tmp_path / "markers"
    edge = edge_server(markers, callTimeoutMs=1_000_000)
    async with mcp_session(tmp_path, {"edge": edge}) as s:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(s.started.session.prompt, '<<mcp__edge__slow {"label": "t"}>>')
            await wait_for((markers / "slow-t.started").exists, "the slow call to start")
            mock_clock.jump(1001)
        result = (await s.tool_results())[-1]
        assert (result.is_error, text(result)) == (
            True,
            "MCP server edge: slow did not finish within 1000 s (cancelled)",
        )
        await wait_for((markers / "slow-t.cancelled").exists, "the server to see the cancel")
        # A slow call is not a dead server: it stays up for the next call.
        assert (await s.server("edge"))["status"] == "running"
        await s.started.session.prompt('<<mcp__edge__typed {"count": 1, "name": "ok"}>>')
        assert text((await s.tool_results())[-1]) == "ok"
        assert len((markers / "starts").read_text().splitlines()) == 1
