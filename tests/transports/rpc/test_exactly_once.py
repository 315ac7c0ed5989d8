"""Exactly-once commands in ``pitrio --mode rpc`` over real pipes, the model a real HTTP server
(the shared mock LLM): a prompt sent twice with the same ``id`` runs once, the repeat gets the
first answer (or "in progress" while the first is being accepted), and the mock sees one
request. Ids of a stdio client are kept for the process only, so the file stays pi's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

from tests.faults.mock_llm import mock_llm
from tests.transports.rpc.harness import Dirs, RpcProcess, rpc_process
from tests.transports.test_serve_logs import write_agent


def responses_to(rpc: RpcProcess, request_id: str) -> list[dict[str, Any]]:
    return [
        line
        for line in rpc.lines
        if line.get("type") == "response" and line.get("id") == request_id
    ]


async def chat_requests(port: int) -> list[dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        log = (await client.get(f"http://127.0.0.1:{port}/_mock/log")).json()
    entries = log["entries"] if isinstance(log, dict) else log
    return [entry for entry in entries if entry["path"].endswith("/chat/completions")]


async def test_a_repeated_prompt_id_runs_once_over_real_pipes(tmp_path: Path) -> None:
    script = {"default": {"kind": "text", "text": "only once", "deltas": 4, "delay": 0.02}}
    async with mock_llm(script, tmp_path) as port:
        write_agent(tmp_path / "agent", port)  # models.json; Dirs.make writes the settings
        dirs = Dirs.make(tmp_path)
        async with rpc_process(dirs, model="mock/mock-model") as rpc:
            prompt = {"id": "p1", "type": "prompt", "message": "do it once"}
            line = orjson.dumps(prompt) + b"\n"
            await rpc.send_raw(line + line)  # the client resends at once, in one write
            assert await rpc.wait_until(lambda _: len(responses_to(rpc, "p1")) == 2)
            first, second = sorted(responses_to(rpc, "p1"), key=lambda r: "inProgress" in r)
            assert first == {
                "id": "p1",
                "type": "response",
                "command": "prompt",
                "success": True,
                "data": {"disposition": "started"},
            }
            # Read while the first was being accepted ("in progress") or after (its answer):
            # either way nothing was applied.
            assert second in (
                {
                    "id": "p1",
                    "type": "response",
                    "command": "prompt",
                    "success": False,
                    "error": "Command p1 is still in progress",
                    "inProgress": True,
                },
                {**first, "duplicate": True},
            )
            await rpc.event("agent_settled")
            # After the run: the first answer again, no second run.
            await rpc.send(prompt)
            assert await rpc.wait_until(lambda _: len(responses_to(rpc, "p1")) == 3)
            assert responses_to(rpc, "p1")[-1] == {**first, "duplicate": True}
            state = await rpc.data({"type": "get_state"})
            assert state["isStreaming"] is False
            assert len(rpc.by_type["agent_start"]) == 1
            assert len(await chat_requests(port)) == 1
            with trio.fail_after(5):
                await rpc.close_stdin()
                assert await rpc.wait_exit() == 0
    # A stdio client's ids are the process's (pi's RpcClient numbers them from req_1 in
    # every process): none is written, the file is what pi writes.
    written = await trio.Path(state["sessionFile"]).read_bytes()
    assert b"pitrioCommand" not in written and written.count(b'"role":"user"') == 1
