"""What the web page asks of ``/v1/host`` (issue 23): the models before any session, a
per-session model change that stays in its session, session names, rename, search, delete.

A real daemon on 127.0.0.1 (``open_daemon``, as ``pitrio serve`` runs it) and real websocket
clients."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from trio_websocket import WebSocketConnection

from pitrio.actors.host import HostConfig
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.model_router.actor import RouterConfig
from pitrio.actors.session.resources.trust import canonical_path, save_decisions
from pitrio.transports.daemon.server import DaemonConfig
from pitrio.transports.serve import Daemon, open_daemon
from tests.stray_cancel import no_stray_cancel
from tests.transports.daemon_harness import (
    TOKEN,
    connect,
    is_response,
    receive,
    send,
    settled,
    until,
)

MODELS_JSON = {
    "providers": {
        "local": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "models": [
                {"id": "tiny", "name": "Tiny Local", "reasoning": True, "input": ["text", "image"]},
                {"id": "plain", "name": "Plain Local"},
            ],
        }
    }
}


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


@asynccontextmanager
async def daemon_with(
    agent: Path,
    faux: FauxProvider | None = None,
    *,
    models: bool = False,
    default_model: str | None = None,
) -> AsyncIterator[Daemon]:
    """A daemon whose router reads ``agent``'s ``models.json`` when ``models`` (no other
    credentials: the environment is empty)."""
    work = agent.parent / "work"
    work.mkdir(exist_ok=True)
    router = RouterConfig(agent_dir=agent if models else None, env={})
    host = HostConfig(agent_dir=agent, default_cwd=str(work), default_model=default_model)
    async with open_daemon(
        DaemonConfig(port=0, token=TOKEN), host, faux=faux or FauxProvider(), router_config=router
    ) as running:
        with no_stray_cancel():
            yield running


class HostClient:
    """A ``/v1/host`` connection that keeps the host events it reads past."""

    def __init__(self, ws: WebSocketConnection) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.count = 0

    async def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        self.count += 1
        request_id = f"h{self.count}"
        await send(self.ws, {"id": request_id, **command})
        frames = await until(self.ws, is_response(request_id))
        self.events.extend(f for f in frames if f.get("type") != "response")
        return frames[-1]

    async def data(self, command: dict[str, Any]) -> Any:
        response = await self.ask(command)
        assert response["success"], response
        return response.get("data")

    async def event(self, kind: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("type") == kind:
                self.events.remove(event)
                return event
        frames = await until(self.ws, lambda f: f.get("type") == kind)
        self.events.extend(frames[:-1])
        return frames[-1]


@asynccontextmanager
async def host_client(daemon: Daemon) -> AsyncIterator[HostClient]:
    async with connect(daemon, "/v1/host") as ws:
        assert (await receive(ws))["type"] == "host_attached"
        yield HostClient(ws)


async def session_ask(ws: WebSocketConnection, command: dict[str, Any]) -> dict[str, Any]:
    await send(ws, {"id": "q", **command})
    response = (await until(ws, is_response("q")))[-1]
    assert response["success"], response
    return response


def settings_of(agent: Path) -> dict[str, Any]:
    path = agent / "settings.json"
    return json.loads(path.read_text()) if path.exists() else {}


def entries_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def exists(path: Path) -> bool:
    return path.exists()


# -- models ---------------------------------------------------------------------------------


async def test_models_json_models_are_listed_before_any_session(agent: Path) -> None:
    (agent / "models.json").write_text(json.dumps(MODELS_JSON))
    async with daemon_with(agent, models=True) as daemon, host_client(daemon) as host:
        assert await host.data({"type": "list"}) == {"sessions": []}
        choices = await host.data({"type": "models"})
        by_ref = {f"{m['provider']}/{m['id']}": m for m in choices["models"]}
        tiny = by_ref["local/tiny"]
        assert (tiny["name"], tiny["reasoning"], tiny["input"]) == (
            "Tiny Local",
            True,
            ["text", "image"],
        )
        assert by_ref["local/plain"]["reasoning"] is False
        assert by_ref["local/plain"]["input"] == ["text"]
        # Nothing but models.json is configured: the first of them is the default, and the
        # offline faux models are not offered beside it.
        assert choices["default"] == "local/tiny"
        assert choices["defaultThinkingLevel"] == "medium"
        assert not any(m["provider"] == "faux" for m in choices["models"])
        # Still no session was started to answer that.
        assert await host.data({"type": "list"}) == {"sessions": []}
        created = await host.data({"type": "create", "model": "local/plain"})
        path = f"/v1/sessions/{created['sessionId']}"
        async with connect(daemon, path) as ws:
            await receive(ws)
            state = await session_ask(ws, {"type": "get_state"})
            assert state["data"]["model"]["provider"] == "local"
            assert state["data"]["model"]["id"] == "plain"


async def test_the_daemons_default_model_is_offered_even_when_hidden(agent: Path) -> None:
    (agent / "models.json").write_text(json.dumps(MODELS_JSON))
    async with (
        daemon_with(agent, models=True, default_model="faux/faux-think:high") as daemon,
        host_client(daemon) as host,
    ):
        choices = await host.data({"type": "models"})
        refs = [f"{m['provider']}/{m['id']}" for m in choices["models"]]
        assert choices["default"] == "faux/faux-think"
        assert choices["defaultThinkingLevel"] == "high"
        assert refs[-1] == "faux/faux-think" and "local/tiny" in refs
        bad = await host.ask({"type": "models", "cwd": 3})
        assert not bad["success"] and bad["error"] == "models: cwd must be a string"


async def test_the_default_follows_the_settings_as_a_new_session_would(agent: Path) -> None:
    (agent / "models.json").write_text(json.dumps(MODELS_JSON))
    work = agent.parent / "work"
    (work / ".pitrio").mkdir(parents=True)
    # a project's settings count only for a trusted project (pi 1.6.0)
    save_decisions(agent, [(canonical_path(work), True)])
    (agent / "settings.json").write_text(
        json.dumps({"defaultProvider": "local", "defaultModel": "plain"})
    )
    async with daemon_with(agent, models=True) as daemon, host_client(daemon) as host:
        choices = await host.data({"type": "models"})
        # The global default; its level clamped (plain cannot think).
        assert (choices["default"], choices["defaultThinkingLevel"]) == ("local/plain", "off")
        # The working directory's project settings win, as they do for a new session.
        project = {"defaultModel": "tiny", "defaultThinkingLevel": "high"}
        (work / ".pitrio" / "settings.json").write_text(json.dumps(project))
        choices = await host.data({"type": "models"})
        assert (choices["default"], choices["defaultThinkingLevel"]) == ("local/tiny", "high")
        created = await host.data({"type": "create"})
        async with connect(daemon, f"/v1/sessions/{created['sessionId']}") as ws:
            await receive(ws)
            state = (await session_ask(ws, {"type": "get_state"}))["data"]
        assert (state["model"]["id"], state["thinkingLevel"]) == ("tiny", "high")


async def test_a_session_model_change_stays_in_that_session(agent: Path) -> None:
    (agent / "settings.json").write_text(json.dumps({"defaultThinkingLevel": "low"}))
    before = settings_of(agent)
    faux = FauxProvider([FauxReply(text="ok")])
    async with daemon_with(agent, faux) as daemon, host_client(daemon) as host:
        first = (await host.data({"type": "create", "model": "faux/faux-1"}))["sessionId"]
        other = (await host.data({"type": "create", "model": "faux/faux-1"}))["sessionId"]
        async with connect(daemon, f"/v1/sessions/{first}") as ws:
            await receive(ws)
            await session_ask(
                ws, {"type": "set_model", "provider": "faux", "modelId": "faux-think"}
            )
            await session_ask(ws, {"type": "set_thinking_level", "level": "high"})
            state = (await session_ask(ws, {"type": "get_state"}))["data"]
            assert (state["model"]["id"], state["thinkingLevel"]) == ("faux-think", "high")
            await send(ws, {"id": "p", "type": "prompt", "message": "remember me"})
            await until(ws, settled)
        # settings.json is as it was: no defaultProvider/defaultModel/defaultThinkingLevel
        # written for everyone (pi's RPC mode would write them).
        assert settings_of(agent) == before
        async with connect(daemon, f"/v1/sessions/{other}") as ws:
            await receive(ws)
            state = (await session_ask(ws, {"type": "get_state"}))["data"]
            assert (state["model"]["id"], state["thinkingLevel"]) == ("faux-1", "off")
        # A new session starts on the defaults, not on the first session's choice.
        choices = await host.data({"type": "models"})
        assert choices["default"] != "faux/faux-think"
        assert choices["defaultThinkingLevel"] != "high"
        # The choice is the session's own: in its file, and back when it is reopened.
        await host.data({"type": "close", "sessionId": first})
        async with connect(daemon, f"/v1/sessions/{first}") as ws:
            await receive(ws)
            state = (await session_ask(ws, {"type": "get_state"}))["data"]
            assert (state["model"]["id"], state["thinkingLevel"]) == ("faux-think", "high")
            entries = entries_of(Path(state["sessionFile"]))
        changes = [e["modelId"] for e in entries if e["type"] == "model_change"]
        assert changes[-1] == "faux-think"


# -- names, rename, search, delete ------------------------------------------------------------


async def test_titles_rename_search_and_delete(agent: Path) -> None:
    faux = FauxProvider([FauxReply(text="sure"), FauxReply(text="fine")])
    async with daemon_with(agent, faux) as daemon, host_client(daemon) as host:
        parser = (await host.data({"type": "create"}))["sessionId"]
        notes = (await host.data({"type": "create"}))["sessionId"]
        rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
        assert rows[parser]["title"] == "New session"
        async with connect(daemon, f"/v1/sessions/{parser}") as ws:
            await receive(ws)
            await send(ws, {"id": "p", "type": "prompt", "message": "\nFix the parser\nit fails"})
            await until(ws, settled)
            rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
            assert rows[parser]["title"] == "Fix the parser"
            assert "name" not in rows[parser]
            # Renaming from the host: the session's clients see pi's session_info_changed,
            # every host client a session_renamed, and the list the name.
            renamed = await host.data(
                {"type": "rename", "sessionId": parser, "name": "  Parser work "}
            )
            assert renamed == {"sessionId": parser, "name": "Parser work"}
            changed = (await until(ws, lambda f: f.get("type") == "session_info_changed"))[-1]
            assert changed["name"] == "Parser work"
            event = await host.event("session_renamed")
            assert event == {"type": "session_renamed", "sessionId": parser, "name": "Parser work"}
            state = (await session_ask(ws, {"type": "get_state"}))["data"]
            assert state["sessionName"] == "Parser work"
            session_file = Path(state["sessionFile"])
        rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
        assert (rows[parser]["name"], rows[parser]["title"]) == ("Parser work", "Parser work")
        # A session with no prompt yet can be named too (its file is written then).
        await host.data({"type": "rename", "sessionId": notes, "name": "Release notes"})
        rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
        assert rows[notes]["title"] == "Release notes"
        # Search: the name, the messages' text, the id.
        found = await host.data({"type": "search", "query": "PARSER"})
        assert [r["id"] for r in found["sessions"]] == [parser]
        found = await host.data({"type": "search", "query": "fails"})
        assert [r["id"] for r in found["sessions"]] == [parser]
        found = await host.data({"type": "search", "query": "release"})
        assert [r["id"] for r in found["sessions"]] == [notes]
        found = await host.data({"type": "search", "query": notes[-12:]})
        assert [r["id"] for r in found["sessions"]] == [notes]
        assert (await host.data({"type": "search", "query": "nowhere"}))["sessions"] == []
        everything = await host.data({"type": "search", "query": "  "})
        assert {r["id"] for r in everything["sessions"]} == {parser, notes}
        # Refusals name what was wrong; nothing changes.
        empty = await host.ask({"type": "rename", "sessionId": parser, "name": "  "})
        assert (empty["success"], empty["error"]) == (False, "Session name cannot be empty")
        unknown = await host.ask({"type": "rename", "sessionId": "nope", "name": "x"})
        assert unknown["error"] == "Session not found: nope"
        missing = await host.ask({"type": "rename", "sessionId": parser})
        assert missing["error"] == "rename: name must be a string"
        bad = await host.ask({"type": "search"})
        assert bad["error"] == "search: query must be a string"
        rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
        assert rows[parser]["name"] == "Parser work"
        # Delete: gone from the list, the search and the disk.
        await host.data({"type": "delete", "sessionId": parser})
        assert await host.event("session_deleted") == {
            "type": "session_deleted",
            "sessionId": parser,
        }
        rows = {r["id"]: r for r in (await host.data({"type": "list"}))["sessions"]}
        assert set(rows) == {notes}
        assert (await host.data({"type": "search", "query": "parser"}))["sessions"] == []
        assert not exists(session_file)


async def test_a_renamed_session_keeps_its_name_across_a_daemon_restart(agent: Path) -> None:
    async with daemon_with(agent) as daemon, host_client(daemon) as host:
        session_id = (await host.data({"type": "create"}))["sessionId"]
        await host.data({"type": "rename", "sessionId": session_id, "name": "Kept"})
    with trio.fail_after(20):
        async with daemon_with(agent) as daemon, host_client(daemon) as host:
            rows = (await host.data({"type": "list"}))["sessions"]
    assert [(r["id"], r["name"], r["title"]) for r in rows] == [(session_id, "Kept", "Kept")]
