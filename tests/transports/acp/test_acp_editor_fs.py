"""With a client that declares ``fs.readTextFile`` and ``fs.writeTextFile``, ``read``,
``edit`` and ``write`` go through the editor (its unsaved buffers), and the editor, not the
tool, writes; ``--no-editor-fs`` keeps them on the disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.transports.acp.harness import Agent, replies, running_acp, schema_problems

FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


async def _session(agent: Agent, work: Path) -> str:
    init = {"protocolVersion": 1, "clientCapabilities": FS}
    await agent.send(
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(work)}},
    )
    session_id: str = (await agent.answer(1))["result"]["sessionId"]
    return session_id


async def _prompt(agent: Agent, session_id: str, request_id: int, text: str) -> None:
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    await agent.send(
        {"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params}
    )


async def _asked(agent: Agent, method: str) -> dict[str, Any]:
    """The agent's next request of ``method`` (taken out of the unread lines)."""
    await agent.until(f'"method":"{method}"')
    for index, line in enumerate(agent.lines):
        message = json.loads(line)
        if message.get("method") == method:
            del agent.lines[index]
            found: dict[str, Any] = message
            return found
    raise AssertionError(method)


async def test_the_file_tools_go_through_the_editors_buffers(work: Path) -> None:
    notes = work / "notes.txt"
    notes.write_text("saved text\n")
    async with running_acp(work) as agent:
        session_id = await _session(agent, work)
        await _prompt(agent, session_id, 2, '<<read {"path": "notes.txt"}>>')
        asked = await _asked(agent, "fs/read_text_file")
        assert asked["params"] == {"sessionId": session_id, "path": str(notes)}
        buffer = {"content": "unsaved text\n"}
        await agent.send({"jsonrpc": "2.0", "id": asked["id"], "result": buffer})
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
        assert 'Last result starts: "unsaved text' in replies(agent)

        edit = {"path": "notes.txt", "edits": [{"oldText": "unsaved", "newText": "edited"}]}
        await _prompt(agent, session_id, 3, f"<<edit {json.dumps(edit)}>>")
        asked = await _asked(agent, "fs/read_text_file")
        await agent.send({"jsonrpc": "2.0", "id": asked["id"], "result": buffer})
        written = await _asked(agent, "fs/write_text_file")
        assert written["params"] == {
            "sessionId": session_id,
            "path": str(notes),
            "content": "edited text\n",
        }
        await agent.send({"jsonrpc": "2.0", "id": written["id"], "result": {}})
        assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}
        assert "Successfully replaced 1 block(s) in notes.txt." in replies(agent)
    assert notes.read_text() == "saved text\n"  # the editor saves, the tool did not
    assert schema_problems(agent) == []


async def test_no_editor_fs_keeps_the_tools_on_the_disk(work: Path) -> None:
    (work / "notes.txt").write_text("saved text\n")
    async with running_acp(work, "--no-editor-fs") as agent:
        session_id = await _session(agent, work)
        await _prompt(agent, session_id, 2, '<<read {"path": "notes.txt"}>>')
        assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
        assert 'Last result starts: "saved text' in replies(agent)
        assert not any("fs/read_text_file" in line for line in agent.written)
