"""The SDK's create_session: resources loaded, prompts expanded, the system prompt built."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.session_store import open_store
from pitrio.errors import PitrioError, UnknownModelError
from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of


async def test_templates_expand_and_the_system_prompt_lists_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    prompts = tmp_path / "proj" / ".pitrio" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "review.md").write_text("---\ndescription: Review a file\n---\nReview $1 carefully")
    faux = FauxProvider()
    async with pitrio.create_session(
        cwd=str(tmp_path / "proj"), model="faux/faux-1", persist=False, faux=faux
    ) as session:
        await session.prompt("/review main.py")
        sent = faux.last_request.context
        commands = await session.handle.commands()
    first_user = next(m for m in sent.messages if isinstance(m, UserMessage))
    assert text_of(first_user.content) == "Review main.py carefully"
    assert "read" in sent.system_prompt and "bash" in sent.system_prompt
    assert str(tmp_path / "proj") in sent.system_prompt
    assert [c["name"] for c in commands] == ["review"]
    assert commands[0]["description"] == "Review a file"


async def test_start_errors_are_plain_pitrio_errors(tmp_path: Path) -> None:
    with pytest.raises(UnknownModelError):
        async with pitrio.create_session(cwd=str(tmp_path), model="faux/nope", persist=False):
            pass
    with pytest.raises(PitrioError, match="cannot be combined"):
        async with pitrio.create_session(
            cwd=str(tmp_path), session="abc", continue_recent=True, persist=False
        ):
            pass


async def test_a_turn_with_tools_a_retry_and_a_compaction_projects_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 6's acceptance: pi's event sequence plus the seed events, and a file whose
    projection is the session's context."""
    agent = tmp_path / "agent"
    agent.mkdir()
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    (agent / "settings.json").write_text(
        '{"retry": {"maxRetries": 2, "baseDelayMs": 1},'
        ' "compaction": {"keepRecentTokens": 60, "reserveTokens": 18000}}'
    )
    project = tmp_path / "proj"
    project.mkdir()
    (project / "notes.txt").write_text("Project notes\n")
    faux = FauxProvider(
        [
            FauxReply(tool_calls=[FauxToolCall("read", {"path": "notes.txt"})]),
            FauxReply(error="503 Service Unavailable"),
            # Past the 60 kept tokens by itself: the compaction keeps it and summarizes the
            # turn's start (pi 1.6.0 compacts nothing when the whole branch fits the budget,
            # and the session's system message is no history).
            "The notes say: Project notes. " + "More detail. " * 20,
            "## Goal\nRead the notes.",  # the compaction's summary request
        ]
    )
    text = "Look at notes.txt " + "padding " * 900
    async with pitrio.create_session(
        cwd=str(project), model="faux/faux-small", faux=faux, session_dir=str(tmp_path / "s")
    ) as session:
        events = await session.subscribe(capacity=100_000)
        await session.prompt(text)
        await session.wait_for_idle()
        seen: list[str] = []
        while True:
            await trio.testing.wait_all_tasks_blocked()
            try:
                seen.append(events.receive_nowait().event.type)
            except trio.WouldBlock:
                break
        live = await session.messages()
        path = session.session_file
    assert path is not None
    # One accepted run: a tool turn, a failed response retried, a compaction, one settle.
    assert seen.count("agent_settled") == 1 and seen[-1] == "agent_settled"
    for kind in (
        "tool_execution_start",
        "tool_execution_end",
        "auto_retry_start",
        "auto_retry_end",
        "compaction_start",
        "compaction_end",
        "entry_appended",
    ):
        assert kind in seen, kind
    assert seen.index("auto_retry_start") < seen.index("auto_retry_end")
    assert seen.index("agent_end") < seen.index("compaction_start")
    # Reopen the file: its projection is what the session had in memory.
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, cwd=str(project))
        reopened = await store.context_messages()
        nursery.cancel_scope.cancel()
    assert reopened == live
