"""How ``pitrio acp`` maps what ACP cannot say: a prompt during a run is a follow-up (or a
steer when ``_meta`` asks), each answered at the run's settle; images reach the session; a
provider's error ends the prompt with a JSON-RPC error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.transports.acp.harness import Agent, replies, running_acp, schema_problems

PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG."""


def _prompt(
    request_id: int, session_id: str, *blocks: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    params = {"sessionId": session_id, "prompt": list(blocks), **extra}
    return {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


async def _new(agent: Agent, work: Path) -> str:
    await agent.send(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(work)}},
    )
    await agent.answer(0)
    session_id: str = (await agent.answer(1))["result"]["sessionId"]
    return session_id


def _user_messages(work: Path) -> list[Any]:
    [path] = (work.parent / "agent" / "sessions").rglob("*.jsonl")
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e["message"]["content"] for e in entries if e.get("message", {}).get("role") == "user"]


async def test_a_prompt_during_a_run_is_a_follow_up_answered_at_the_settle(work: Path) -> None:
    async with running_acp(work, "--faux-chunk-delay", "0.01") as agent:
        session_id = await _new(agent, work)
        await agent.send(_prompt(2, session_id, _text("SLOW one")))
        await agent.until('"agent_message_chunk"')
        await agent.send(_prompt(3, session_id, _text("two")))
        assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
        text = replies(agent)
        # The follow-up waited for the whole slow reply.
        assert text.index("word150.") < text.index("You said: two")
    assert [m[0]["text"] for m in _user_messages(work)] == ["SLOW one", "two"]


async def test_meta_asks_for_a_steer(work: Path) -> None:
    steer = {"_meta": {"pitrio/streamingBehavior": "steer"}}
    async with running_acp(work, "--faux-chunk-delay", "0.01") as agent:
        session_id = await _new(agent, work)
        task = _text('<<bash {"command": "sleep 1; echo done"}>>')
        await agent.send(_prompt(2, session_id, task))
        await agent.until('"sessionUpdate":"tool_call"')
        await agent.send(_prompt(3, session_id, _text("change of plan"), **steer))
        assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
        # The steer came in after the tool and before the step's final answer: the model's
        # next reply answers it, and the second step never runs.
        assert "You said: change of plan" in replies(agent)
        assert "Finished" not in replies(agent)
    assert schema_problems(agent) == []


async def test_an_image_prompt_reaches_the_session(work: Path) -> None:
    async with running_acp(work) as agent:
        session_id = await _new(agent, work)
        image = {"type": "image", "data": PIXEL, "mimeType": "image/png"}
        await agent.send(_prompt(2, session_id, _text("what is this"), image))
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
    [content] = _user_messages(work)
    assert content == [
        {"type": "text", "text": "what is this"},
        {"type": "image", "data": PIXEL, "mimeType": "image/png"},
    ]


async def test_a_provider_error_ends_the_prompt_with_an_internal_error(work: Path) -> None:
    agent_dir = work.parent / "agent"
    agent_dir.mkdir()
    (agent_dir / "settings.json").write_text(json.dumps({"retry": {"enabled": False}}))
    async with running_acp(work) as agent:
        session_id = await _new(agent, work)
        await agent.send(_prompt(2, session_id, _text("ALWAYSFAIL")))
        error = (await agent.answer(2))["error"]
        assert error["code"] == -32603 and "503" in error["message"]
        await agent.send(_prompt(3, session_id, _text("again")))
        assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}


async def test_closing_a_session_during_a_prompt_answers_it_cancelled(work: Path) -> None:
    async with running_acp(work, "--faux-chunk-delay", "0.01") as agent:
        session_id = await _new(agent, work)
        await agent.send(_prompt(2, session_id, _text("SLOW one")))
        await agent.until('"agent_message_chunk"')
        close = {"sessionId": session_id}
        await agent.send({"jsonrpc": "2.0", "id": 3, "method": "session/close", "params": close})
        assert (await agent.answer(2))["result"] == {"stopReason": "cancelled"}
        assert (await agent.answer(3))["result"] == {}
        assert "word150." not in replies(agent)
    assert schema_problems(agent) == []


async def test_a_cancel_right_behind_its_prompt_stops_the_run_the_prompt_starts(
    work: Path,
) -> None:
    cancel = {"jsonrpc": "2.0", "method": "session/cancel"}
    async with running_acp(work, "--faux-chunk-delay", "0.01") as agent:
        session_id = await _new(agent, work)
        await agent.send(
            _prompt(2, session_id, _text("SLOW one")),
            {**cancel, "params": {"sessionId": session_id}},
        )
        assert (await agent.answer(2))["result"] == {"stopReason": "cancelled"}
        assert "word150." not in replies(agent)
        await agent.send(_prompt(3, session_id, _text("next")))
        assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}
        assert replies(agent).endswith("You said: next")


async def test_the_end_of_input_answers_a_running_prompt_cancelled_before_exiting(
    work: Path,
) -> None:
    async with running_acp(work, "--faux-chunk-delay", "0.01") as agent:
        session_id = await _new(agent, work)
        await agent.send(_prompt(2, session_id, _text("SLOW one")))
        await agent.until('"agent_message_chunk"')
        assert agent.process.stdin is not None
        await agent.process.stdin.aclose()  # the editor closed its end; it still reads
        assert (await agent.answer(2))["result"] == {"stopReason": "cancelled"}


PLAN_EXTENSION = """
async def plan(args, ctx):
    await ctx.ui.set_plan([{"content": "one", "status": "in_progress", "priority": "high"}])
    await ctx.ui.set_plan([{"content": "one", "status": "completed"}, {"content": "two"}])

def setup(api):
    api.register_command("plan", plan, description="Show a plan")
"""


async def test_an_extensions_plan_is_a_plan_update(work: Path) -> None:
    extension = work.parent / "plan.py"
    extension.write_text(PLAN_EXTENSION)
    async with running_acp(work, "-e", str(extension)) as agent:
        session_id = await _new(agent, work)
        await agent.send(_prompt(2, session_id, _text("/plan")))
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
    updates = [json.loads(line)["params"]["update"] for line in agent.written if "/update" in line]
    plans = [u["entries"] for u in updates if u["sessionUpdate"] == "plan"]
    assert plans == [
        [{"content": "one", "priority": "high", "status": "in_progress"}],
        [
            {"content": "one", "priority": "medium", "status": "completed"},
            {"content": "two", "priority": "medium", "status": "pending"},
        ],
    ]
    assert schema_problems(agent) == []
