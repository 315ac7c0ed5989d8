"""pi 1.6.0's ``SessionManager`` opens a session file whose entries carry pitrio's command ids.

A daemon writes a command's client id into the entries it produced (``"pitrioCommand"``, an
extra top-level field: exactly-once commands, issue 36). pi parses each line with
``JSON.parse`` and keeps the object, so it must read such a file as it reads any other: every
entry kept, the file not rewritten, the leaf's context the messages pitrio holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
import trio

from pitrio.actors.model_router import FauxProvider, FauxReply
from tests.interop.pi_install import find_pi
from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    settled,
    until,
)

HERE = Path(__file__).parent
SCRIPT = HERE / "session_manager_open.mjs"
NODE, PI_CLI, SKIP_REASON = find_pi()


async def test_pi_opens_a_file_whose_entries_carry_command_ids(tmp_path: Path) -> None:
    if NODE is None or PI_CLI is None:
        pytest.skip(SKIP_REASON)
    agent = tmp_path / "agent"
    faux = FauxProvider(default=FauxReply(text="answered"))
    commands = [
        {"id": "n1", "type": "set_session_name", "name": "stamped"},
        {"id": "b1", "type": "bash", "command": "echo hi"},
        {"id": "m1", "type": "set_model", "provider": "faux", "modelId": "faux-think"},
    ]
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "p1", "type": "prompt", "message": "first"})
            await until(ws, settled)
            for command in commands:
                await send(ws, command)
                assert (await until(ws, is_response(command["id"])))[-1]["success"]
            await send(ws, {"id": "p2", "type": "prompt", "message": "second"})
            await until(ws, settled)
            await send(ws, {"id": "s", "type": "get_state"})
            state = (await until(ws, is_response("s")))[-1]["data"]
            await send(ws, {"id": "m", "type": "get_messages"})
            messages = (await until(ws, is_response("m")))[-1]["data"]["messages"]
    file = Path(state["sessionFile"])
    lines = [orjson.loads(line) for line in (await trio.Path(file).read_bytes()).splitlines()]
    stamped = [line["pitrioCommand"]["id"] for line in lines if "pitrioCommand" in line]
    assert stamped == ["p1", "n1", "b1", "m1", "p2"]

    output = tmp_path / "pi.json"
    config = {
        "module": str(PI_CLI.parent / "core" / "session-manager.js"),
        "files": [str(file)],
        "output": str(output),
    }
    with trio.fail_after(60):
        await trio.run_process([str(NODE), str(SCRIPT), json.dumps(config)])
    seen = json.loads(await trio.Path(output).read_text())[str(file)]
    assert seen["ok"], seen.get("error")
    assert seen["rewritten"] is False
    assert seen["types"] == [line["type"] for line in lines[1:]]
    assert seen["leafId"] == lines[-1]["id"]
    pi_messages = seen["context"]["messages"]
    assert [m["role"] for m in pi_messages] == [m["role"] for m in messages]
    assert [m.get("content") for m in pi_messages] == [m.get("content") for m in messages]
    assert seen["context"]["model"]["modelId"] == "faux-think"
