"""pi 1.6.0's message and entry shapes: what pi 1.6.0 wrote (fixtures/pi16) decodes into the
new fields and encodes back to the same JSON, key order included; hand-made values of the new
classes are written in pi's key order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.messages.agent import (
    THINKING_LEVELS,
    AgentMessage,
    AssistantMessage,
    Cost,
    NestedToolCallRecord,
    NestedToolCalls,
    ToolResultMessage,
    Usage,
)
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import TextContent, ToolCall
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CompactionResult,
    FileLine,
    UsageEntry,
)
from pitrio.messages.events import AgentSessionEvent, ToolExecutionEnd

FIXTURES = Path("/work/shared/fixtures/pi16")
needs_fixtures = pytest.mark.skipif(not FIXTURES.is_dir(), reason="pi 1.6.0 fixtures absent")

SHAPED = {"message_start", "message_end", "turn_end", "agent_end", "tool_execution_start",
          "tool_execution_end", "agent_settled", "queue_update", "auto_retry_start",
          "auto_retry_end", "entry_appended", "agent_start", "turn_start"}  # fmt: skip
"""Event types whose pi 1.6.0 JSON is the codec's form of the event (``message_update`` is
the RPC transport's own form)."""


def recorded_events(name: str) -> list[dict[str, Any]]:
    out = []
    for line in (FIXTURES / name).read_bytes().splitlines():
        record = orjson.loads(line)
        message = record.get("msg")
        recv = record.get("dir") == "recv" and isinstance(message, dict)
        if recv and message.get("type") in SHAPED:
            out.append(message)
    return out


@needs_fixtures
@pytest.mark.parametrize("name", ["pi160.rpc.jsonl", "pi160.retry.rpc.jsonl"])
def test_pi_16_events_round_trip_with_their_key_order(name: str) -> None:
    events = recorded_events(name)
    assert len(events) > 10
    for value in events:
        decoded = from_json(value, AgentSessionEvent)
        assert orjson.dumps(to_json(decoded)) == orjson.dumps(value), value["type"]


@needs_fixtures
def test_the_recorded_bash_call_decodes_into_the_new_fields() -> None:
    ends = [
        from_json(v, AgentSessionEvent)
        for v in recorded_events("pi160.rpc.jsonl")
        if v["type"] == "tool_execution_end"
    ]
    (end,) = ends
    assert isinstance(end, ToolExecutionEnd)
    assert end.duration_ms == 6
    assert end.result.structured_content == {
        "output": "hi\n",
        "truncated": False,
        "exit_code": 0,
        "wall_time_seconds": 0,
    }
    assert end.result.extra is None and end.extra is None


def usage() -> Usage:
    return Usage(
        input=5,
        output=7,
        cache_read=1,
        cache_write=3,
        cache_write_1h=2,
        reasoning=4,
        total_tokens=16,
        cost=Cost(total=0.5, total_from_provider=True),
    )


def test_usage_keys_in_pi_order() -> None:
    value = to_json(usage())
    assert list(value) == [
        "input", "output", "cacheRead", "cacheWrite", "reasoning", "totalTokens", "cost",
        "cacheWrite1h",
    ]  # fmt: skip
    assert list(value["cost"]) == [
        "input", "output", "cacheRead", "cacheWrite", "total", "totalFromProvider",
    ]  # fmt: skip
    assert list(to_json(Usage())) == [
        "input", "output", "cacheRead", "cacheWrite", "totalTokens", "cost",
    ]  # fmt: skip
    assert from_json(value, Usage) == usage()


def test_assistant_keys_in_pi_order() -> None:
    message = AssistantMessage(
        content=(ToolCall(id="c", name="read", arguments={}, namespace="fs"),),
        api="a",
        provider="p",
        model="m",
        usage=Usage(),
        stop_reason="error",
        timestamp=1,
        provider_thinking_level="high",
        response_id="r",
        response_model="m-2",
        raw_stop_reason="content_filter",
        error_message="Provider finish_reason: content_filter",
        end_turn=True,
        duration_ms=12,
        thinking_level="max",
    )
    value = to_json(message)
    assert list(value) == [
        "role", "content", "api", "provider", "model", "usage", "stopReason", "timestamp",
        "providerThinkingLevel", "responseId", "responseModel", "rawStopReason",
        "errorMessage", "endTurn", "durationMs", "thinkingLevel",
    ]  # fmt: skip
    assert list(value["content"][0]) == ["type", "id", "name", "arguments", "namespace"]
    assert from_json(value, AgentMessage) == message
    assert "max" in THINKING_LEVELS


def test_tool_result_keys_in_pi_order() -> None:
    nested = NestedToolCalls(
        calls=(NestedToolCallRecord(id="n1", name="read", status="ok", duration_ms=3),),
        complete=True,
    )
    message = ToolResultMessage(
        tool_call_id="c",
        tool_name="t",
        content=(TextContent(text="x"),),
        details={"a": 1},
        usage=usage(),
        is_error=False,
        duration_ms=9,
        timestamp=2,
        nested_calls=nested,
    )
    value = to_json(message)
    assert list(value) == [
        "role", "toolCallId", "toolName", "content", "details", "usage", "isError",
        "durationMs", "timestamp", "nestedCalls",
    ]  # fmt: skip
    assert value["nestedCalls"] == {
        "calls": [{"id": "n1", "name": "read", "status": "ok", "durationMs": 3}],
        "complete": True,
    }
    assert from_json(value, AgentMessage) == message


def test_new_entry_shapes_in_pi_order() -> None:
    entry = UsageEntry(
        id="u",
        parent_id="p",
        timestamp="t",
        kind="cache_warm",
        provider="mock",
        model="m",
        usage=Usage(),
        note="n",
    )
    assert list(to_json(entry)) == [
        "type", "id", "parentId", "timestamp", "kind", "provider", "model", "usage", "note",
    ]  # fmt: skip
    assert from_json(to_json(entry), FileLine) == entry
    compaction = CompactionEntry(
        id="c",
        parent_id="p",
        timestamp="t",
        summary="s",
        first_kept_entry_id="c",
        tokens_before=9,
        details={},
        usage=Usage(),
        from_hook=False,
    )
    assert list(to_json(compaction))[4:] == [
        "summary", "firstKeptEntryId", "tokensBefore", "details", "usage", "fromHook",
    ]  # fmt: skip
    summary = BranchSummaryEntry(
        id="b", parent_id="p", timestamp="t", from_id="x", summary="s", usage=Usage()
    )
    assert list(to_json(summary))[4:] == ["fromId", "summary", "usage"]
    result = CompactionResult(
        summary="s",
        first_kept_entry_id="c",
        tokens_before=9,
        estimated_tokens_after=4,
        usage=Usage(),
        details={},
    )
    assert list(to_json(result)) == [
        "summary", "firstKeptEntryId", "tokensBefore", "estimatedTokensAfter", "usage", "details",
    ]  # fmt: skip
