"""Hostile values in well-formed frames (issue 21, items 13 and 14, the daemon's part): each is
answered with an error naming the problem, the connection and the session go on; a lone
surrogate is read as pi reads it and written back unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.actors.model_router import FauxProvider, FauxReply
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

DEEP = "[" * 1000 + "]" * 1000


def deep(template: str) -> str:
    """``template`` with ``DEEP`` replaced by an array nested 1,000 levels."""
    return template.replace("DEEP", DEEP)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


async def answer_to(ws: WebSocketConnection, text: str) -> dict[str, Any]:
    """The first response after sending ``text`` (the connection must stay open)."""
    await ws.send_message(text)
    try:
        frames = await until(ws, lambda f: f.get("type") == "response", seconds=10)
    except ConnectionClosed as exc:
        raise AssertionError(f"closed after {text[:60]!r}: {exc.reason}") from None
    return frames[-1]


async def still_answers(ws: WebSocketConnection, tag: str, command: str = "get_state") -> None:
    await send(ws, {"id": tag, "type": command})
    assert (await until(ws, is_response(tag)))[-1]["success"]


DEEP_FRAMES = [
    ("id", deep('{"id": DEEP, "type": "get_state"}')),
    ("type", deep('{"id": "t", "type": DEEP}')),
    ("a field", deep('{"id": "f", "type": "get_state", "extra": DEEP}')),
    ("set_event_format.updates", deep('{"id": "s", "type": "set_event_format", "updates": DEEP}')),
    ("a dialog id", deep('{"type": "extension_ui_response", "id": DEEP, "value": "x"}')),
    ("a prompt's images", deep('{"id": "p", "type": "prompt", "message": "hi", "images": DEEP}')),
]


async def test_deeply_nested_frames_are_answered_and_the_connection_goes_on(agent: Path) -> None:
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            for index, (where, text) in enumerate(DEEP_FRAMES):
                response = await answer_to(ws, text)
                assert not response["success"], (where, response)
                assert "nested" in response["error"], (where, response)
                await still_answers(ws, f"after-{index}")
        async with connect(daemon, "/v1/host") as host:
            await receive(host)
            for index, text in enumerate(
                [
                    deep('{"id": DEEP, "type": "list"}'),
                    deep('{"id": 1, "type": "open", "sessionId": DEEP}'),
                ]
            ):
                response = await answer_to(host, text)
                assert not response["success"] and "nested" in response["error"], response
                await still_answers(host, f"host-{index}", "list")
        assert (await daemon.host.get(session_id)).status == "live"
        assert daemon.server.counters["connection_errors"] == 0


async def test_nul_in_a_bash_command_is_refused_and_the_session_lives(agent: Path) -> None:
    # Four of these used to crash the session four times: the supervisor marked it failed.
    faux = FauxProvider([FauxReply(text="still here")])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            for index in range(6):
                await send(ws, {"id": index, "type": "bash", "command": f"echo a\x00{index}"})
                response = (await until(ws, is_response(index)))[-1]
                assert not response["success"], response
                assert "NUL" in response["error"], response
            hosted = await daemon.host.get(session_id)
            assert hosted.status == "live"
            assert hosted.restarts == 0
            await send(ws, {"id": "ok", "type": "bash", "command": "echo fine"})
            response = (await until(ws, is_response("ok")))[-1]
            assert response["success"] and response["data"]["output"] == "fine\n", response
            await send(ws, {"id": "p", "type": "prompt", "message": "hello"})
            frames = await until(ws, settled)
        assert any(
            f.get("type") == "message_end" and f["message"]["role"] == "assistant" for f in frames
        )


async def test_a_lone_surrogate_is_accepted_and_written_back_unchanged(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text="ok")])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await ws.send_message('{"id": "\\ud800", "type": "get_state"}')
            raw = await ws.get_message()
            assert isinstance(raw, str)
            assert raw.startswith('{"id":"\\ud800","type":"response","command":"get_state"')
            assert orjson.loads(raw.replace("\\ud800", "?"))["success"]
            await ws.send_message('{"id": "p", "type": "prompt", "message": "a\\udc00b"}')
            texts: list[str] = []
            with trio.fail_after(20):
                while not texts or '"type":"agent_settled"' not in texts[-1]:
                    message = await ws.get_message()
                    assert isinstance(message, str)
                    texts.append(message)
            user = [t for t in texts if '"type":"message_end"' in t and '"role":"user"' in t]
            assert user and '"text":"a\\udc00b"' in user[0], user
            assert '"id":"p","type":"response","command":"prompt","success":true' in "".join(texts)
        async with connect(daemon, "/v1/host") as host:
            await receive(host)
            await host.send_message('{"id": "\\udfff", "type": "list"}')
            raw = await host.get_message()
            assert isinstance(raw, str) and raw.startswith('{"id":"\\udfff","type":"response"')
        hosted = await daemon.host.get(session_id)
        assert hosted.path is not None
    # The session file keeps the text as written (JSON escapes for the surrogate).
    assert '"text":"a\\udc00b"' in hosted.path.read_text()


async def test_a_resume_point_no_integer_can_hold_is_no_resume(agent: Path) -> None:
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        for since in ("9" * 5000, "%C2%B2", "-1"):
            async with connect(daemon, f"/v1/sessions/{session_id}?since={since}") as ws:
                assert (await receive(ws))["type"] == "attached"
                await still_answers(ws, since[:8])
        assert daemon.server.counters["connection_errors"] == 0


def test_since_param() -> None:
    from pitrio.transports.daemon.server import since_param  # (here: the others run without)

    assert since_param("42") == 42
    assert since_param("9" * 19) is None
    assert since_param("²") is None
    assert since_param(None) is None


def test_a_frame_that_cannot_be_encoded_becomes_an_error() -> None:
    from pitrio.transports.daemon.frames import safe_json_frame

    deep: Any = []
    for _ in range(1000):
        deep = [deep]
    frame = orjson.loads(safe_json_frame({"id": deep, "type": "response", "command": "x"}))
    assert frame == {
        "type": "response",
        "command": "x",
        "success": False,
        "error": "Failed to encode the response: the value is nested too deeply",
    }
    frame = orjson.loads(safe_json_frame({"id": 7, "type": "response", "data": {1j}}))
    assert frame["id"] == 7 and "Failed to encode the response" in frame["error"]
    assert orjson.loads(safe_json_frame({"id": 1, "type": "ok"})) == {"id": 1, "type": "ok"}
