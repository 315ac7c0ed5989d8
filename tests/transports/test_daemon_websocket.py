"""Frames that break RFC 6455 get a close frame with the right code and a reason (issue 21,
item 17): the connection is failed as §7.1.7 says, not dropped; other clients go on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from tests.transports.daemon_harness import (
    connect,
    create_session,
    is_response,
    receive,
    running_daemon,
    send,
    settled,
    text_of_deltas,
    until,
)
from tests.transports.raw_websocket import (
    OPCODE_BINARY,
    OPCODE_CLOSE,
    OPCODE_CONTINUATION,
    OPCODE_PING,
    OPCODE_PONG,
    OPCODE_TEXT,
    ServerFrames,
    frame,
    raw_upgrade,
    read_until_end,
)


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


VIOLATIONS: list[tuple[str, bytes, int]] = [
    ("invalid UTF-8", frame(OPCODE_TEXT, b'{"type": "get_state", "x": "\xc3\x28"}'), 1007),
    (
        "invalid UTF-8 across fragments",
        frame(OPCODE_TEXT, b'{"x": "\xe2\x82', fin=False) + frame(OPCODE_CONTINUATION, b'("}'),
        1007,
    ),
    ("unmasked frame", frame(OPCODE_TEXT, b'{"type": "get_state"}', masked=False), 1002),
    ("reserved data opcode", frame(0x3, b"??"), 1002),
    ("reserved control opcode", frame(0xB, b""), 1002),
    ("RSV1 bit", frame(OPCODE_TEXT, b"{}", rsv=4), 1002),
    ("RSV2 and RSV3 bits", frame(OPCODE_BINARY, b"{}", rsv=3), 1002),
    ("oversize ping", frame(OPCODE_PING, b"p" * 126), 1002),
    ("fragmented ping", frame(OPCODE_PING, b"p", fin=False), 1002),
    ("stray continuation", frame(OPCODE_CONTINUATION, b"{}"), 1002),
    (
        "new message inside a fragmented one",
        frame(OPCODE_TEXT, b"{", fin=False) + frame(OPCODE_TEXT, b"}"),
        1002,
    ),
    ("8-byte length with the top bit set", bytes([0x81, 0xFF]) + b"\x80" + b"\0" * 7, 1002),
    ("2-byte length for a small payload", bytes([0x81, 0xFE, 0, 5]) + b"mask" + b"hello", 1002),
    ("close with a one-byte body", frame(OPCODE_CLOSE, b"\x03"), 1002),
    ("close with a reserved code", frame(OPCODE_CLOSE, (1005).to_bytes(2, "big")), 1002),
    ("close with an invalid reason", frame(OPCODE_CLOSE, b"\x03\xe8\xff\xfe"), 1007),
]


@pytest.mark.parametrize("endpoint", ["session", "host"])
async def test_protocol_violations_get_a_close_frame_with_code_and_reason(
    agent: Path, endpoint: str
) -> None:
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}" if endpoint == "session" else "/v1/host"
        async with connect(daemon, f"/v1/sessions/{session_id}") as good:
            await receive(good)
            for index, (name, data, code) in enumerate(VIOLATIONS):
                stream, pending = await raw_upgrade(daemon.port, path)
                await stream.send_all(data)
                with trio.fail_after(10):
                    ended = await read_until_end(stream, pending)
                await stream.aclose()
                assert ended is not None, f"{name}: dropped without a close frame"
                assert ended[0] == code, (name, ended)
                assert ended[1], f"{name}: a close frame without a reason"
                # The other client is still served.
                await send(good, {"id": index, "type": "get_state"})
                assert (await until(good, is_response(index)))[-1]["success"]
            with trio.fail_after(5):
                while daemon.server.counters["refused_frames"] != len(VIOLATIONS):  # noqa: ASYNC110
                    await trio.sleep(0.01)
        assert daemon.server.counters["connection_errors"] == 0


async def test_a_message_in_tiny_fragments_costs_about_its_size(tmp_path: Path) -> None:
    # 120,000 two-byte fragments of one text message (just under the limit of the daemon in
    # tests/faults/test_daemon_fuzz.py): kept as one object each they held ~7 MiB until the
    # last one came; joined as they come, a few hundred KiB.
    from tests.faults.test_daemon_fuzz import serve

    pad = "x" * (240_000 - 40)
    text = json.dumps({"id": "frag", "type": "list", "pad": pad}).encode()
    pieces = [text[i : i + 2] for i in range(0, len(text), 2)]
    data = frame(OPCODE_TEXT, pieces[0], fin=False)
    data += b"".join(frame(OPCODE_CONTINUATION, piece, fin=False) for piece in pieces[1:-1])
    async with serve(tmp_path) as served:
        stream, pending = await raw_upgrade(served.port, "/v1/host", token=served.token)
        frames = ServerFrames(stream, pending)
        assert (await frames.next()) is not None  # host_attached
        before = served.rss()
        # A ping between fragments (allowed): its pong says everything before it was read.
        await stream.send_all(data + frame(OPCODE_PING, b"sync"))
        with trio.fail_after(30):
            while (item := await frames.next()) != (OPCODE_PONG, b"sync"):
                assert item is not None
        growth = served.rss() - before
        await stream.send_all(frame(OPCODE_CONTINUATION, pieces[-1]))
        with trio.fail_after(10):
            while (item := await frames.next()) is not None and b'"id":"frag"' not in item[1]:
                pass
        assert item is not None and json.loads(item[1])["success"], item
        await stream.aclose()
    assert growth < 3 << 20, f"{growth / 2**20:.1f} MiB held for one 240 kB message"


def ws_text(value: dict[str, object]) -> str:
    """A frame as a JavaScript client writes it: a lone surrogate escaped."""
    return json.dumps(value, ensure_ascii=True)


async def test_lone_surrogates_in_frames_are_refused_or_kept_never_fatal(
    agent: Path,
) -> None:
    """Issue 36 over websockets: a lone surrogate bound for the OS (a bash command, an export
    path, a session's cwd) is refused with the field named; one that is only data (a prompt,
    a session name) is kept and written back escaped, in frames that are valid UTF-8; the
    connection and the session keep serving."""
    async with running_daemon(agent) as daemon:
        async with connect(daemon, "/v1/host") as host:
            await receive(host)  # host_attached
            await host.send_message(ws_text({"id": "c", "type": "create", "cwd": "/x\ud800"}))
            refused = (await until(host, is_response("c")))[-1]
            assert refused["success"] is False
            assert refused["error"].endswith(
                "The cwd contains a lone surrogate (\\ud800 at offset 2): "
                "it cannot be encoded as UTF-8"
            ), refused["error"]
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            for request_id, command, field, problem in [
                ("b", {"type": "bash", "command": "echo \ud800"}, "command", "ud800 at offset 5"),
                (
                    "e",
                    {"type": "export_html", "outputPath": "p\udfff.html"},
                    "outputPath",
                    "udfff at offset 1",
                ),
            ]:
                await ws.send_message(ws_text({"id": request_id, **command}))
                response = (await until(ws, is_response(request_id)))[-1]
                assert (response["success"], response["error"]) == (
                    False,
                    f"The {field} contains a lone surrogate (\\{problem}): "
                    "it cannot be encoded as UTF-8",
                )
            await ws.send_message(
                ws_text({"id": "n", "type": "set_session_name", "name": "a\ud800"})
            )
            assert (await until(ws, is_response("n")))[-1]["success"] is True
            await ws.send_message(ws_text({"id": "p", "type": "prompt", "message": "half \udc00"}))
            frames = await until(ws, settled)
            assert "half \udc00" in text_of_deltas(frames)
            await ws.send_message(ws_text({"id": "s", "type": "get_state"}))
            state = (await until(ws, is_response("s")))[-1]
            assert state["data"]["sessionName"] == "a\ud800"
            await ws.send_message(ws_text({"id": "f", "type": "bash", "command": "echo fine"}))
            done = (await until(ws, is_response("f")))[-1]
            assert done["data"]["output"] == "fine\n"
        assert daemon.server.counters["encode_errors"] == 0
