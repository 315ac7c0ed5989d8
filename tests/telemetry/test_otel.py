"""The span tree and metrics of real runs, through the session bootstrap's observer."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import pitrio
from pitrio import telemetry
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from tests.telemetry.conftest import Memory


def _tree(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    """(depth, name) of every span, depth-first in start order."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent, []).append(span)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, span.name))
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return out


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [span.name for span in spans]
    return found[0]


async def test_a_run_with_a_tool_call_a_retry_and_a_compaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: Memory
) -> None:
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
    with telemetry.using(memory.telemetry):
        async with pitrio.create_session(
            cwd=str(project), model="faux/faux-small", faux=faux, session_dir=str(tmp_path / "s")
        ) as session:
            await session.prompt(text)
            await session.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()  # the observer has mapped the settle
            spans = memory.finished()
            session_id = session.header.id
    assert _tree(spans) == [
        (0, "invoke_agent pitrio"),
        (1, "turn"),
        (2, "chat faux-small"),
        (2, "execute_tool read"),
        (1, "turn"),
        (2, "chat faux-small"),
        (1, "retry"),
        (1, "turn"),
        (2, "chat faux-small"),
        (1, "compaction"),
    ]
    run = _one(spans, "invoke_agent pitrio")
    assert run.attributes is not None
    assert run.attributes["pitrio.session.id"] == session_id
    assert run.attributes["pitrio.run.turns"] == 3
    assert run.attributes["pitrio.run.llm_requests"] == 3
    assert run.attributes["pitrio.run.tool_calls"] == 1
    assert run.attributes["pitrio.run.retries"] == 1
    assert run.attributes["pitrio.run.outcome"] == "stop"
    assert run.status.status_code is StatusCode.UNSET
    names = [event.name for event in run.events]
    assert names.count("agent_end") == 2 and names.count("auto_retry_end") == 1
    chats = sorted(
        (s for s in spans if s.name == "chat faux-small"), key=lambda s: s.start_time or 0
    )
    failed, recovered = chats[1], chats[2]
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "503 Service Unavailable"
    assert failed.attributes is not None and recovered.attributes is not None
    assert failed.attributes["pitrio.retry.attempt"] == 0
    assert recovered.attributes["pitrio.retry.attempt"] == 1
    assert recovered.attributes["gen_ai.provider.name"] == "faux"
    assert recovered.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    prompt_tokens = sum(
        int(recovered.attributes[name])  # type: ignore[arg-type]
        for name in (
            "gen_ai.usage.input_tokens",
            "gen_ai.usage.cache_read.input_tokens",
            "gen_ai.usage.cache_creation.input_tokens",
        )
    )
    assert prompt_tokens > 0
    assert int(recovered.attributes["gen_ai.usage.output_tokens"]) > 0  # type: ignore[arg-type]
    assert "pitrio.llm.time_to_first_token_ms" in recovered.attributes
    tool = _one(spans, "execute_tool read")
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.name"] == "read"
    assert tool.attributes["pitrio.tool.is_error"] is False
    retry = _one(spans, "retry")
    assert retry.attributes is not None
    assert retry.attributes["pitrio.retry.attempt"] == 1
    assert retry.attributes["pitrio.retry.error"] == "503 Service Unavailable"
    compaction = _one(spans, "compaction")
    assert compaction.attributes is not None
    assert compaction.attributes["pitrio.compaction.reason"] == "threshold"
    assert int(compaction.attributes["pitrio.compaction.tokens_before"]) > 0  # type: ignore[arg-type]
    assert compaction.status.status_code is StatusCode.UNSET
    # One trace: every span shares the run's trace id.
    assert {span.context.trace_id for span in spans if span.context} == {run.context.trace_id}  # type: ignore[union-attr]

    figures = memory.metrics()
    assert figures["pitrio.runs"] == [({"outcome": "stop"}, 1)]
    assert sum(v for _, v in figures["pitrio.turns"]) == 3
    outcomes = {str(a["outcome"]): v for a, v in figures["pitrio.llm.requests"]}
    assert outcomes == {"toolUse": 1, "error": 1, "stop": 1}
    assert figures["pitrio.tool.calls"] == [({"gen_ai.tool.name": "read", "error": False}, 1)]
    assert sum(v for _, v in figures["pitrio.retries"]) == 1
    assert figures["pitrio.compactions"] == [
        ({"pitrio.compaction.reason": "threshold", "outcome": "ok"}, 1)
    ]
    kinds = {str(a["gen_ai.token.type"]) for a, _ in figures["pitrio.llm.tokens"]}
    assert {"input", "output"} <= kinds
    assert "pitrio.run.duration" in figures and "pitrio.llm.time_to_first_token" in figures


async def test_a_failing_tool_marks_its_span_and_closing_the_session_aborts_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: Memory
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    faux = FauxProvider(
        [
            FauxReply(tool_calls=[FauxToolCall("read", {"path": "missing.txt"})]),
            "no such file",
            FauxReply(text="slow " * 50, chunk_delay=5),
        ]
    )
    with telemetry.using(memory.telemetry):
        async with pitrio.create_session(
            cwd=str(tmp_path), model="faux/faux-1", faux=faux, persist=False
        ) as session:
            await session.prompt("read it")
            await session.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()
            first = memory.finished()
            events = await session.subscribe()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.prompt, "again")
                async for item in events:
                    if item.event.type == "message_update":
                        break
                nursery.cancel_scope.cancel()
    tool = _one(first, "execute_tool read")
    assert tool.status.status_code is StatusCode.ERROR
    assert "missing.txt" in (tool.status.description or "")
    assert _tree(first)[0] == (0, "invoke_agent pitrio")
    # The run cut short by the session's end is aborted and still exported, marked so.
    late = {s.name: s for s in memory.finished() if s not in first}
    assert set(late) == {"invoke_agent pitrio", "turn", "chat faux-1"}
    for name in ("invoke_agent pitrio", "chat faux-1"):
        assert late[name].status.status_code is StatusCode.ERROR
        assert late[name].status.description == "Request was aborted"
    run_attributes = late["invoke_agent pitrio"].attributes
    assert run_attributes is not None and run_attributes["pitrio.run.outcome"] == "aborted"
