"""A session's RPC events and its history as ACP updates (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from pitrio.transports.acp.jsonrpc import RpcError
from pitrio.transports.acp.mapping import Translator, commands_update, history_updates
from pitrio.transports.acp.messages import prompt_blocks


def _json(updates: Any) -> list[dict[str, Any]]:
    return [update.to_json() for update in updates]


def test_a_live_run_streams_text_thought_and_a_tool_calls_life() -> None:
    live = Translator("/w")
    events: list[dict[str, Any]] = [
        {"type": "agent_start"},
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "thinking_delta", "delta": "hm"},
        },
        {"type": "message_update", "assistantMessageEvent": {"type": "text_delta", "delta": "Hi"}},
        {
            "type": "message_update",
            "assistantMessageEvent": {
                "type": "toolcall_end",
                "toolCall": {"id": "c1", "name": "bash", "arguments": {"command": "ls -la\nmore"}},
            },
        },
        {"type": "message_end", "message": {"role": "assistant", "stopReason": "toolUse"}},
        {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "bash", "args": {}},
        {
            "type": "tool_execution_update",
            "toolCallId": "c1",
            "partialResult": {"content": [{"type": "text", "text": "a"}]},
        },
        {
            "type": "tool_execution_end",
            "toolCallId": "c1",
            "result": {"content": [{"type": "text", "text": "boom"}]},
            "isError": True,
        },
        {"type": "message_end", "message": {"role": "assistant", "stopReason": "length"}},
    ]
    out = [u for event in events for u in _json(live.updates(event))]
    assert [u["sessionUpdate"] for u in out] == [
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call_update",
        "tool_call_update",
    ]
    assert out[2]["title"] == "bash ls -la" and out[2]["kind"] == "execute"
    assert [u.get("status") for u in out[3:]] == ["in_progress", None, "failed"]
    assert out[5]["content"] == [{"type": "content", "content": {"type": "text", "text": "boom"}}]
    assert live.settled_reason(aborted=False) == "max_tokens"
    assert live.settled_reason(aborted=True) == "cancelled"
    live.updates({"type": "message_end", "message": {"role": "assistant", "stopReason": "aborted"}})
    assert live.settled_reason(aborted=False) == "cancelled"


def test_a_call_seen_first_at_its_start_is_announced_in_progress() -> None:
    live = Translator("/w")
    start = {"type": "tool_execution_start", "toolCallId": "c", "toolName": "ls", "args": {}}
    assert _json(live.updates(start))[0]["status"] == "in_progress"
    assert _json(live.updates(start))[0] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c",
        "status": "in_progress",
    }


def test_history_replays_messages_and_calls_in_order_with_diffs_and_relative_paths() -> None:
    edit = {"path": "src/a.py", "oldText": "x", "newText": "y"}
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "plan"},
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "e", "name": "edit", "arguments": edit},
            ],
        },
        {"role": "toolResult", "toolCallId": "e", "content": [{"type": "text", "text": "done"}]},
        {"role": "compactionSummary", "summary": "..."},
        {"role": "user", "content": "plain"},
    ]
    out = _json(history_updates("/w", messages))
    assert [u["sessionUpdate"] for u in out] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "tool_call_update",
        "user_message_chunk",
    ]
    diff = {"type": "diff", "path": "/w/src/a.py", "oldText": "x", "newText": "y"}
    assert out[3]["content"] == [diff] and out[3]["locations"] == [{"path": "/w/src/a.py"}]
    assert out[4]["status"] == "completed"
    assert out[4]["content"][0] == diff  # the edit's diff stays with its result
    assert out[5]["content"] == {"type": "text", "text": "plain"}


def test_commands_keep_their_order_and_skip_nameless_entries() -> None:
    update = commands_update(
        [{"name": "ask", "description": "Q"}, {"description": "x"}, {"name": "t"}]
    )
    assert update.to_json()["availableCommands"] == [
        {"name": "ask", "description": "Q"},
        {"name": "t", "description": ""},
    ]


def test_prompt_blocks_take_text_images_and_resources_and_refuse_the_rest() -> None:
    text, images = prompt_blocks(
        {
            "prompt": [
                {"type": "text", "text": "look"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "file:///w/a.py", "name": "a.py"},
                {"type": "resource", "resource": {"uri": "file:///b", "text": "body"}},
            ]
        }
    )
    assert text == "look\n\nfile:///w/a.py\n\nbody"
    assert [(i.data, i.mime_type) for i in images] == [("AAAA", "image/png")]
    for bad in ({"prompt": "x"}, {"prompt": [{"type": "audio", "data": "A"}]}, {"prompt": [3]}):
        with pytest.raises(RpcError) as caught:
            prompt_blocks(bad)
        assert caught.value.code == -32602
