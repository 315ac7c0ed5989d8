"""The session's transcript system messages as pi 1.6.0 has them: emitted between the first
``turn_start`` and the first user message, in ``agent_end.messages`` and the context, written
before the user message (the file appears at that user message), never repeated while nothing
changes, appended after the last entry of an older file, and folded into a compaction's
``systemMessage``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import pitrio
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.session_store import create_store, open_store
from pitrio.messages.agent import SystemMessage, UserMessage, user_message
from pitrio.messages.events import AgentEnd, MessageEnd, MessageStart


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    path = tmp_path / "proj"
    path.mkdir()
    return path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def roles(entries: list[dict[str, Any]]) -> list[str]:
    return [e["message"]["role"] if e["type"] == "message" else e["type"] for e in entries]


async def drained(channel: Any) -> list[Any]:
    out = []
    while True:
        await trio.testing.wait_all_tasks_blocked()
        try:
            out.append(channel.receive_nowait().event)
        except trio.WouldBlock:
            return out


async def test_the_first_prompt_declares_the_prompt_and_tools_once(
    project: Path, tmp_path: Path
) -> None:
    faux = FauxProvider(["one", "two"])
    async with pitrio.create_session(
        cwd=str(project), model="faux/faux-1", faux=faux, session_dir=str(tmp_path / "s")
    ) as session:
        events = await session.subscribe(capacity=10_000)
        await session.prompt("hi")
        first = await drained(events)
        first_request = faux.last_request.context
        await session.prompt("again")
        second = await drained(events)
        live = await session.messages()
        path = session.session_file
    # The order of pi 1.6.0: agent_start, turn_start, the system pair, then the user's.
    kinds = [
        f"{e.type}/{e.message.role}" if isinstance(e, MessageStart | MessageEnd) else e.type
        for e in first
        if e.type != "entry_appended"  # the SDK's own notices (the wire's are the RPC's)
    ]
    assert kinds[:6] == [
        "agent_start",
        "turn_start",
        "message_start/system",
        "message_end/system",
        "message_start/user",
        "message_end/user",
    ]
    system = next(e.message for e in first if isinstance(e, MessageEnd))
    assert isinstance(system, SystemMessage)
    assert system.content == ""
    assert list(system.sections or {}) == ["preamble", "tools", "rules", "docs", "cwd"]
    assert (system.sections or {})["cwd"] == f"<cwd>\n{project}\n</cwd>"
    assert [t.name for t in system.tools_added or ()] == ["read", "bash", "edit", "write"]
    assert all(
        t.constrained_sampling == {"type": "json_schema", "strict": "prefer"}
        for t in system.tools_added or ()
    )
    end = next(e for e in first if isinstance(e, AgentEnd))
    assert [m.role for m in end.messages] == ["system", "user", "assistant"]
    # The request: the rendered sections as the prompt, the declared tools, no system chat.
    assert first_request.system_prompt == "\n\n".join((system.sections or {}).values())
    assert [t.name for t in first_request.tools] == ["read", "bash", "edit", "write"]
    assert [m.role for m in first_request.messages] == ["user"]
    # Nothing changed for the second prompt: no system message.
    assert not any(
        isinstance(e, MessageStart) and isinstance(e.message, SystemMessage) for e in second
    )
    assert faux.last_request.context.system_prompt == first_request.system_prompt
    assert [m.role for m in live] == ["system", "user", "assistant", "user", "assistant"]
    # The file: the system entry right before the first user message.
    assert path is not None
    assert roles(lines(path)) == [
        "session",
        "model_change",
        "thinking_level_change",
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    stored = lines(path)[3]["message"]
    assert list(stored) == ["role", "content", "sections", "timestamp", "toolsAdded"]


async def test_a_file_without_system_messages_gains_one_after_its_last_entry(
    project: Path, tmp_path: Path
) -> None:
    """A 0.73.1-era file (or an older pitrio one): nothing is rewritten; the next prompt
    appends the system message after the last entry, before the new user message."""
    header = {
        "type": "session",
        "version": 3,
        "id": "0195c7a0-0000-7000-8000-000000000001",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": str(project),
    }
    user = {
        "type": "message",
        "id": "aaaa0001",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": [{"type": "text", "text": "old"}], "timestamp": 1},
    }
    old = tmp_path / "old.jsonl"
    original = "".join(json.dumps(line) + "\n" for line in (header, user))
    old.write_text(original)
    faux = FauxProvider(["answer"])
    async with pitrio.create_session(
        cwd=str(project), model="faux/faux-1", faux=faux, session=str(old)
    ) as session:
        await session.prompt("new")
        request = faux.last_request.context
    text = old.read_text()
    assert text.startswith(original)  # appended, never rewritten
    entries = lines(old)
    messages = [e for e in entries if e["type"] == "message"]
    assert roles(messages) == ["user", "system", "user", "assistant"]
    system = entries.index(messages[1])
    assert system > 1 and entries[system]["parentId"] == entries[system - 1]["id"]
    assert entries[system + 1] == messages[2]  # right before the new user message
    assert [m.role for m in request.messages] == ["user", "user"]
    assert request.system_prompt.startswith("You are")


async def test_a_compaction_keeps_the_prompt_and_tools_as_its_checkpoint(
    project: Path, tmp_path: Path
) -> None:
    faux = FauxProvider(["one", "two", "## Goal\nsummary", "after"])
    async with pitrio.create_session(
        cwd=str(project), model="faux/faux-1", faux=faux, session_dir=str(tmp_path / "s")
    ) as session:
        # a first turn before a second past the kept budget: the system message alone is
        # nothing to compact (pi 1.6.0)
        await session.prompt("hi")
        await session.prompt("x" * 100_000)
        await session.compact()
        await session.prompt("more")
        live = await session.messages()
        request = faux.last_request.context
        path = session.session_file
    assert path is not None
    entries = lines(path)
    compaction = next(e for e in entries if e["type"] == "compaction")
    checkpoint = compaction["systemMessage"]
    assert list(checkpoint) == ["role", "content", "sections", "toolsAdded", "timestamp"]
    leading = next(e for e in entries if e["type"] == "message")["message"]
    assert checkpoint["sections"] == leading["sections"]
    assert checkpoint["toolsAdded"] == leading["toolsAdded"]
    # The compacted context leads with it, then the summary; the prompt did not change, so
    # the next prompt adds no system message and the request's prompt is the same.
    assert [m.role for m in live][:2] == ["system", "compactionSummary"]
    assert sum(isinstance(m, SystemMessage) for m in live) == 1
    assert "\n\n<cwd>\n" in request.system_prompt
    assert [t.name for t in request.tools] == ["read", "bash", "edit", "write"]
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, cwd=str(project))
        reopened = await store.context_messages()
        nursery.cancel_scope.cancel()
    assert list(reopened) == list(live)
    assert not any(isinstance(m, UserMessage) and m.content == "" for m in live)


async def test_the_file_appears_with_the_first_user_message_not_the_system_one(
    tmp_path: Path,
) -> None:
    async with trio.open_nursery() as nursery:
        store = await create_store(nursery, str(tmp_path), session_dir_override=str(tmp_path / "s"))
        path = store.path
        assert path is not None
        await store.append_message(
            SystemMessage(content="", sections={"preamble": "P"}, timestamp=1)
        )
        assert not path.exists()  # setup entries stay in memory (pi 1.6.0)
        await store.append_message(user_message("hi", timestamp=2))
        assert path.exists()
        assert roles(lines(path)) == ["session", "system", "user"]
        # Once the file exists, a system message is written like any other entry.
        await store.append_message(SystemMessage(content="x", timestamp=3))
        assert roles(lines(path)) == ["session", "system", "user", "system"]
        nursery.cancel_scope.cancel()
