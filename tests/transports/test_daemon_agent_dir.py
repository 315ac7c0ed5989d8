"""A daemon started with its own agent dir keeps its sessions there, whatever the environment
names (an embedding program passes ``HostConfig.agent_dir``; the index reads that dir back)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.transports.daemon_harness import (
    connect,
    create_session,
    receive,
    running_daemon,
    send,
    settled,
    until,
)


async def test_sessions_go_to_the_hosts_agent_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("PITRIO_AGENT_DIR", raising=False)
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    agent = tmp_path / "agent"
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "hello"})
            await until(ws, settled)
    written = list((agent / "sessions").glob("*/*.jsonl"))
    assert [path.name.endswith(f"_{session_id}.jsonl") for path in written] == [True]
    assert not (home / ".pitrio").exists()
