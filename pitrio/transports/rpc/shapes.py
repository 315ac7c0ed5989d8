"""The JSON shapes of RPC answers that are more than a record's fields: the session state,
a bash result, a model cycle, the last assistant text, the messages a fork may start from
(pi 1.6.0's field names and order). Pure."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pitrio.messages.codec import to_json
from pitrio.sdk.session import (
    CycleResult,
    SessionState,
)

if TYPE_CHECKING:
    from pitrio.sdk.session import BashResult


def state_data(state: SessionState) -> dict[str, Any]:
    """``get_state``'s data, in pi's key order (pi-rpc.md §5.2)."""
    agent = state.agent
    data: dict[str, Any] = {
        "model": to_json(agent.model),
        "thinkingLevel": agent.thinking_level,
        # pi's flag is false from agent_end on; a settling run takes prompts (they run next).
        # Not during a retry's back-off (pi: the agent is idle then, the retry pending).
        "isStreaming": (state.is_running and not state.is_settling and not state.is_retrying)
        or agent.is_streaming,
        "isCompacting": state.is_compacting,
        "steeringMode": agent.options.steering_mode,
        "followUpMode": agent.options.follow_up_mode,
    }
    if state.session_file is not None:
        data["sessionFile"] = state.session_file
    data["sessionId"] = state.session_id
    if state.session_name is not None:
        data["sessionName"] = state.session_name
    data["autoCompactionEnabled"] = state.auto_compaction_enabled
    data["messageCount"] = agent.message_count
    data["pendingMessageCount"] = state.pending_message_count
    if state.mcp_servers:  # pitrio's own field, absent without MCP servers (pi's shape)
        data["mcpServers"] = [server.to_json() for server in state.mcp_servers]
    return data


def bash_data(result: BashResult) -> dict[str, Any]:
    """``bash``'s data: ``{output, exitCode?, cancelled, truncated, fullOutputPath?}``."""
    data: dict[str, Any] = {"output": result.output}
    if result.exit_code is not None:
        data["exitCode"] = result.exit_code
    data["cancelled"] = result.cancelled
    data["truncated"] = result.truncated
    if result.full_output_path is not None:
        data["fullOutputPath"] = result.full_output_path
    return data


def cycle_model_data(result: CycleResult | None) -> dict[str, Any] | None:
    """``cycle_model``'s data: ``{model, thinkingLevel, isScoped}`` or ``null``."""
    if result is None:
        return None
    return {
        "model": to_json(result.model),
        "thinkingLevel": result.thinking_level,
        "isScoped": result.is_scoped,
    }


def last_text_data(text: str | None) -> dict[str, Any]:
    """``get_last_assistant_text``'s data: ``{}`` when there is none (pi drops ``undefined``)."""
    return {} if text is None else {"text": text}


def fork_messages_data(messages: list[tuple[str, str]]) -> dict[str, Any]:
    """``get_fork_messages``'s data."""
    return {"messages": [{"entryId": entry_id, "text": text} for entry_id, text in messages]}
