"""``bench/resume_floor.py`` and ``bench/floor_agent.py``: the measuring sticks still do the
work they stand for (a floor that fails or skips work measures nothing)."""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

import orjson
import trio

from tests.faults.mock_llm import mock_llm

ROOT = Path(__file__).resolve().parents[1]


def session_file(path: Path, turns: int) -> list[dict[str, object]]:
    """A linear session of ``turns`` user/assistant pairs after a model change; its messages."""
    lines = [{"type": "session", "version": 3, "id": "s", "cwd": str(path.parent)}]
    lines.append({"type": "model_change", "id": "m0", "parentId": None, "modelId": "mock-model"})
    messages: list[dict[str, object]] = []
    for turn in range(turns):
        for role, text in (("user", f"question {turn}"), ("assistant", f"answer {turn}")):
            message = {"role": role, "content": [{"type": "text", "text": text}]}
            entry = {"type": "message", "id": f"e{len(lines)}", "parentId": lines[-1]["id"]}
            lines.append({**entry, "message": message})
            messages.append(message)
    # A side branch off the first answer: not on the leaf's branch, so not counted.
    side = {"role": "user", "content": [{"type": "text", "text": "abandoned"}]}
    lines.insert(4, {"type": "message", "id": "side", "parentId": "e3", "message": side})
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return messages


async def run(argv: list[str], commands: list[dict[str, object]], env: dict[str, str]) -> list:
    """Run a floor program with ``commands`` on stdin; its output lines, parsed."""
    stdin = b"".join(orjson.dumps(command) + b"\n" for command in commands)
    result = await trio.run_process(
        [sys.executable, *argv],
        stdin=stdin,
        capture_stdout=True,
        capture_stderr=True,
        env={**os.environ, **env},
    )
    assert not result.stderr, result.stderr.decode()
    return [orjson.loads(line) for line in result.stdout.splitlines()]


async def test_the_resume_floor_answers_from_the_branch_and_sends_the_whole_transcript(
    tmp_path: Path,
) -> None:
    path = tmp_path / "session.jsonl"
    messages = session_file(path, 3)
    commands: list[dict[str, object]] = [
        {"id": "s", "type": "get_state"},
        {"id": "m", "type": "get_messages"},
        {"id": "p", "type": "prompt", "message": "go on"},
    ]
    script = {"default": {"kind": "text", "text": "done"}}
    async with mock_llm(script, tmp_path) as port:
        await trio.to_thread.run_sync(mock_post, port, "config", {"capture": True})
        env = {"ANCHOR_BASE_URL": f"http://127.0.0.1:{port}/v1"}
        argv = [str(ROOT / "bench" / "resume_floor.py"), "--session", str(path)]
        out = await run(argv, commands, env)
        captured = await trio.to_thread.run_sync(captured_requests, port)
    state, listed = out[0], out[1]
    assert state["data"]["messageCount"] == len(messages) == 6
    assert listed["data"]["messages"] == messages
    assert out[-1]["type"] == "agent_end"
    assert out[-1]["messages"][-1]["content"] == [{"type": "text", "text": "done"}]
    (request,) = captured
    sent = request["messages"]
    assert [m["role"] for m in sent] == ["system"] + ["user", "assistant"] * 3 + ["user"]
    assert [m["content"] for m in sent[1:]] == [
        *(m["content"][0]["text"] for m in messages),  # type: ignore[index]
        "go on",
    ]
    assert [t["function"]["name"] for t in request["tools"]] == ["read", "bash", "edit", "write"]


def captured_requests(port: int) -> list[dict[str, object]]:
    """The requests the mock kept (``capture``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_mock/captured") as reply:
        return [item["request"] for item in orjson.loads(reply.read())]


def mock_post(port: int, route: str, body: dict[str, object]) -> None:
    """POST to one of the mock's control routes."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/_mock/{route}", data=orjson.dumps(body), method="POST"
    )
    with urllib.request.urlopen(request) as reply:
        reply.read()


async def test_the_resume_floor_without_a_session_answers_a_new_ones_state(
    tmp_path: Path,
) -> None:
    argv = [str(ROOT / "bench" / "resume_floor.py")]
    out = await run_in(tmp_path, argv, [{"id": "s", "type": "get_state"}])
    assert out == [
        {
            "id": "s",
            "type": "response",
            "command": "get_state",
            "success": True,
            "data": {"model": {"id": "mock-model"}, "isStreaming": False, "messageCount": 0},
        }
    ]


async def run_in(cwd: Path, argv: list[str], commands: list[dict[str, object]]) -> list:
    """:func:`run` with ``cwd`` as the working directory."""
    stdin = b"".join(orjson.dumps(command) + b"\n" for command in commands)
    result = await trio.run_process(
        [sys.executable, *argv], stdin=stdin, capture_stdout=True, cwd=cwd
    )
    return [orjson.loads(line) for line in result.stdout.splitlines()]


async def test_the_turn_floor_resumes_and_answers_a_prompt(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    messages = session_file(path, 2)
    script = {"default": {"kind": "text", "text": "ok"}}
    async with mock_llm(script, tmp_path) as port:
        env = {"ANCHOR_BASE_URL": f"http://127.0.0.1:{port}/v1"}
        argv = [str(ROOT / "bench" / "floor_agent.py"), "--session", str(path)]
        commands = [{"id": "s", "type": "get_state"}, {"id": "p", "type": "prompt", "message": "x"}]
        out = await run(argv, commands, env)
    # The turn floor reads every message line, the side branch's too (it keeps no tree).
    assert out[0]["data"]["messageCount"] == len(messages) + 1
    assert out[-1]["type"] == "agent_settled"
