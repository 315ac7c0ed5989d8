"""The recording model's reply rules (fixtures README), alone and replayed against pi's files."""

from __future__ import annotations

import json
import math
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from pitrio.actors.model_router.providers.faux import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.model_router.providers.faux_rules import (
    OVERFLOW_ERROR,
    TRANSIENT_ERROR,
    FixtureRules,
    ToolStep,
    count_lines,
    js_prefix,
    js_quote,
    parse_steps,
    scripted_summary,
    slow_text,
    summary_kind,
)
from pitrio.actors.model_router.registry import FAUX_MODELS
from pitrio.actors.model_router.usage import estimate_tokens
from pitrio.messages import (
    AgentMessage,
    AssistantMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    LlmMessage,
    TextContent,
    ToolResultMessage,
    Usage,
    from_json,
    user_message,
)
from pitrio.messages.convert import COMPACTION_SUMMARY_PREFIX, convert_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError
from tests.shared_dir import SESSIONS


def assistant(text: str = "ok") -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=2,
    )


def tool_result(text: str) -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id="call_1",
        tool_name="bash",
        content=(TextContent(text=text),),
        is_error=False,
        timestamp=3,
    )


def ctx(*messages: LlmMessage, system: str = "You are pi.") -> LlmContext:
    return LlmContext(system_prompt=system, messages=messages)


def ask(rules: FixtureRules, text: str, *after: LlmMessage, timestamp: int = 1) -> FauxReply:
    return rules(ctx(user_message(text, timestamp=timestamp), *after))


# -- the rules one by one --------------------------------------------------------------------


def test_default_echo_rule() -> None:
    rules = FixtureRules()
    assert ask(rules, "Hello, pi!") == FauxReply(text="You said: Hello, pi!")
    long = "x" * 100
    assert ask(rules, long).text == "You said: " + "x" * 80


def test_alwaysfail_and_failonce() -> None:
    rules = FixtureRules()
    for _ in range(3):
        reply = ask(rules, "please ALWAYSFAIL")
        assert reply.error == TRANSIENT_ERROR
        assert reply.final_stop_reason == "error"
    assert ask(rules, "FAILONCE now").error == TRANSIENT_ERROR
    assert ask(rules, "FAILONCE now") == FauxReply(text="Recovered after a transient error.")
    # Another user message (same text, later timestamp) fails once again.
    assert ask(rules, "FAILONCE now", timestamp=99).error == TRANSIENT_ERROR


def test_overflow() -> None:
    rules = FixtureRules()
    assert ask(rules, "OVERFLOW please").error == OVERFLOW_ERROR
    assert ask(rules, "OVERFLOW please").text == "Answer after overflow recovery."


def test_sequential_tool_steps() -> None:
    rules = FixtureRules()
    prompt = 'Look: <<read {"path":"notes.txt"}>> then <<bash {"command":"ls"}>>'
    first = ask(rules, prompt)
    assert first == FauxReply(
        text="Step 1/2: read.", tool_calls=(FauxToolCall("read", {"path": "notes.txt"}),)
    )
    second = ask(rules, prompt, assistant(), tool_result("Project notes"))
    assert second.text == "Step 2/2: bash."
    assert second.tool_calls == (FauxToolCall("bash", {"command": "ls"}),)
    done = ask(
        rules, prompt, assistant(), tool_result("x"), assistant(), tool_result("README.md\nsrc\n")
    )
    assert done.text == 'Finished 2 tool step(s). Last result starts: "README.md\\nsrc\\n"'
    assert done.tool_calls == ()


def test_parallel_tool_steps() -> None:
    rules = FixtureRules()
    prompt = 'PARALLEL <<read {"path":"a"}>> <<read {"path":"b"}>> <<bash {"command":"ls"}>>'
    first = ask(rules, prompt)
    assert first.text == "Running 3 tools in parallel."
    assert [call.name for call in first.tool_calls] == ["read", "read", "bash"]
    done = ask(rules, prompt, assistant(), tool_result("a" * 100))
    assert done.text == f'Finished 3 tool step(s). Last result starts: "{"a" * 60}"'


def test_think_slow_and_after_summary() -> None:
    rules = FixtureRules()
    think = ask(rules, "THINK: how should I name this function?")
    assert think.thinking == (
        "The user asked: THINK: how should I name this function?. Consider it step by step."
    )
    assert think.text == "Here is my considered answer."
    slow = ask(rules, "SLOW: a very long answer please.")
    assert slow.text == slow_text()
    assert slow_text().startswith("Slow answer: word1 word2 word3 word4 ")
    assert slow_text().endswith(" word150.")
    assert estimate_tokens(slow_text()) == 277  # the output usage pi recorded for it
    summary = COMPACTION_SUMMARY_PREFIX + "## Goal\nstuff\n</summary>"
    assert ask(rules, summary).text == "Continuing after the summary."


def test_summarisation_requests() -> None:
    conversation = (
        '<conversation>\n[User]: one\n\n[Assistant]: two\n\n[Assistant tool calls]: read(path="a")'
        "\n\n[Tool result]: x\n\n[User]: three\n</conversation>\n\n"
    )
    assert count_lines(conversation) == (2, 1, 1)
    initial = conversation + "Use this EXACT format:\n## Goal\n...\n## Critical Context\n..."
    update = conversation + "<previous-summary>\nold\n</previous-summary>\n\n## Critical Context"
    prefix = conversation + "Summarize this PREFIX.\n## Original Request\n## Early Progress"
    branch = conversation + "## Goal\n## Next Steps"
    assert summary_kind(initial) == "Compaction summary"
    assert summary_kind(update) == "Updated compaction summary"
    assert summary_kind(prefix) == "Turn-prefix summary"
    assert summary_kind(branch) == "Branch summary"
    assert scripted_summary(initial) == (
        "## Goal\nCompaction summary (scripted): 2 user, 1 assistant, 1 tool-call lines."
        "\n\n## Progress\n### Done\n- [x] scripted work"
    )
    rules = FixtureRules()
    reply = rules(
        ctx(
            user_message(branch, timestamp=1),
            system="You are a context summarization assistant. Read the conversation.",
        )
    )
    assert reply.text is not None
    assert reply.text.startswith("## Goal\nBranch summary (scripted): 2 user, 1 assistant, 1 ")


def test_helpers() -> None:
    assert parse_steps('<<edit {"path":"a","edits":[{"oldText":"x","newText":"y"}]}>> tail') == [
        ToolStep("edit", {"path": "a", "edits": [{"oldText": "x", "newText": "y"}]})
    ]
    assert parse_steps("<<bad {not json}>>") == [ToolStep("bad", {})]
    assert parse_steps("no steps") == []
    assert js_prefix("ab😀cd", 3) == "ab\ud83d"  # JavaScript cuts through the surrogate pair
    assert js_prefix("abc", 2) == "ab"
    assert js_quote('a"b\nc') == '"a\\"b\\nc"'


# -- replay against pi's session files -------------------------------------------------------


def _timestamp_ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _entry_message(entry: dict[str, Any]) -> AgentMessage | None:
    kind = entry["type"]
    if kind == "message":
        return from_json(entry["message"], AgentMessage)  # type: ignore[arg-type]
    if kind == "custom_message":
        content = entry["content"]
        return CustomMessage(
            custom_type=entry["customType"],
            content=content
            if isinstance(content, str)
            else tuple(TextContent(text=b["text"]) for b in content if b["type"] == "text"),
            display=entry["display"],
            timestamp=_timestamp_ms(entry["timestamp"]),
        )
    if kind == "branch_summary":
        return BranchSummaryMessage(
            summary=entry["summary"],
            from_id=entry["fromId"],
            timestamp=_timestamp_ms(entry["timestamp"]),
        )
    return None


def _context_before(entries: dict[str, dict[str, Any]], entry: dict[str, Any]) -> list[LlmMessage]:
    """What pi sent for the request that produced ``entry``: its path, projected, as LLM input."""
    path: list[dict[str, Any]] = []
    parent = entry["parentId"]
    while parent is not None:
        path.append(entries[parent])
        parent = entries[parent]["parentId"]
    path.reverse()
    agent_messages: list[AgentMessage] = []
    compactions = [i for i, e in enumerate(path) if e["type"] == "compaction"]
    if compactions:
        at = compactions[-1]
        compaction = path[at]
        agent_messages.append(
            CompactionSummaryMessage(
                summary=compaction["summary"],
                tokens_before=compaction["tokensBefore"],
                timestamp=_timestamp_ms(compaction["timestamp"]),
            )
        )
        first_kept = next(
            i for i, e in enumerate(path) if e["id"] == compaction["firstKeptEntryId"]
        )
        path = path[first_kept:at] + path[at + 1 :]
    for item in path:
        message = _entry_message(item)
        if message is not None:
            agent_messages.append(message)
    llm: list[LlmMessage] = []
    for message in agent_messages:
        converted = convert_message(message)
        # A failed attempt that was retried is not part of the live context.
        if isinstance(converted, AssistantMessage) and converted.stop_reason == "error":
            continue
        if converted is not None:
            llm.append(converted)
    return llm


async def _stream(faux: FauxProvider, context: LlmContext) -> AssistantMessage:
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    await faux.stream(FAUX_MODELS[0], context, StreamOptions(), send)
    send.close()
    events = [event async for event in receive]
    last = events[-1]
    assert isinstance(last, StreamDone | StreamError)
    return last.message if isinstance(last, StreamDone) else last.error


def _load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _session_files() -> list[Path]:
    if not SESSIONS.exists():
        return []
    return sorted(p for p in SESSIONS.glob("*.jsonl") if not p.name.startswith("legacy_"))


@pytest.mark.parametrize("path", _session_files(), ids=lambda p: p.stem)
async def test_rules_reproduce_recorded_replies(path: Path) -> None:
    """Every recorded reply (content, stop reason, error) is what the rules answer."""
    lines = _load(path)
    entries = {e["id"]: e for e in lines if "id" in e and e.get("type") != "session"}
    faux = FauxProvider(default=FixtureRules())
    replayed = 0
    for entry in lines:
        if entry.get("type") != "message" or entry["message"]["role"] != "assistant":
            continue
        recorded = from_json(entry["message"], AssistantMessage)
        context = LlmContext(
            system_prompt="You are pi.", messages=tuple(_context_before(entries, entry))
        )
        ours = await _stream(faux, context)
        replayed += 1
        if recorded.stop_reason == "aborted":
            # Cut short while streaming: what was recorded is a prefix of the full reply.
            assert len(recorded.content) <= len(ours.content)
            continue
        assert (ours.stop_reason, ours.error_message) == (
            recorded.stop_reason,
            recorded.error_message,
        )
        assert [type(b) for b in ours.content] == [type(b) for b in recorded.content]
        assert ours.content == recorded.content
    assert replayed > 0
