"""``bench/daemon_load_poll.py``'s wire pieces against wsproto playing the daemon's side."""

from __future__ import annotations

import socket

import orjson
import pytest
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    CloseConnection,
    Message,
    Ping,
    RejectConnection,
    Request,
    TextMessage,
)

from bench.daemon_load_client import Closed, Tally
from bench.daemon_load_poll import (
    CLOSE,
    PING,
    PONG,
    TEXT,
    PollSession,
    ServerFrames,
    client_frame,
    handshake_answer,
    handshake_request,
)


def accepted_server() -> tuple[WSConnection, bytes]:
    """A wsproto server that accepted :func:`handshake_request`; the bytes of its answer."""
    server = WSConnection(ConnectionType.SERVER)
    request, accept = handshake_request(8080, "/v1/sessions/s1")
    server.receive_data(request)
    [event] = list(server.events())
    assert isinstance(event, Request) and event.target == "/v1/sessions/s1"
    answer = server.send(AcceptConnection())
    result = handshake_answer(answer + b"\x81\x02hi", accept)
    assert result == (True, b"\x81\x02hi")  # frames sent with the answer are kept
    return server, answer


def test_the_handshake_is_accepted_only_with_the_right_key() -> None:
    _, answer = accepted_server()
    assert handshake_answer(answer[:-2], b"x") is None  # the head is not complete yet
    _, wrong_key = handshake_request(8080, "/")
    assert handshake_answer(answer, wrong_key) == (False, b"")
    refused = WSConnection(ConnectionType.SERVER)
    request, accept = handshake_request(8080, "/")
    refused.receive_data(request)
    list(refused.events())
    result = handshake_answer(refused.send(RejectConnection(status_code=404)), accept)
    assert result is not None and result[0] is False


@pytest.mark.parametrize("text", ["", "hello", "é" * 100, "x" * 70_000])
def test_a_client_frame_is_read_by_the_server_as_sent(text: str) -> None:
    """Masked as RFC 6455 requires (wsproto's server refuses an unmasked client frame), with
    the 7-bit, 16-bit and 64-bit lengths."""
    server, _ = accepted_server()
    server.receive_data(client_frame(TEXT, text.encode()))
    events = list(server.events())
    assert [type(e) for e in events] == [TextMessage]
    assert events[0].data == text and events[0].message_finished


def test_server_frames_are_cut_out_whatever_the_reads() -> None:
    """Messages of every length class and control frames, in order, read one byte at a
    time, all at once, and in uneven pieces; a fragmented message comes out whole."""
    server, _ = accepted_server()
    wire = b"".join(
        [
            server.send(Message(data="a")),
            server.send(Message(data="b" * 300)),
            server.send(Ping(payload=b"p")),
            server.send(Message(data="c" * 70_000)),
            server.send(Message(data="first ", message_finished=False)),
            server.send(Message(data="second", message_finished=True)),
            server.send(CloseConnection(code=1008, reason="too slow")),
        ]
    )
    expected = [
        (TEXT, b"a"),
        (TEXT, b"b" * 300),
        (PING, b"p"),
        (TEXT, b"c" * 70_000),
        (TEXT, b"first second"),
        (CLOSE, (1008).to_bytes(2, "big") + b"too slow"),
    ]
    for size in (1, 7, 1000, len(wire)):
        frames = ServerFrames()
        got: list[tuple[int, bytes]] = []
        for start in range(0, len(wire), size):
            got += frames.feed(wire[start : start + size])
        assert got == expected, size


def test_a_pong_answers_and_a_masked_server_frame_is_refused() -> None:
    server, _ = accepted_server()
    server.receive_data(client_frame(PONG, b"p"))
    assert [type(e).__name__ for e in server.events()] == ["Pong"]
    with pytest.raises(Closed) as caught:
        ServerFrames().feed(client_frame(TEXT, b"masked"))
    assert caught.value.code == 1002


def test_the_same_session_in_a_later_step_prompts_with_new_ids() -> None:
    """The ``--slow`` steps share a daemon and its sessions, and the same seed draws the same
    prompt text: with the same ``id`` too the daemon answers it as a repeat (a command's id
    is its idempotency key) and runs nothing. Each step's tag keeps the ids apart."""
    prompts = []
    for tag in ("s1-", "s2-"):
        config = {
            "port": 8080,
            "end_us": 10**15,
            "chunks_min": 100,
            "chunks_max": 300,
            "rate": 50.0,
            "tool_share": 0.2,
            "tag": tag,
        }
        client = PollSession("s1", config, Tally((0, 1)), seed=100003)
        server, _ = accepted_server()
        ours, theirs = socket.socketpair()
        with ours, theirs:
            client.sock = ours
            assert client.prompt(now_us=0)
            server.receive_data(theirs.recv(65536))
        [event] = list(server.events())
        assert isinstance(event, TextMessage)
        prompts.append(orjson.loads(event.data))
    assert prompts[0]["message"] == prompts[1]["message"]  # the same draw...
    assert prompts[0]["id"] != prompts[1]["id"]  # ...under a new id


@pytest.mark.parametrize("size", [0, 1, 100, 124, 125, 126, 127, 200])
def test_a_lone_whole_frame_reads_as_through_the_general_path(size: int) -> None:
    server, _ = accepted_server()
    frame = server.send(Message(data="d" * size))
    fragment = server.send(Message(data="a", message_finished=False))
    # The fast path (one whole small frame, nothing pending) against the general loop (the
    # same frame after a byte held back, or after an unfinished message's first fragment).
    whole = ServerFrames().feed(frame)
    split = ServerFrames()
    assert split.feed(frame[:1]) == []
    assert whole == split.feed(frame[1:]) == [(TEXT, b"d" * size)]
    after = ServerFrames()
    assert after.feed(fragment) == []
    # A new text message after an unfinished one: the general path starts it afresh, and so
    # does the fast path (the fragment is dropped by both).
    assert after.feed(frame) == whole
    assert after.feed(server.send(Message(data="z"))) == [(TEXT, b"z")]
