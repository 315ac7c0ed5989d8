"""``pitrio serve`` in-process: real websocket clients on 127.0.0.1 against the daemon."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, wrap_client_stream

from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.session.actor import SessionActor
from pitrio.transports.daemon.server import DaemonConfig, DaemonServer, UnsafeBindError
from tests.transports.daemon_harness import (
    AUTH,
    TOKEN,
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


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


def seqs(frames: list[dict[str, Any]]) -> list[int]:
    return [f["seq"] for f in frames if "seq" in f and f.get("type") != "attached"]


async def test_two_clients_share_one_session(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text="one two three four five six", chunk_size=3)])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as a, connect(daemon, path) as b:
            hello = await receive(a)
            assert hello["type"] == "attached" and hello["sessionId"] == session_id
            assert (await receive(b))["type"] == "attached"
            await send(a, {"id": "p", "type": "prompt", "message": "go"})
            # B's commands are served while A's run streams; a second prompt is refused.
            await send(b, {"id": "s", "type": "get_state"})
            await send(b, {"id": "p2", "type": "prompt", "message": "me too"})
            frames_a = await until(a, settled)
            frames_b = await until(b, settled)
            events_a = [f for f in frames_a if f.get("type") != "response"]
            events_b = [f for f in frames_b if f.get("type") != "response"]
            assert events_a == events_b  # the same events, the same seqs
            assert seqs(events_a) == list(range(1, len(events_a) + 1))
            responses = {f["id"]: f for f in frames_a + frames_b if f.get("type") == "response"}
            assert responses["p"]["success"]
            assert responses["s"]["success"]
            assert text_of_deltas(events_a) == "one two three four five six"
            # pi's order: the prompt's response precedes its run's agent_start.
            kinds = [f.get("type") for f in frames_a]
            assert kinds.index("response") < kinds.index("agent_start")
            if "p2" not in responses:
                responses.update(
                    {f["id"]: f for f in await until(b, is_response("p2")) if "id" in f}
                )
            p2 = responses["p2"]
            assert p2["success"] or "already processing" in p2["error"]


async def test_reconnect_and_resume(agent: Path) -> None:
    text = "".join(chr(97 + i % 26) for i in range(240))
    faux = FauxProvider([FauxReply(text=text, chunk_size=2, chunk_delay=0.004)])
    async with running_daemon(agent, faux) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as first:
            hello = await receive(first)
            await send(first, {"id": "p", "type": "prompt", "message": "long"})
            seen = await until(first, lambda f: f.get("seq", 0) >= 20)
        last = max(seqs(seen))
        async with connect(daemon, path) as second:
            await receive(second)
            await send(
                second, {"id": "r", "type": "resume", "since": last, "stream": hello["stream"]}
            )
            rest = await until(second, settled)
        replayed = [f for f in rest if "seq" in f and f.get("type") not in ("response", "resync")]
        # The second socket is attached live before its resume is read, so a live frame may
        # reach it ahead of the replay of the ones before it: each seq after ``last`` comes
        # exactly once, and in seq order they are the rest of the reply.
        replayed.sort(key=lambda f: f["seq"])
        assert seqs(replayed)[0] == last + 1
        assert seqs(replayed) == list(range(last + 1, last + 1 + len(replayed)))
        assert text_of_deltas(seen) + text_of_deltas(replayed) == text
        response = next(f for f in rest if f.get("id") == "r")
        assert response["success"] and response["data"]["replayed"] >= 0
        # The URL form: the attached frame first, then the replay.
        async with connect(daemon, f"{path}?since={last}&stream={hello['stream']}") as third:
            assert (await receive(third))["type"] == "attached"
            again = await until(third, settled)
        assert text_of_deltas(seen) + text_of_deltas(again) == text
        # Another stream's numbers (a restarted daemon) cannot be replayed.
        async with connect(daemon, path) as fourth:
            await receive(fourth)
            await send(fourth, {"id": "r", "type": "resume", "since": last, "stream": "other"})
            response = (await until(fourth, is_response("r")))[-1]
            assert response["data"]["resync"] is True


async def test_resume_too_old_answers_resync(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text="x" * 200, chunk_size=1)])
    async with running_daemon(agent, faux, host={"replay_frames": 16}) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with connect(daemon, path) as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "go"})
            await until(ws, settled)
            await send(ws, {"id": "r", "type": "resume", "since": 2})
            response = (await until(ws, is_response("r")))[-1]
            assert response["success"] and response["data"]["resync"] is True
            await send(ws, {"id": "m", "type": "get_messages"})
            messages = (await until(ws, is_response("m")))[-1]["data"]["messages"]
            # pi 1.6.0: get_messages starts with the session's system message.
            assert [m["role"] for m in messages] == ["system", "user", "assistant"]
            await send(ws, {"id": "bad", "type": "resume", "since": "x"})
            bad = (await until(ws, is_response("bad")))[-1]
            assert not bad["success"]


async def _stalled_client(daemon: Any, path: str, nursery: trio.Nursery) -> Any:
    """A client with a tiny receive buffer (so the server's sends block when it stops)."""
    stream = await trio.open_tcp_stream("127.0.0.1", daemon.port)
    stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return await wrap_client_stream(
        nursery, stream, "127.0.0.1", path, extra_headers=AUTH, message_queue_size=1
    )


async def test_stalled_client_is_coalesced_then_closed(agent: Path) -> None:
    # 5,000 one-character deltas: far past the stalled client's 64 events (so they merge),
    # while the reading client, paced by the 8 KB send buffer's acknowledgements, gets them in
    # under a second (20,000 took 2-4 s).
    text = "".join(chr(97 + i % 26) for i in range(5_000))
    faux = FauxProvider([FauxReply(text=text, chunk_size=1)])
    # close_timeout: the close frame waits behind the blocked send until the client reads.
    config = {
        "client_capacity": 64,
        "stall_seconds": 0.5,
        "send_buffer": 8192,
        "close_timeout": 60.0,
    }
    async with running_daemon(agent, faux, daemon=config) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"
        async with trio.open_nursery() as nursery:
            slow = await _stalled_client(daemon, path, nursery)
            async with connect(daemon, path) as fast:
                await receive(fast)
                started = trio.current_time()
                await send(fast, {"id": "p", "type": "prompt", "message": "go"})
                frames = await until(fast, settled, seconds=60)
                elapsed = trio.current_time() - started
                # The reader kept up: it got all 5,000 deltas' text, in order.
                assert text_of_deltas(frames) == text
                with trio.fail_after(10):
                    while daemon.server.counters["slow_closes"] == 0:  # noqa: ASYNC110
                        await trio.sleep(0.05)
                stats = await daemon.host.host_stats()
                assert stats.coalesced_total > 0
            # The stalled client reads again: what was sent, then the 1008 close.
            with trio.fail_after(20), pytest.raises(ConnectionClosed) as closed:
                while True:
                    await slow.get_message()
            assert closed.value.reason.code == 1008
            assert "too slow" in (closed.value.reason.reason or "")
            nursery.cancel_scope.cancel()
        assert elapsed < 30


async def test_crashed_session_restarts_and_clients_are_told(agent: Path) -> None:
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "before the crash"})
            await until(ws, settled)
            hosted = await daemon.host.get(session_id)
            assert hosted.started is not None

            async def boom(actor: SessionActor) -> None:
                raise RuntimeError("injected failure")

            with pytest.raises(Exception):  # noqa: B017 - the actor dies answering
                await hosted.started.session.invoke(boom)
            notice = (await until(ws, lambda f: f.get("type") == "session_restarted"))[-1]
            assert notice["reason"] == "RuntimeError: injected failure"
            assert notice["restarts"] == 1
            await send(ws, {"id": "m", "type": "get_messages"})
            messages = (await until(ws, is_response("m")))[-1]["data"]["messages"]
            # pi 1.6.0: the restarted session's context starts with its system message.
            assert [m["role"] for m in messages] == ["system", "user", "assistant"]
            assert [m["content"][0]["text"] for m in messages[1:]] == ["before the crash"] * 2
            await send(ws, {"id": "p2", "type": "prompt", "message": "after"})
            frames = await until(ws, settled)
            assert text_of_deltas(frames) == "after"


async def test_rejections(agent: Path) -> None:
    config = {"max_message_size": 1024, "allowed_origins": ("https://ok.example",)}
    async with running_daemon(agent, daemon=config) as daemon:
        session_id = await create_session(daemon)
        path = f"/v1/sessions/{session_id}"

        async def refused(target: str, headers: list[tuple[bytes, bytes]], **kw: Any) -> int:
            with pytest.raises(ConnectionRejected) as rejected:
                async with connect(daemon, target, headers=headers, **kw):
                    pass
            return rejected.value.status_code

        assert await refused(path, []) == 401
        assert await refused(path, [(b"Authorization", b"Bearer wrong")]) == 401
        assert await refused("/v1/host", [(b"Authorization", b"Bearer wrong")]) == 401
        evil = [*AUTH, (b"Origin", b"http://evil.example")]
        assert await refused(path, evil) == 403
        assert await refused("/v1/sessions/..%2F..%2Fetc", AUTH) == 400
        assert await refused("/v1/sessions/0123-missing", AUTH) == 404
        assert await refused("/v1/nothing", AUTH) == 404
        only_token = [f"pitrio.token.{TOKEN}"]
        assert await refused(path, [], subprotocols=only_token) == 400
        # The browser's way: the token as a subprotocol next to pitrio.v1; allowed origin.
        ok_origin = [(b"Origin", b"https://ok.example")]
        protocols = ["pitrio.v1", f"pitrio.token.{TOKEN}"]
        async with connect(daemon, path, headers=ok_origin, subprotocols=protocols) as ws:
            assert ws.subprotocol == "pitrio.v1"
            assert (await receive(ws))["type"] == "attached"
            # Malformed frames are answered, the connection stays.
            await ws.send_message("{not json")
            error = await receive(ws)
            assert error["command"] == "parse" and not error["success"]
            await ws.send_message(b"\x00binary")
            assert "binary" in (await receive(ws))["error"]
            await send(ws, {"id": 1, "type": "no_such_command"})
            unknown = await receive(ws)
            assert unknown == {
                "id": 1,
                "type": "response",
                "command": "no_such_command",
                "success": False,
                "error": "Unknown command: no_such_command",
            }
            # A frame above the size limit closes the connection with 1009.
            await ws.send_message(json.dumps({"type": "prompt", "message": "x" * 2000}))
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
            assert closed.value.reason.code == 1009
        assert daemon.server.rejected["auth"] == 3


async def test_message_rate_limit(agent: Path) -> None:
    async with running_daemon(agent, daemon={"message_rate": 1, "message_burst": 3}) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            for index in range(6):
                await send(ws, {"id": index, "type": "get_state"})
            frames = [await receive(ws) for _ in range(6)]
            limited = [f for f in frames if f.get("command") == "rate_limit"]
            assert len(limited) == 3 and "Rate limit exceeded" in limited[0]["error"]
            assert {f["id"] for f in frames if f.get("command") == "get_state"} == {0, 1, 2}


async def test_non_loopback_needs_a_token() -> None:
    with pytest.raises(UnsafeBindError):
        DaemonServer(DaemonConfig(host="0.0.0.0", token=None), None, None)  # type: ignore[arg-type]


async def test_http_endpoints(agent: Path) -> None:
    async with running_daemon(agent) as daemon, httpx.AsyncClient() as http:
        base = f"http://127.0.0.1:{daemon.port}"
        health = await http.get(f"{base}/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert (await http.get(f"{base}/metrics")).status_code == 401
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "count me"})
            await until(ws, settled)
            metrics = await http.get(
                f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}
            )
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain; version=0.0.4")
        text = metrics.text
        assert 'pitrio_sessions{status="live"} 1' in text
        assert 'pitrio_connections{endpoint="session"} 1' in text
        assert "# TYPE pitrio_events_total counter" in text
        page = await http.get(f"{base}/")
        assert page.status_code == 200 and "<title>pitrio</title>" in page.text
        assert "Content-Security-Policy" in page.headers
        assert (await http.get(f"{base}/app.js")).status_code == 200
        assert (await http.get(f"{base}/../pyproject.toml")).status_code == 404
        assert (await http.get(f"{base}/v1/host")).status_code == 426
        assert (await http.post(f"{base}/healthz")).status_code == 405


async def test_host_endpoint(agent: Path) -> None:
    async with running_daemon(agent) as daemon, connect(daemon, "/v1/host") as host:
        assert (await receive(host))["type"] == "host_attached"
        await send(host, {"id": 1, "type": "create", "name": "via host"})
        created = (await until(host, is_response(1)))[-1]["data"]
        session_id = created["sessionId"]
        await send(host, {"id": 2, "type": "list"})
        listed = (await until(host, is_response(2)))[-1]["data"]["sessions"]
        assert [(s["id"], s["name"], s["status"]) for s in listed] == [
            (session_id, "via host", "live")
        ]
        await send(host, {"id": 3, "type": "close", "sessionId": session_id})
        closed = {"type": "session_closed", "sessionId": session_id}
        frames = await until(host, lambda f: f == closed)
        if not any(is_response(3)(f) for f in frames):
            await until(host, is_response(3))
        await send(host, {"id": 4, "type": "open", "sessionId": "../x"})
        assert "Invalid session id" in (await until(host, is_response(4)))[-1]["error"]
        await send(host, {"id": 5, "type": "create", "model": "nope/none"})
        assert not (await until(host, is_response(5)))[-1]["success"]
        await send(host, {"id": 6, "type": "delete", "sessionId": session_id})
        assert (await until(host, is_response(6)))[-1]["success"]
        await send(host, {"id": 7, "type": "list"})
        assert (await until(host, is_response(7)))[-1]["data"]["sessions"] == []


async def test_new_session_fork_and_clone_create_other_sessions(agent: Path) -> None:
    async with running_daemon(agent) as daemon:
        session_id = await create_session(daemon)
        async with connect(daemon, f"/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "first"})
            await until(ws, settled)
            await send(ws, {"id": "fm", "type": "get_fork_messages"})
            entry = (await until(ws, is_response("fm")))[-1]["data"]["messages"][0]["entryId"]
            await send(ws, {"id": "f", "type": "fork", "entryId": entry})
            fork = (await until(ws, is_response("f")))[-1]["data"]
            assert fork["text"] == "first" and fork["sessionId"] != session_id
            await send(ws, {"id": "c", "type": "clone"})
            clone = (await until(ws, is_response("c")))[-1]["data"]
            await send(ws, {"id": "n", "type": "new_session"})
            new = (await until(ws, is_response("n")))[-1]["data"]
            await send(ws, {"id": "sw", "type": "switch_session", "sessionPath": "/tmp/x"})
            assert not (await until(ws, is_response("sw")))[-1]["success"]
        async with connect(daemon, f"/v1/sessions/{clone['sessionId']}") as cloned:
            await receive(cloned)
            await send(cloned, {"id": "m", "type": "get_messages"})
            messages = (await until(cloned, is_response("m")))[-1]["data"]["messages"]
            assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert len({session_id, fork["sessionId"], clone["sessionId"], new["sessionId"]}) == 4
