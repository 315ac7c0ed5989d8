"""``pitrio serve --workers 2`` on the PostgreSQL store: a worker killed with SIGKILL has its
session taken up by its sibling at once, not after the lease expires (the workers of one
daemon hold leases as one owner)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import trio
from trio_websocket import open_websocket_url

from tests.transports.daemon_harness import is_response, receive, send, settled, until
from tests.transports.test_serve_postgres import (  # noqa: F401 (database: a fixture)
    create,
    database,
    prompt,
    serve_process,
)
from tests.transports.test_serve_workers import after_failover, pid_of_worker

LONG_LEASE = 120.0
"""Far longer than the test may take: a session that moves did not wait for its lease."""


async def test_a_killed_workers_session_is_taken_up_by_its_sibling_at_once(
    database: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    extra = ("--workers", "2", "--lease-seconds", str(LONG_LEASE))
    async with serve_process(tmp_path, database, "agent", *extra) as (process, url):
        ws_url = url.replace("http://", "ws://").rstrip("/")
        session_id = await create(ws_url)
        await prompt(ws_url, session_id, "one")
        async with open_websocket_url(f"{ws_url}/v1/host") as host:
            await receive(host)
            await send(host, {"id": "l", "type": "list"})
            rows = (await until(host, is_response("l")))[-1]["data"]["sessions"]
        (row,) = [row for row in rows if row["id"] == session_id]
        os.kill(pid_of_worker(process.pid, row["worker"]), signal.SIGKILL)
        started = trio.current_time()
        async with after_failover(f"{ws_url}/v1/sessions/{session_id}") as ws:
            await send(ws, {"id": "p", "type": "prompt", "message": "two"})
            await until(ws, settled)
            await send(ws, {"id": "m", "type": "get_messages"})
            messages = (await until(ws, is_response("m")))[-1]["data"]["messages"]
        assert trio.current_time() - started < LONG_LEASE / 4
        users = [m["content"] for m in messages if m["role"] == "user"]
        assert [_text(content) for content in users] == ["one", "two"]


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    assert isinstance(content, list)
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))
