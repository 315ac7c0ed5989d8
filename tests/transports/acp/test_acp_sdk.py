"""``pitrio acp`` driven by the official TypeScript client (``@agentclientprotocol/sdk``)
through a whole conversation on the fixture-rules faux model, in two processes: the first
creates a session, runs tool calls, answers an extension's permission request, cancels a
streaming reply, changes the thinking level, lists and closes; the second loads the session
(its whole history replayed before the answer) and continues it. Every line pitrio writes is
checked against ACP v1's official JSON schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.transports.acp.harness import (
    DIALOG_EXTENSION,
    PITRIO,
    SchemaCheck,
    acp_env,
    sdk_or_skip,
    sent_methods,
)

CLIENT = Path(__file__).parent / "client.mjs"
TOOL_PROMPT = (
    'Please <<write {"path":"notes.txt","content":"alpha\\n"}>> then '
    '<<edit {"path":"notes.txt","edits":[{"oldText":"alpha","newText":"beta"}]}>> then '
    '<<read {"path":"notes.txt"}>>'
)


async def _client(
    package: Path, work: Path, phase: str, args: dict[str, Any], *flags: str
) -> list[dict[str, Any]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    raw, sent = work.parent / f"{phase}.raw.jsonl", work.parent / f"{phase}.sent.jsonl"
    command = [node, str(CLIENT), str(package), phase, json.dumps(args), "--", PITRIO, "acp"]
    env = acp_env(work, RAW_LOG=str(raw), SENT_LOG=str(sent))
    with trio.fail_after(90):
        done = await trio.run_process(
            [*command, "--model", "faux/faux-1", *flags],
            cwd=work,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    check = SchemaCheck(package)
    methods = sent_methods(sent.read_text().splitlines())
    lines = raw.read_text().splitlines()
    problems = [(line[:200], check.errors(line, methods)) for line in lines]
    assert [p for p in problems if p[1]] == []
    seen: list[dict[str, Any]] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return seen


def _result(seen: list[dict[str, Any]], step: str) -> Any:
    found = [item for item in seen if item.get("step") == step]
    assert found and found[0]["kind"] == "result", found
    return found[0]["value"]


def _updates_before(seen: list[dict[str, Any]], step: str) -> list[dict[str, Any]]:
    """The updates between the answer before ``step``'s and ``step``'s answer."""
    out: list[dict[str, Any]] = []
    for item in seen:
        if item.get("step") == step:
            return out
        if item["kind"] in ("result", "error"):
            out = []
        elif item["kind"] == "update":
            out.append(item["params"]["update"])
    raise AssertionError(f"no answer to {step}")


def _shape(updates: list[dict[str, Any]]) -> list[str]:
    """Updates as ``kind`` (``tool_call:<kind>:<status>``), a run of chunks as one."""
    shape: list[str] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if kind in ("tool_call", "tool_call_update"):
            shape.append(f"{kind}:{update.get('kind', '')}:{update.get('status', '')}")
        elif not shape or shape[-1] != kind:
            shape.append(kind)
    return shape


def _text(updates: list[dict[str, Any]], kind: str) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


async def test_a_whole_conversation_then_load_in_a_fresh_process(tmp_path: Path) -> None:
    package = sdk_or_skip()
    work = tmp_path / "work"
    work.mkdir()
    answer = tmp_path / "answer.txt"
    extension = tmp_path / "ask.py"
    extension.write_text(DIALOG_EXTENSION.format(answer=str(answer)))
    flags = ("-e", str(extension), "--faux-chunk-delay", "0.02")
    args = {"cwd": str(work), "toolPrompt": TOOL_PROMPT}
    seen = await _client(package, work, "conversation", args, *flags)

    init = _result(seen, "initialize")
    assert init["protocolVersion"] == 1
    assert init["agentCapabilities"]["loadSession"] is True
    created = _result(seen, "new")
    session_id = created["sessionId"]
    assert created["modes"]["currentModeId"] == "off"
    assert [o["id"] for o in created["configOptions"]] == ["model", "thinking"]
    # The extension's command is offered after session/new's answer.
    commands = [u for u in _updates_before(seen, "prompt-tools") if "availableCommands" in u]
    assert commands == [
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "ask", "description": "One question"}],
        }
    ]

    # Tool calls: announced pending with their diffs, run, completed; the reply streamed.
    assert _result(seen, "prompt-tools") == {"stopReason": "end_turn"}
    tools = _updates_before(seen, "prompt-tools")
    calls = [u for u in tools if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
    assert [c.get("status") for c in calls if c["sessionUpdate"] == "tool_call"] == ["pending"] * 3
    assert [c["kind"] for c in calls if c["sessionUpdate"] == "tool_call"] == [
        "edit",
        "edit",
        "read",
    ]
    finals = [c for c in calls if c.get("status") in ("completed", "failed")]
    assert [c["status"] for c in finals] == ["completed"] * 3
    write, edit = (c for c in calls if c["sessionUpdate"] == "tool_call" and c["kind"] == "edit")
    notes = str(work / "notes.txt")
    assert write["content"] == [
        {"type": "diff", "path": notes, "oldText": None, "newText": "alpha\n"}
    ]
    assert edit["content"] == [
        {"type": "diff", "path": notes, "oldText": "alpha", "newText": "beta"}
    ]
    assert write["locations"] == [{"path": notes}]
    assert "beta" in json.dumps(finals[2]["content"])
    assert _text(tools, "agent_message_chunk").endswith('Last result starts: "beta\\n"')
    assert (work / "notes.txt").read_text() == "beta\n"

    # The extension's confirm became a permission request; the answer reached it.
    permissions = [item["params"] for item in seen if item["kind"] == "permission"]
    assert len(permissions) == 1 and permissions[0]["sessionId"] == session_id
    assert "Sure?" in permissions[0]["toolCall"]["title"]
    assert _result(seen, "prompt-ask") == {"stopReason": "end_turn"}
    assert answer.read_text() == "True"

    # Cancelled mid-stream: part of the reply came, the prompt answers "cancelled".
    assert _result(seen, "prompt-cancel") == {"stopReason": "cancelled"}
    partial = _text(_updates_before(seen, "prompt-cancel"), "agent_message_chunk")
    assert partial.startswith("Slow answer:") and not partial.endswith("word150.")

    options = {o["id"]: o for o in _result(seen, "set-model")["configOptions"]}
    assert options["model"]["currentValue"] == "faux/faux-think"
    options = {o["id"]: o for o in _result(seen, "set-thinking")["configOptions"]}
    assert options["thinking"]["currentValue"] == "high"
    modes = [
        u for u in _updates_before(seen, "set-mode") if u["sessionUpdate"] == "current_mode_update"
    ]
    assert modes == [{"sessionUpdate": "current_mode_update", "currentModeId": "high"}]
    assert _result(seen, "set-mode") == {}
    after_mode = _updates_before(seen, "list")
    [config] = [u for u in after_mode if u["sessionUpdate"] == "config_option_update"]
    assert {o["id"]: o["currentValue"] for o in config["configOptions"]} == {
        "model": "faux/faux-think",
        "thinking": "low",
    }
    listed = _result(seen, "list")["sessions"]
    assert listed[0]["sessionId"] == session_id and listed[0]["cwd"] == str(work)
    assert _result(seen, "close") == {}
    after = [item for item in seen if item.get("step") == "prompt-after-close"]
    assert after[0]["kind"] == "error" and after[0]["code"] == -32002

    # A fresh process: the whole history before the answer, in order, then more.
    reload = await _client(
        package, work, "reload", {"cwd": str(work), "sessionId": session_id}, *flags
    )
    replay = _updates_before(reload, "load")
    assert "modes" in _result(reload, "load")
    assert _shape(replay) == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call:edit:pending",
        "tool_call_update::completed",
        "agent_message_chunk",
        "tool_call:edit:pending",
        "tool_call_update::completed",
        "agent_message_chunk",
        "tool_call:read:pending",
        "tool_call_update::completed",
        "agent_message_chunk",
        "user_message_chunk",
        "agent_message_chunk",
    ]
    assert _text(replay, "user_message_chunk") == TOOL_PROMPT + "SLOW please"
    assert _text(replay, "agent_message_chunk").endswith(partial)
    replayed_edit = [u for u in replay if u["sessionUpdate"] == "tool_call"][1]
    assert replayed_edit["content"] == edit["content"]
    assert _result(reload, "prompt-more") == {"stopReason": "end_turn"}
    assert (
        _text(_updates_before(reload, "prompt-more"), "agent_message_chunk")
        == "You said: hello again"
    )
