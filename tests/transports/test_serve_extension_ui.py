"""Extension dialogs over the daemon's websockets: a project extension opens a dialog, any
client of the session may answer it, an unknown id is ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pitrio.actors.session.resources.trust import canonical_path, save_decisions
from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    until,
)

EXTENSION = """
async def ask(args, ctx):
    colour = await ctx.ui.select("Colour?", ["red", "blue"])
    await ctx.ui.notify(f"picked {colour}")

def setup(api):
    api.register_command("ask", ask, description="Ask for a colour")
"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


async def test_a_dialog_is_answered_by_another_client_of_the_session(agent: Path) -> None:
    extensions = agent.parent / "work" / ".pitrio" / "extensions"
    extensions.mkdir(parents=True)
    (extensions / "ask.py").write_text(EXTENSION)
    # a project's extensions load only for a trusted project (pi 1.6.0)
    save_decisions(agent, [(canonical_path(agent.parent / "work"), True)])
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as a, connect(daemon, path) as b:
            assert (await receive(a))["type"] == "attached"
            assert (await receive(b))["type"] == "attached"
            await send(a, {"id": "c", "type": "get_commands"})
            commands = (await until(a, is_response("c")))[-1]["data"]["commands"]
            assert commands[0]["name"] == "ask" and commands[0]["source"] == "extension"
            await send(a, {"id": "p", "type": "prompt", "message": "/ask"})
            frames = await until(b, lambda f: f.get("type") == "extension_ui_request")
            request = frames[-1]
            assert request["method"] == "select" and request["options"] == ["red", "blue"]
            await send(b, {"type": "extension_ui_response", "id": "nope", "value": "red"})
            await send(b, {"type": "extension_ui_response", "id": request["id"], "value": "blue"})
            seen = await until(a, is_response("p"))

            # Both clients are told the dialog was answered (so a page showing it closes it).
            def answered(frame: dict[str, Any]) -> bool:
                return frame.get("type") == "extension_ui_answered" and frame["id"] == request["id"]

            if not any(answered(f) for f in seen):
                await until(a, answered)
            await until(b, answered)
    notify = [
        f for f in seen if f.get("type") == "extension_ui_request" and f["method"] == "notify"
    ]
    assert [f["message"] for f in notify] == ["picked blue"]
    assert seen[-1]["success"] is True
