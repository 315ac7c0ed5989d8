"""The daemon's sessions and connections as observable gauges, and its sessions' runs traced."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from pitrio import telemetry
from tests.telemetry.conftest import Memory
from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    settled,
    until,
)


async def test_the_gauges_count_sessions_and_connections(tmp_path: Path, memory: Memory) -> None:
    agent = tmp_path / "agent"
    with telemetry.using(memory.telemetry):
        async with running_daemon(agent) as daemon:
            session_id = await create_session(daemon)
            async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
                await receive(ws)
                await send(ws, {"id": "p", "type": "prompt", "message": "hello daemon"})
                await until(ws, settled)
                await send(ws, {"id": "s", "type": "get_state"})
                await until(ws, is_response("s"))
                # The SDK's reader collects in a thread of its own; so does this one.
                figures = await trio.to_thread.run_sync(memory.metrics)
            await trio.testing.wait_all_tasks_blocked()
            spans = memory.finished()
        after = await trio.to_thread.run_sync(memory.metrics)
    sessions = {str(a["status"]): v for a, v in figures["pitrio.daemon.sessions"]}
    assert sum(sessions.values()) == 1, sessions
    connections = {str(a["endpoint"]): v for a, v in figures["pitrio.daemon.connections"]}
    assert connections == {"session": 1, "host": 0}
    # The daemon's session was observed like any other.
    run = [s for s in spans if s.name == "invoke_agent pitrio"]
    assert len(run) == 1 and run[0].attributes is not None
    assert run[0].attributes["pitrio.session.id"] == session_id
    # Once the daemon is gone its gauges report nothing rather than stale figures.
    assert "pitrio.daemon.sessions" not in after
