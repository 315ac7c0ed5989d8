"""``pitrio attach`` through a TCP proxy that resets its connection mid-reply: it reconnects,
resumes from the last event seen, and the reply reads whole, once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pitrio.actors.model_router import FauxProvider, FauxReply
from tests.faults.mock_llm import resetting_proxy
from tests.transports.attach_harness import attach
from tests.transports.daemon_harness import TOKEN, create_session, running_daemon

REPLY = "The quick brown fox jumps over the lazy dog, then naps in the warm sun."


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


async def test_a_reset_mid_reply_is_resumed_without_loss_or_repeat(agent: Path) -> None:
    faux = FauxProvider(
        [
            FauxReply(text=REPLY, chunk_size=4, chunk_delay=0.02),
            FauxReply(text="And again."),
        ]
    )
    async with running_daemon(agent, faux) as daemon, resetting_proxy(daemon.port) as proxy:
        session_id = await create_session(daemon)
        env = {
            **os.environ,
            "PITRIO_DAEMON_URL": f"http://127.0.0.1:{proxy.port}/",
            "PITRIO_DAEMON_TOKEN": TOKEN,
        }
        async with attach(env, session_id) as client:
            await client.err.until(rf"^attached to {session_id} ")
            await client.out.until(r"^> $")
            await client.type("tell me")
            # The first delta is out (no newline yet); the line is read once it completes.
            while "The " not in client.out.buffer.decode():
                chunk = await client.out.stream.receive_some(65536)
                assert chunk, client.out.all
                client.out.buffer += chunk
            assert proxy.reset() == 1
            await client.err.until(
                r"^\(connection to the daemon lost: .*; reconnecting, try 1/5\)$"
            )
            await client.err.until(rf"^attached to {session_id} ")
            await client.out.until(rf"^{REPLY}$")
            await client.out.until(r"^> $")
            await client.type("more")
            await client.out.until(r"^And again\.$")
            await client.close_input()
            assert await client.exit_code() == 0
    assert sum(REPLY in line for line in client.out.all) == 1
