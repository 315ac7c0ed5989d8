"""``bench/daemon_load_client.py``'s wsproto client, against trio-websocket's server."""

from __future__ import annotations

import orjson
import pytest
import trio
from trio_websocket import WebSocketRequest, serve_websocket

from bench.daemon_load_client import Closed, FrameClient, Tally, TurnReader
from pitrio.actors.model_router.providers.faux_load import LoadRequest


async def start_server(nursery: trio.Nursery, handler: object) -> int:
    """A trio-websocket server on a free loopback port; the port."""
    server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
    return int(server.port)


async def test_messages_in_order_then_the_close_code() -> None:
    """Every message comes whole and in order (small ones sharing a read, a big one spread
    over many), then :class:`Closed` with the server's code and reason."""
    sent = [f"m{i}" for i in range(200)] + ["x" * 700_000, "é" * 10, "last"]

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        assert await ws.get_message() == "hello"
        for text in sent:
            await ws.send_message(text)
        await ws.aclose(4001, "bye")

    with trio.fail_after(10):  # a pong never sent would stall the server, not fail
        async with trio.open_nursery() as nursery:
            port = await start_server(nursery, handler)
            client = await FrameClient.connect(port, "/v1/sessions/s1")
            await client.send_message("hello")
            received = [await client.get_message() for _ in sent]
            try:
                await client.get_message()
            except Closed as exc:
                assert (exc.code, exc.reason) == (4001, "bye")
            else:
                raise AssertionError("no Closed after the server's close")
            await client.aclose()
            nursery.cancel_scope.cancel()
    assert received == sent


async def test_a_ping_is_answered_and_a_lost_connection_reported() -> None:
    """The server's ping gets its pong (trio-websocket's ``ping`` returns only then); a
    connection dropped without a close frame is :class:`Closed` with 1006."""
    ponged = trio.Event()

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        await ws.send_message("one")
        await ws.ping(b"are-you-there")
        ponged.set()
        await ws.send_message("two")
        await trio.aclose_forcefully(ws._stream)  # no close frame

    with trio.fail_after(10):  # a pong never sent would stall the server, not fail
        async with trio.open_nursery() as nursery:
            port = await start_server(nursery, handler)
            client = await FrameClient.connect(port, "/")
            assert await client.get_message() == "one"
            assert await client.get_message() == "two"
            assert ponged.is_set()
            try:
                await client.get_message()
            except Closed as exc:
                assert exc.code == 1006
            else:
                raise AssertionError("no Closed after the connection was lost")
            await client.aclose()
            nursery.cancel_scope.cancel()


def prompt_response(**fields: object) -> bytes:
    """The daemon's answer to a load client's prompt ``t0``, with ``fields`` over a success."""
    frame = {"id": "t0", "type": "response", "command": "prompt", "success": True}
    frame["data"] = {"disposition": "started"}
    return orjson.dumps({**frame, **fields})


@pytest.mark.parametrize(
    "answer",
    [
        prompt_response(duplicate=True),  # the id and text of an earlier step's prompt
        prompt_response(success=False, error="rate limited"),
    ],
)
def test_a_prompt_that_starts_no_run_ends_the_turn_as_an_error(answer: bytes) -> None:
    """A repeat or a refusal starts no run, so no ``agent_settled`` will follow: the turn ends
    there, counted as an error (not a turn), instead of the client waiting for ever."""
    tally = Tally((0, 10**12))
    reader = TurnReader("s1", LoadRequest(chunks=3, rate=50.0), tally, last_seq=7)
    assert reader.take(answer, arrived=1) is True
    assert reader.finish() == 7
    assert tally.counts["errors"] == 1 and tally.counts["turns"] == 0
    assert tally.counts["bad_replies"] == 0
    assert "prompt response" in tally.faults[0]


def test_a_started_prompt_waits_for_the_run_to_settle() -> None:
    tally = Tally((0, 10**12))
    reader = TurnReader("s1", LoadRequest(chunks=3, rate=50.0), tally, last_seq=7)
    assert reader.take(prompt_response(), arrived=1) is False
    assert reader.take(b'{"type":"agent_start","seq":8}', arrived=2) is False
    assert reader.take(b'{"type":"agent_settled","aborted":false,"seq":9}', arrived=3) is True
    assert tally.counts["errors"] == 0
