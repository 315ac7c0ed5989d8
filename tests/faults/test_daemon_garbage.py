"""Websocket clients that send garbage to the daemon: each frame is answered with an error or
the connection is closed with a code and a reason; the session, its other clients and its file
are unaffected.

Frames a websocket library would refuse to produce (invalid UTF-8 in a text frame, an unmasked
client frame, a reserved opcode, bytes that are not HTTP at all) go out through a raw TCP
client with a hand-made handshake (:mod:`tests.transports.raw_websocket`), which the
half-open cases reuse.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import ConnectionClosed, WebSocketConnection

from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.session_store.maintenance import check_file
from pitrio.transports.serve import Daemon
from tests.faults.support import file_lines
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
from tests.transports.raw_websocket import OPCODE_TEXT, frame, raw_upgrade, read_until_end

REPLY = "".join(chr(97 + i % 26) for i in range(400))
"""The reply streamed while garbage arrives: 200 chunks of 2 characters."""
STUCK_REPLY = "".join(chr(97 + i % 26) for i in range(200_000))
"""The reply streamed beside a client that does not read: 200 events of 1,000 characters,
whatever the fan-out merges, eight times what the socket buffers between the daemon and that
client hold (its 8 KB send buffer, the client's 4 KB receive buffer, each doubled by the
kernel), so the daemon's send to it is stuck and more events wait behind it. (A megabyte made
the same order; it cost 2.5 s a test for the reading client, whose acknowledgements the small
send buffer paces.)"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


# -- a raw websocket client -------------------------------------------------------------------


@dataclass
class SilentClientRun:
    """A run streamed to two clients of one session: ``good`` reads (``frames``: what it got
    up to the run's settling), ``silent`` is a raw client that never reads (``pending``: the
    bytes read past its handshake)."""

    daemon: Daemon
    session_id: str
    good: WebSocketConnection
    frames: list[dict[str, Any]]
    silent: trio.SocketStream
    pending: bytes


@contextlib.asynccontextmanager
async def run_beside_a_silent_client(
    agent: Path, faux: FauxProvider, config: dict[str, Any]
) -> AsyncIterator[SilentClientRun]:
    """A daemon (``config``) whose session streams ``faux``'s reply to a reading client and
    to one that does not read (small socket buffers on both sides), until the run settles."""
    async with running_daemon(agent, faux, daemon=config) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        silent, pending = await raw_upgrade(daemon.port, path, receive_buffer=4096)
        try:
            async with connect(daemon, path) as good:
                await receive(good)
                await send(good, {"id": "p", "type": "prompt", "message": "a long one"})
                frames = await until(good, settled, seconds=60)
                yield SilentClientRun(daemon, session_id, good, frames, silent, pending)
        finally:
            await silent.aclose()


# -- checks shared by the cases ---------------------------------------------------------------


async def still_served(ws: WebSocketConnection, tag: str) -> None:
    """The well-behaved client's commands are still answered."""
    await send(ws, {"id": tag, "type": "get_state"})
    response = (await until(ws, is_response(tag)))[-1]
    assert response["success"], response


async def clients_of(daemon: Daemon, session_id: str) -> int:
    hosted = await daemon.host.get(session_id)
    return len(hosted.clients)


async def wait_clients(daemon: Daemon, session_id: str, count: int) -> None:
    """Until the session has ``count`` attached clients (a closed one is detached)."""
    with trio.fail_after(10):
        while await clients_of(daemon, session_id) != count:  # noqa: ASYNC110
            await trio.sleep(0.01)


def assert_file_whole(path: Path, texts: list[str]) -> None:
    """The file checks clean and holds the replies with exactly these texts, in order."""
    assert not check_file(path), [p.describe(str(path)) for p in check_file(path)]
    replies = [
        "".join(b.get("text", "") for b in line["message"]["content"])
        for line in file_lines(path)
        if line.get("type") == "message" and line["message"]["role"] == "assistant"
    ]
    assert replies == texts


# -- the cases --------------------------------------------------------------------------------

GARBAGE: list[tuple[str | bytes, str]] = [
    (b"\x00\x01binary\xff", "binary frames are not supported"),
    ("{not json", "Failed to parse command"),
    ("", "Failed to parse command"),
    ('"\\ud800 lone surrogate"', "Unknown command: undefined"),  # read as pi reads it
    ("[" * 5000 + "]" * 5000, "Failed to parse command"),
    ("[1, 2, 3]", "Unknown command: undefined"),
    ("null", "Unknown command: undefined"),
    ('{"id": "t", "type": 5}', "Unknown command"),
    ('{"id": "u", "type": "format_my_disk"}', "Unknown command: format_my_disk"),
    ('{"id": "m", "type": "prompt", "message": {"nested": true}}', "message must be a string"),
    ('{"id": "r", "type": "resume", "since": -4}', "since must be a non-negative integer"),
]


async def test_garbage_frames_get_errors_and_the_session_goes_on(agent: Path) -> None:
    faux = FauxProvider(
        [FauxReply(text=REPLY, chunk_size=2, chunk_delay=0.002), FauxReply(text="second")]
    )
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as good, connect(daemon, path) as bad:
            await receive(good)
            await receive(bad)
            await send(good, {"id": "p", "type": "prompt", "message": "stream please"})
            good_frames = await until(good, lambda f: f.get("type") == "message_update")
            # Garbage while the other client's reply streams.
            for payload, _ in GARBAGE:
                await bad.send_message(payload)
            bad_frames: list[dict[str, Any]] = []
            errors: list[dict[str, Any]] = []
            with trio.fail_after(10):
                while len(errors) < len(GARBAGE):
                    bad_frames.append(json.loads(await bad.get_message()))
                    if bad_frames[-1].get("type") == "response":
                        errors.append(bad_frames[-1])
            assert all(not e["success"] for e in errors), errors
            texts = sorted(e["error"] for e in errors)
            for _, expected in GARBAGE:
                match = next((t for t in texts if expected in t), None)
                assert match is not None, (expected, texts)
                texts.remove(match)
            # The ids that could be read are kept on the answers.
            assert {e["id"] for e in errors if "id" in e} == {"t", "u", "m", "r"}
            # The garbage client is still a client: it gets answers and the run's events.
            await send(bad, {"id": "b1", "type": "get_state"})
            bad_frames += await until(bad, settled)
            if not any(is_response("b1")(f) for f in bad_frames):
                bad_frames += await until(bad, is_response("b1"))
            assert next(f for f in bad_frames if is_response("b1")(f))["success"]
            good_frames += await until(good, settled)
            # Both clients got the whole reply; the well-behaved one saw nothing of the garbage.
            assert text_of_deltas(good_frames) == REPLY
            assert text_of_deltas(bad_frames) == REPLY
            assert [f["id"] for f in good_frames if f.get("type") == "response"] == ["p"]
            # The session takes the garbage client's next real prompt.
            await send(bad, {"id": "p2", "type": "prompt", "message": "now properly"})
            second = await until(
                bad, lambda f: settled(f) or (is_response("p2")(f) and not f["success"])
            )
            assert settled(second[-1]), second
            assert text_of_deltas(second) == "second"
        hosted = await daemon.host.get(session_id)
        assert hosted.path is not None
        assert daemon.server.counters["connection_errors"] == 0
    assert_file_whole(hosted.path, [REPLY, "second"])


async def test_frames_that_break_the_protocol_close_that_connection_only(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text=REPLY, chunk_size=2, chunk_delay=0.002)])
    config = {"max_message_size": 64 * 1024}
    async with running_daemon(agent, faux, daemon=config) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as good:
            await receive(good)
            await send(good, {"id": "p", "type": "prompt", "message": "stream please"})
            await until(good, lambda f: f.get("type") == "message_update")

            # Over the size limit: closed with 1009 and the limit.
            async with connect(daemon, path) as big:
                await receive(big)
                await big.send_message(json.dumps({"type": "prompt", "message": "x" * 100_000}))
                with trio.fail_after(10), pytest.raises(ConnectionClosed) as closed:
                    while True:
                        await big.get_message()
                why = closed.value.reason
                assert why is not None and why.code == 1009
                assert "maximum message size" in (why.reason or "")
            with trio.fail_after(5):
                while daemon.server.counters["refused_frames"] != 1:  # noqa: ASYNC110
                    await trio.sleep(0.01)

            # Frames the websocket layer refuses: invalid UTF-8 in a text frame (1007), a client
            # frame without a mask, a reserved opcode (1002): a close frame with the code (the
            # full list: tests/transports/test_daemon_websocket.py).
            cases = [
                (frame(OPCODE_TEXT, b'{"type": "get_state", "x": "\xc3\x28"}'), 1007),
                (frame(OPCODE_TEXT, b'{"type": "get_state"}', masked=False), 1002),
                (frame(0x3, b"??"), 1002),
            ]
            for index, (data, code) in enumerate(cases, start=1):
                stream, pending = await raw_upgrade(daemon.port, path)
                await stream.send_all(data)
                with trio.fail_after(10):
                    ended = await read_until_end(stream, pending)
                assert ended is not None and ended[0] == code, (ended, data[:8])
                await stream.aclose()
                # One more refused frame counted (the 1009 above was the first). The daemon's
                # reader counts it when trio-websocket hands it the close, which may come
                # after this client has seen the connection end.
                with trio.fail_after(5):
                    while daemon.server.counters["refused_frames"] < 1 + index:  # noqa: ASYNC110
                        await trio.sleep(0.01)
                assert daemon.server.counters["refused_frames"] == 1 + index
                await still_served(good, f"after-{index}")

            # Not HTTP at all: a plain 400 before any websocket exists.
            stream = await trio.open_tcp_stream("127.0.0.1", daemon.port)
            await stream.send_all(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
            answer = b""
            with trio.fail_after(10):
                while chunk := await stream.receive_some(4096):
                    answer += chunk
            assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
            await stream.aclose()

            frames = await until(good, settled)
            assert REPLY.endswith(text_of_deltas(frames))
            await wait_clients(daemon, session_id, 1)
        hosted = await daemon.host.get(session_id)
        assert hosted.path is not None
        assert daemon.server.counters["connection_errors"] == 0
        assert daemon.server.rejected["bad_request"] == 1
    assert_file_whole(hosted.path, [REPLY])


async def test_a_refused_frame_is_counted_when_the_sender_meets_the_close_first(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The order forced here: the daemon's sender is inside a send that cannot finish (the
    # client does not read) when the websocket layer refuses an oversized message; the
    # refusal's close frame then waits for that send, and once the client reads again the
    # sender finishes it, meets the close on its next frame and ends the connection while
    # the daemon's reader is still waiting for a message. The reader never sees the close,
    # so the refusal must be read from the connection itself (found as a flaky run of the
    # test above, where a streaming session made the same order possible).
    refusing = trio.Event()
    handle_message = WebSocketConnection._handle_message_event

    async def watched(self: WebSocketConnection, event: Any) -> None:
        # Observes only: set just before the layer refuses the message, with no checkpoint
        # in between, so the refusal's close reason is set when the test goes on.
        if self._message_size + len(event.data) > self._max_message_size:
            refusing.set()
        await handle_message(self, event)

    monkeypatch.setattr(WebSocketConnection, "_handle_message_event", watched)
    reply = STUCK_REPLY
    faux = FauxProvider([FauxReply(text=reply, chunk_size=1_000)])
    config = {
        "max_message_size": 64 * 1024,
        "ping_interval": None,  # a ping would wait for the stuck send too
        "stall_seconds": 60.0,  # the stuck send is the point: no watchdog
        "send_buffer": 8192,
    }
    async with run_beside_a_silent_client(agent, faux, config) as run:
        # The sender to the silent client is stuck in a send, the rest of the run queued.
        assert text_of_deltas(run.frames) == reply
        # One byte over the limit: the layer has read all of it when it refuses, so the
        # daemon's close leaves nothing unread (which would make it a reset).
        await run.silent.send_all(frame(OPCODE_TEXT, b"x" * (64 * 1024 + 1)))
        with trio.fail_after(10):
            await refusing.wait()
        # The client reads again with a window it can open. Its 4 KB buffer fixed the window
        # it may advertise at the handshake; the kernel then holds back every update smaller
        # than the segments it has seen (silly-window avoidance), so the daemon's send waits
        # for its zero-window probes, whose backoff grows with how long the window was shut
        # (seconds, found as this test's flaky timeouts). Raising the buffer and the clamp
        # lets the first read advertise room at once; what the daemon does is unchanged.
        run.silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        run.silent.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, 1 << 19)
        with trio.fail_after(10):
            ended = await read_until_end(run.silent, run.pending)
        assert ended is None or ended[0] == 1009, ended
        await run.silent.aclose()
        counters = run.daemon.server.counters
        await wait_clients(run.daemon, run.session_id, 1)
        with trio.fail_after(5):
            while counters["refused_frames"] != 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
        await still_served(run.good, "after")
    assert counters["connection_errors"] == 0


async def test_a_bad_frame_from_a_client_that_does_not_read_ends_its_connection(
    agent: Path,
) -> None:
    # The daemon's sender is stuck in a send to a client that does not read when that client
    # sends a frame the websocket layer refuses. The close frame waits behind the stuck send;
    # it is given up after close_timeout and the connection ends, long before the watchdog
    # (60 s here) would end it.
    reply = STUCK_REPLY
    faux = FauxProvider([FauxReply(text=reply, chunk_size=1_000)])
    config = {
        "ping_interval": None,
        "stall_seconds": 60.0,
        "close_timeout": 0.5,
        "send_buffer": 8192,
    }
    async with run_beside_a_silent_client(agent, faux, config) as run:
        assert text_of_deltas(run.frames) == reply
        assert await clients_of(run.daemon, run.session_id) == 2
        await run.silent.send_all(frame(0x3, b"??"))  # a reserved opcode
        await wait_clients(run.daemon, run.session_id, 1)
        counters = run.daemon.server.counters
        assert counters["refused_frames"] == 1 and counters["slow_closes"] == 0
        await still_served(run.good, "after")
    assert counters["connection_errors"] == 0


async def test_garbage_on_the_host_endpoint(agent: Path) -> None:
    async with running_daemon(agent) as daemon, connect(daemon, "/v1/host") as host:
        assert (await receive(host))["type"] == "host_attached"
        for payload in (b"\xff\xfe", "{oops", "[]", '{"id": 1, "type": "drop_tables"}'):
            await host.send_message(payload)
            reply = await receive(host)
            assert reply["type"] == "response" and not reply["success"], reply
        await send(host, {"id": 2, "type": "create", "cwd": 42})
        assert "cwd must be a string" in (await until(host, is_response(2)))[-1]["error"]
        await send(host, {"id": 3, "type": "open", "sessionId": "../../etc/passwd"})
        assert "Invalid session id" in (await until(host, is_response(3)))[-1]["error"]
        await send(host, {"id": 4, "type": "list"})
        assert (await until(host, is_response(4)))[-1]["data"]["sessions"] == []
