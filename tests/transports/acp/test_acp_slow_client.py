"""A client that stops reading: ``pitrio acp`` holds its output (bounded: the session's
subscriber buffer merges what waits), and once the client reads again nothing is lost: the
run's last update and the prompt's answer come, and memory stayed bounded."""

from __future__ import annotations

import json
from pathlib import Path

import trio

from tests.transports.acp.harness import running_acp, schema_problems

NOISY = '<<bash {"command": "for i in $(seq 1 40); do seq 1 20000; sleep 0.05; done; echo END"}>>'


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def test_a_client_that_stops_reading_loses_nothing_and_memory_stays_bounded(
    work: Path,
) -> None:
    async with running_acp(work) as agent:
        await agent.send(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(work)}},
        )
        session_id = (await agent.answer(1))["result"]["sessionId"]
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": NOISY}]}
        await agent.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        await agent.until('"status":"in_progress"')
        before = _rss_kib(agent.process.pid)
        peak = before
        # Not reading while the tool writes about 4.5 MB of output, updated many times.
        for _ in range(30):
            await trio.sleep(0.1)
            peak = max(peak, _rss_kib(agent.process.pid))
        answer = await agent.answer(2)
        assert answer["result"] == {"stopReason": "end_turn"}
    assert schema_problems(agent) == []
    updates = [json.loads(line)["params"]["update"] for line in agent.written if "/update" in line]
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call_update"]
    assert calls[-1]["status"] == "completed"
    assert "END" in json.dumps(calls[-1]["content"])
    text = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert text.startswith("Step 1/1: bash.") and "Finished 1 tool step(s)." in text
    # More than a pipe holds (64 KiB) was written, most of it while nobody read.
    assert sum(len(line) for line in agent.written) > 4 * 65536
    assert peak - before < 100_000, (before, peak)  # KiB: far less than the output's copies
