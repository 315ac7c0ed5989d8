"""Exactly-once commands over the daemon's real websockets: a client that lost its connection
and sends its command again (same ``id``) gets the first answer and no second run; the ids are
written with the entries, so a restarted daemon on the same session files recognises them; an
idempotent ``/v1/host`` create makes one session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
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


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    return tmp_path / "agent"


def stamped_entries(path: Path) -> list[tuple[str, str]]:
    """(entry type or message role, command id) of each entry that carries a command id."""
    found = []
    for line in path.read_bytes().splitlines()[1:]:
        value = orjson.loads(line)
        if "pitrioCommand" in value:
            kind = value["message"]["role"] if value["type"] == "message" else value["type"]
            found.append((kind, value["pitrioCommand"]["id"]))
    return found


async def request(ws: Any, command: dict[str, Any]) -> dict[str, Any]:
    await send(ws, command)
    return (await until(ws, is_response(command["id"])))[-1]


async def session_path(daemon: Any, session_id: str) -> Path:
    async with connect(daemon, "/v1/host") as host:
        await receive(host)
        response = await request(host, {"id": "g", "type": "get", "sessionId": session_id})
    return Path(response["data"]["path"])


async def test_a_client_that_reconnects_and_resends_its_prompt_gets_one_run(agent: Path) -> None:
    faux = FauxProvider(default=FauxReply(text="the answer", chunk_size=2, chunk_delay=0.01))
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        prompt = {"id": "p1", "type": "prompt", "message": "do it once"}
        async with connect(daemon, path) as first:
            await receive(first)  # attached
            answer = await request(first, prompt)
            assert answer["success"] and answer["data"] == {"disposition": "started"}
        # The connection is gone mid-run; the client cannot know what happened and resends.
        async with connect(daemon, f"{path}?since=0") as second:
            await send(second, prompt)
            frames = await until(second, settled)  # the replayed first run's settle
            repeat = [f for f in frames if f.get("type") == "response"]
            if not repeat:
                repeat = [(await until(second, is_response("p1")))[-1]]
            assert repeat[0] == {**answer, "duplicate": True}
            assert len(faux.requests) == 1
            # After the run, the same: the first answer, nothing applied.
            again = await request(second, prompt)
            assert again == {**answer, "duplicate": True}
            # The same text under another id is another prompt.
            other = await request(second, {**prompt, "id": "p2"})
            assert other["success"] and "duplicate" not in other
            await until(second, settled)
            assert len(faux.requests) == 2
            # Queries are never answered from the ledger.
            state = await request(second, {"id": "p2", "type": "get_messages"})
            assert "duplicate" not in state
            roles = [m["role"] for m in state["data"]["messages"] if m["role"] != "system"]
            assert roles == ["user", "assistant", "user", "assistant"]  # p1 once, p2 once


async def test_a_restarted_daemon_recognises_ids_from_the_session_file(agent: Path) -> None:
    faux = FauxProvider(default=FauxReply(text="done"))
    commands = [
        {"id": "p1", "type": "prompt", "message": "first"},
        {"id": "n1", "type": "set_session_name", "name": "once"},
        {"id": "b1", "type": "bash", "command": "echo hi"},
        {"id": "m1", "type": "set_model", "provider": "faux", "modelId": "faux-think"},
        {"id": "t1", "type": "set_thinking_level", "level": "high"},
    ]
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, commands[0])
            await until(ws, settled)
            answers = [await request(ws, command) for command in commands[1:]]
            assert all(answer["success"] for answer in answers)
            clone = {"id": "k1", "type": "clone"}
            cloned = await request(ws, clone)
            assert cloned["success"], cloned
            assert await request(ws, clone) == {**cloned, "duplicate": True}
        file = await session_path(daemon, session_id)
    written = file.read_bytes()
    # Each id is written with the entry its command produced.
    assert stamped_entries(file) == [
        ("user", "p1"),
        ("session_info", "n1"),
        ("bashExecution", "b1"),
        ("model_change", "m1"),
        ("thinking_level_change", "t1"),
    ]

    fresh = FauxProvider(default=FauxReply(text="again"))
    async with (
        running_daemon(agent, fresh) as daemon,
        connect(daemon, f"/v1/sessions/{session_id}") as ws,
    ):
        await receive(ws)
        repeat = await request(ws, commands[0])
        assert repeat == {
            "id": "p1",
            "type": "response",
            "command": "prompt",
            "success": True,
            "data": {"disposition": "started"},
            "duplicate": True,
        }
        for command, first in zip(commands[1:], answers, strict=True):
            answer = await request(ws, command)
            if command["type"] == "set_model":  # its data (the model) is not kept
                rest = {key: value for key, value in first.items() if key != "data"}
                assert answer == {**rest, "duplicate": True}
            else:  # no data, or (bash) its record's
                assert answer == {**first, "duplicate": True}
        assert fresh.requests == []
        assert file.read_bytes() == written  # nothing applied again
        # A clone writes nothing in its source, but its id names the copy: a repeat after the
        # restart finds the copy the first made.
        again = await request(ws, clone)
        assert again["data"]["sessionId"] == cloned["data"]["sessionId"], (cloned, again)
        # A changed command under a used id is a new command (pi gives ids no meaning).
        changed = await request(ws, {**commands[0], "message": "second"})
        assert "duplicate" not in changed
        await until(ws, settled)
        assert len(fresh.requests) == 1


async def test_an_idempotent_create_makes_one_session(agent: Path) -> None:
    async with running_daemon(agent) as daemon:
        async with connect(daemon, "/v1/host") as host:
            await receive(host)
            create = {"id": "c1", "type": "create", "idempotencyKey": "client-42/new"}
            await send(host, create)
            await send(host, {**create, "id": "c2"})  # while the first may still be starting
            frames = await until(host, is_response("c2"))
            if not any(is_response("c1")(f) for f in frames):
                frames += await until(host, is_response("c1"))
            first, second = (next(f for f in frames if is_response(key)(f)) for key in ("c1", "c2"))
            assert first["success"] and second["success"], (first, second)
            assert first["data"]["sessionId"] == second["data"]["sessionId"]
            # Sent after the first was answered: it says it is a repeat.
            third = await request(host, {**create, "id": "c6"})
            assert third["data"]["sessionId"] == first["data"]["sessionId"]
            assert third["data"]["duplicate"] is True
            listed = await request(host, {"id": "l", "type": "list"})
            assert len(listed["data"]["sessions"]) == 1
            other = await request(host, {**create, "id": "c3", "idempotencyKey": "other"})
            assert other["data"]["sessionId"] != first["data"]["sessionId"]
            bad = await request(host, {**create, "id": "c4", "idempotencyKey": 7})
            assert bad["success"] is False and "idempotencyKey" in bad["error"]
        session_id = first["data"]["sessionId"]
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await request(ws, {"id": "p", "type": "prompt", "message": "hi"})
            await until(ws, settled)

    # Restarted: the key finds the session's file.
    async with running_daemon(agent) as daemon, connect(daemon, "/v1/host") as host:
        await receive(host)
        again = await request(host, {**create, "id": "c5"})
        assert again["data"]["sessionId"] == session_id and again["data"]["duplicate"]


async def test_steers_follow_ups_and_compactions_carry_their_ids(agent: Path) -> None:
    # The queued messages' ids reach their user entries when they are delivered, later; the
    # run holds in a tool until the test has queued both (explicit, no timing).
    work = agent.parent / "work"
    await trio.Path(agent).mkdir(parents=True)  # a small session can be compacted:
    settings = '{"compaction": {"keepRecentTokens": 1}}'  # keep almost nothing
    await trio.Path(agent / "settings.json").write_text(settings)
    hold = FauxToolCall("bash", {"command": "until [ -e release ]; do sleep 0.02; done"})
    faux = FauxProvider(
        [FauxReply(tool_calls=[hold]), "steered", "followed"], default=FauxReply(text="summary")
    )
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            assert (await request(ws, {"id": "p1", "type": "prompt", "message": "go"}))["success"]
            await until(ws, lambda frame: frame.get("type") == "tool_execution_start")
            for key, kind in (("s1", "steer"), ("f1", "follow_up")):
                queued = await request(ws, {"id": key, "type": kind, "message": f"{kind} it"})
                assert queued["success"], queued
            await trio.Path(work / "release").touch()
            await until(ws, settled)
            compacted = await request(ws, {"id": "c1", "type": "compact"})
            assert compacted["success"], compacted["error"]
            calls = len(faux.requests)
            repeat = await request(ws, {"id": "c1", "type": "compact"})
            assert repeat == {**compacted, "duplicate": True}
            assert len(faux.requests) == calls  # no second summary
        file = await session_path(daemon, session_id)
    assert stamped_entries(file) == [
        ("user", "p1"),
        ("user", "s1"),
        ("user", "f1"),
        ("compaction", "c1"),
    ]


async def test_a_command_whose_connection_closed_mid_way_is_not_applied_again(
    agent: Path,
) -> None:
    # The session carries a `bash` out even when the connection that sent it goes; the id
    # must not be forgotten then, or the client's repeat runs it twice (found by the chaos
    # run, tests/faults/test_chaos.py). The command waits for a file the test makes.
    work = agent.parent / "work"
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        command = {
            "id": "b1",
            "type": "bash",
            "command": "touch started; until [ -e release ]; do sleep 0.02; done; echo ran >>count",
        }
        async with connect(daemon, path) as first:
            await receive(first)
            await send(first, command)
            with trio.fail_after(10):  # the command runs (a file it makes says so)
                # Another process makes the file: there is no event to wait on.
                while not await trio.Path(work / "started").exists():  # noqa: ASYNC110
                    await trio.sleep(0.02)
        # Gone before its answer. The command is still in progress, then answered from the
        # ledger; never run again.
        async with connect(daemon, path) as second:
            await receive(second)
            busy = await request(second, command)
            assert busy["success"] is False and busy["inProgress"] is True, busy
            await trio.Path(work / "release").touch()
            with trio.fail_after(10):
                while not (answer := await request(second, command))["success"]:
                    assert answer.get("inProgress"), answer
                    await trio.sleep(0.05)
            assert answer["duplicate"] is True and answer["data"]["exitCode"] == 0, answer
        assert (await trio.Path(work / "count").read_text()) == "ran\n"  # one run
        file = await session_path(daemon, session_id)
    assert stamped_entries(file) == [("bashExecution", "b1")]
