"""What the fault cases share: an agent dir pointing at a loopback vendor, a real session over
it, an event recorder with explicit synchronisation, and readers of the session file."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import attrs
import orjson
import trio

import pitrio
from pitrio.actors.session_store import open_store
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.content import TextContent
from pitrio.messages.events import AgentSessionEvent
from tests.stray_cancel import no_stray_cancel

PROVIDER = "vendor"
MODEL = f"{PROVIDER}/m1"

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")


def write_agent_dir(agent: Path, base_url: str, settings: Mapping[str, Any]) -> None:
    """``models.json`` with one keyless openai-completions model at ``base_url``, and
    ``settings.json``."""
    agent.mkdir(parents=True, exist_ok=True)
    models = {
        "providers": {
            PROVIDER: {
                "baseUrl": base_url,
                "api": "openai-completions",
                "models": [{"id": "m1", "contextWindow": 128000, "maxTokens": 4096}],
            }
        }
    }
    (agent / "models.json").write_bytes(orjson.dumps(models))
    (agent / "settings.json").write_bytes(orjson.dumps(settings))


class Environment(Protocol):
    """What changes the process environment: pytest's ``monkeypatch``, or :class:`OsEnvironment`
    in a child process."""

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None: ...

    def delenv(self, name: str, raising: bool = True) -> None: ...


class OsEnvironment:
    """:class:`Environment` over ``os.environ`` (a child process changes its own for good)."""

    def setenv(self, name: str, value: str, prepend: str | None = None) -> None:
        os.environ[name] = value

    def delenv(self, name: str, raising: bool = True) -> None:
        os.environ.pop(name, None)


def hermetic_environment(env: Environment, tmp_path: Path) -> Path:
    """Point pitrio's agent dir and ``HOME`` into ``tmp_path``; no proxy reaches loopback."""
    agent = tmp_path / "agent"
    env.setenv("PITRIO_AGENT_DIR", str(agent))
    env.setenv("HOME", str(tmp_path / "home"))
    for name in _PROXY_VARIABLES:
        env.delenv(name, raising=False)
    env.setenv("NO_PROXY", "127.0.0.1")
    return agent


@attrs.define
class Recorder:
    """Every event of a session, in order; tests wait on the events they synchronise with."""

    events: list[AgentSessionEvent] = attrs.field(factory=list)
    _changed: trio.Event = attrs.field(factory=trio.Event)

    async def pump(self, channel: trio.MemoryReceiveChannel[Any]) -> None:
        async with channel:
            async for item in channel:
                self.events.append(item.event)
                self._changed.set()
                self._changed = trio.Event()

    async def wait_for(self, kind: str, count: int = 1) -> None:
        """Until ``count`` events of type ``kind`` have arrived."""
        while self.count(kind) < count:
            await self._changed.wait()

    async def wait_until(self, predicate: Callable[[Any], bool]) -> Any:
        """Until an event satisfying ``predicate`` has arrived; returns the first such event."""
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            await self._changed.wait()

    def count(self, kind: str) -> int:
        return sum(1 for event in self.events if event.type == kind)

    def of(self, kind: str) -> list[Any]:
        """The events of type ``kind``, in order."""
        return [event for event in self.events if event.type == kind]

    def types(self) -> list[str]:
        return [event.type for event in self.events]


@attrs.frozen
class Faulted:
    """A running session and what it emits."""

    session: pitrio.AgentSession
    recorder: Recorder
    project: Path


@asynccontextmanager
async def fault_session(
    tmp_path: Path,
    env: Environment,
    base_url: str,
    settings: Mapping[str, Any] | None = None,
    *,
    session_dir: Path | None = None,
) -> AsyncIterator[Faulted]:
    """A persisted session on the vendor's model, every event recorded from the start.

    The model router is the SDK's own (``$PITRIO_AGENT_DIR``'s ``models.json`` and
    ``settings.json``), so the settings under test travel the path users' settings take.
    """
    agent = hermetic_environment(env, tmp_path)
    write_agent_dir(agent, base_url, settings or {})
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    sessions = session_dir or tmp_path / "sessions"
    async with trio.open_nursery() as nursery:
        async with pitrio.create_session(
            cwd=str(project), model=MODEL, session_dir=str(sessions)
        ) as session:
            recorder = Recorder()
            nursery.start_soon(recorder.pump, await session.subscribe(capacity=100_000))
            with no_stray_cancel():
                yield Faulted(session, recorder, project)
        nursery.cancel_scope.cancel()


def file_lines(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of a session file (header first)."""
    lines = path.read_bytes().split(b"\n")
    return [orjson.loads(line) for line in lines if line.strip()]


def message_entries(path: Path, role: str) -> list[dict[str, Any]]:
    """The ``message`` entries of ``role`` in the file, in file order."""
    return [
        line
        for line in file_lines(path)
        if line.get("type") == "message" and line["message"]["role"] == role
    ]


def omitted_ids(path: Path) -> set[str]:
    """Ids of the entries a ``context_edit`` takes out of the projection (replacement null)."""
    return {
        line["targetId"]
        for line in file_lines(path)
        if line.get("type") == "context_edit" and line.get("replacement") is None
    }


async def reopen(path: Path, cwd: Path) -> tuple[AgentMessage, ...]:
    """The projection of the file as a fresh reader sees it."""
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, cwd=str(cwd), read_only=True)
        messages = await store.context_messages()
        nursery.cancel_scope.cancel()
    return messages


def assistant_text(message: AgentMessage) -> str:
    """The text blocks of an assistant message, joined."""
    assert isinstance(message, AssistantMessage)
    return "".join(block.text for block in message.content if isinstance(block, TextContent))
