"""``pitrio acp --connect URL``: an editor on a running daemon's sessions. The ACP client and
a web-page client (a raw websocket on ``/v1/sessions/{id}``) share one live session and see
the same conversation; killing the ACP process leaves the daemon's session serving."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import trio

from pitrio.actors.model_router import FauxProvider
from pitrio.actors.model_router.providers.faux_rules import FixtureRules, slow_text
from pitrio.transports.rpc.server import SHUTDOWN_SECONDS
from pitrio.transports.serve import Daemon
from tests.transports.acp.harness import PITRIO, Agent, acp_env, replies, schema_problems
from tests.transports.daemon_harness import (
    TOKEN,
    connect,
    receive,
    running_daemon,
    send,
    settled,
    text_of_deltas,
    until,
)

EXIT_BOUND = SHUTDOWN_SECONDS / 2
"""A closed input's exit takes well under a second: one that waited out the shutdown bound
(a close handshake never answered) fails."""


async def _ends_cleanly(agent: Agent) -> None:
    """Close the ACP process's input: it exits 0 (without waiting out the shutdown bound),
    having written only schema-valid lines."""
    assert agent.process.stdin is not None
    await agent.process.stdin.aclose()
    with trio.fail_after(EXIT_BOUND):
        assert await agent.process.wait() == 0
    assert schema_problems(agent) == []


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def _acp_on(daemon: Daemon, work: Path, *flags: str, port: int | None = None) -> trio.Process:
    """``pitrio acp --connect`` to ``daemon`` (through ``port`` when given), with an agent dir
    of its own (so nothing of the daemon's is read from disk)."""
    url = f"http://127.0.0.1:{port or daemon.port}/"
    return await trio.lowlevel.open_process(
        [PITRIO, "acp", "--connect", url, "--token", TOKEN, *flags],
        cwd=work,
        env=acp_env(work, PITRIO_AGENT_DIR=str(work.parent / "acp-agent")),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )


async def test_an_editor_and_a_web_client_share_a_daemon_session(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    async with running_daemon(agent_dir, FauxProvider(default=FixtureRules())) as daemon:
        work = agent_dir.parent / "work"
        process = await _acp_on(daemon, work, "--model", "faux/faux-1")
        try:
            agent = Agent(process)
            await agent.send(
                _request(0, "initialize", {"protocolVersion": 1}),
                _request(1, "session/new", {"cwd": str(work), "mcpServers": []}),
            )
            created = await agent.answer(1)
            session_id = created["result"]["sessionId"]
            async with connect(daemon, f"/v1/sessions/{session_id}") as web:
                assert (await receive(web))["type"] == "attached"
                # The editor prompts: the web client sees the same reply.
                prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hello"}]}
                await agent.send(_request(2, "session/prompt", prompt))
                assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
                seen = await until(web, settled)
                assert text_of_deltas(seen) == "You said: hello"
                assert replies(agent) == "You said: hello"
                # The web client prompts: the editor sees it as updates.
                await send(web, {"id": "w", "type": "prompt", "message": "from the web"})
                await until(web, settled)
                with trio.fail_after(20):
                    while not replies(agent).endswith("You said: from the web"):
                        await agent.read_line()
                await agent.send(_request(3, "session/list", {"cwd": str(work)}))
                listed = (await agent.answer(3))["result"]["sessions"]
                assert [entry["sessionId"] for entry in listed] == [session_id]
                # The editor goes away abruptly: the daemon's session goes on.
                process.kill()
                await process.wait()
                assert schema_problems(agent) == []
                await send(web, {"id": "again", "type": "prompt", "message": "still here"})
                frames = await until(web, settled)
                assert text_of_deltas(frames) == "You said: still here"
        finally:
            if process.returncode is None:
                process.kill()


async def test_load_through_the_daemon_replays_and_an_unknown_id_is_not_found(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    async with running_daemon(agent_dir, FauxProvider(default=FixtureRules())) as daemon:
        work = agent_dir.parent / "work"
        async with connect(daemon, "/v1/host") as host:
            await receive(host)
            await send(host, {"id": "c", "type": "create", "cwd": str(work)})
            session_id = (await until(host, lambda f: f.get("id") == "c"))[-1]["data"]["sessionId"]
        async with connect(daemon, f"/v1/sessions/{session_id}") as web:
            await receive(web)
            await send(web, {"id": "p", "type": "prompt", "message": "first words"})
            await until(web, settled)
        process = await _acp_on(daemon, work)
        try:
            agent = Agent(process)
            load = {"sessionId": session_id, "cwd": str(work), "mcpServers": []}
            await agent.send(
                _request(0, "initialize", {"protocolVersion": 1}),
                _request(1, "session/load", load),
            )
            assert "configOptions" in (await agent.answer(1))["result"]
            kinds = [
                json.loads(line)["params"]["update"]["sessionUpdate"]
                for line in agent.written
                if "/update" in line
            ]
            assert kinds == ["user_message_chunk", "agent_message_chunk"]
            assert replies(agent) == "You said: first words"
            missing = {**load, "sessionId": "00000000-0000-0000-0000-000000000000"}
            await agent.send(_request(2, "session/load", missing))
            assert (await agent.answer(2))["error"]["code"] == -32002
            await _ends_cleanly(agent)
        finally:
            if process.returncode is None:
                process.kill()


async def test_two_editors_on_one_daemon_session_see_the_same_updates(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    async with running_daemon(agent_dir, FauxProvider(default=FixtureRules())) as daemon:
        work = agent_dir.parent / "work"
        first, second = await _acp_on(daemon, work), await _acp_on(daemon, work)
        try:
            one, two = Agent(first), Agent(second)
            await one.send(
                _request(0, "initialize", {"protocolVersion": 1}),
                _request(1, "session/new", {"cwd": str(work)}),
            )
            session_id = (await one.answer(1))["result"]["sessionId"]
            resume = {"sessionId": session_id, "cwd": str(work)}
            await two.send(
                _request(0, "initialize", {"protocolVersion": 1}),
                _request(1, "session/resume", resume),
            )
            await two.answer(1)
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "shared"}]}
            await one.send(_request(2, "session/prompt", prompt))
            assert (await one.answer(2))["result"] == {"stopReason": "end_turn"}
            with trio.fail_after(20):
                while not replies(two).endswith("You said: shared"):
                    await two.read_line()
            assert replies(one) == replies(two) == "You said: shared"
            for process in (first, second):
                assert process.stdin is not None
                await process.stdin.aclose()
                with trio.fail_after(EXIT_BOUND):
                    assert await process.wait() == 0
            assert schema_problems(one) == schema_problems(two) == []
        finally:
            for process in (first, second):
                if process.returncode is None:
                    process.kill()


class Proxy:
    """A TCP relay to the daemon whose connections the test can cut (a network loss)."""

    def __init__(self, port: int) -> None:
        self.port, self.listen_port = port, 0
        self.cuts: list[trio.CancelScope] = []
        self.connections = 0

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async def relay(client: trio.SocketStream) -> None:
            self.connections += 1
            upstream = await trio.open_tcp_stream("127.0.0.1", self.port)
            with trio.CancelScope() as cut:
                self.cuts.append(cut)
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._pump, client, upstream, nursery.cancel_scope)
                    nursery.start_soon(self._pump, upstream, client, nursery.cancel_scope)
            for stream in (client, upstream):
                with trio.CancelScope(shield=True):
                    await stream.aclose()

        async with trio.open_nursery() as nursery:
            serve = functools.partial(trio.serve_tcp, relay, 0, host="127.0.0.1")
            [listener] = await nursery.start(serve)
            self.listen_port = listener.socket.getsockname()[1]
            task_status.started()

    @staticmethod
    async def _pump(
        source: trio.SocketStream, sink: trio.SocketStream, done: trio.CancelScope
    ) -> None:
        try:
            async for data in source:
                await sink.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        done.cancel()

    def cut(self) -> None:
        """Cut every connection open now."""
        for scope in self.cuts:
            scope.cancel()
        self.cuts.clear()


async def test_a_dropped_daemon_link_resumes_and_the_reply_arrives_whole(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    faux = FauxProvider(default=FixtureRules(), tokens_per_second=200.0)
    async with running_daemon(agent_dir, faux) as daemon, trio.open_nursery() as nursery:
        proxy = Proxy(daemon.port)
        await nursery.start(proxy.run)
        work = agent_dir.parent / "work"
        process = await _acp_on(daemon, work, port=proxy.listen_port)
        try:
            agent = Agent(process)
            await agent.send(
                _request(0, "initialize", {"protocolVersion": 1}),
                _request(1, "session/new", {"cwd": str(work)}),
            )
            session_id = (await agent.answer(1))["result"]["sessionId"]
            prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": "SLOW now"}]}
            await agent.send(_request(2, "session/prompt", prompt))
            await agent.until('"agent_message_chunk"')
            before = proxy.connections
            proxy.cut()  # mid-reply: the ACP process connects again and resumes
            assert (await agent.answer(2))["result"] == {"stopReason": "end_turn"}
            assert proxy.connections > before
            assert replies(agent) == slow_text()  # every chunk once, in order
            again = {"sessionId": session_id, "prompt": [{"type": "text", "text": "after"}]}
            await agent.send(_request(3, "session/prompt", again))
            assert (await agent.answer(3))["result"] == {"stopReason": "end_turn"}
            assert replies(agent) == slow_text() + "You said: after"
            await _ends_cleanly(agent)
        finally:
            if process.returncode is None:
                process.kill()
            nursery.cancel_scope.cancel()
