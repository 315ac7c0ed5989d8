"""Pure data: messages, stream events, agent and session events, session entries, the codec.

Nothing here does I/O; this package is the only place that knows pi's JSON field names.
"""

from pitrio.messages.agent import (
    EMPTY_USAGE,
    THINKING_LEVELS,
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    LlmMessage,
    StopReason,
    ThinkingLevel,
    ToolResultMessage,
    Usage,
    UserMessage,
    now_ms,
    user_message,
)
from pitrio.messages.codec import decode, encode, from_json, to_json
from pitrio.messages.content import (
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    text_of,
)

__all__ = [
    "EMPTY_USAGE",
    "THINKING_LEVELS",
    "AgentMessage",
    "AgentToolResult",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactionSummaryMessage",
    "Cost",
    "CustomMessage",
    "ImageContent",
    "LlmMessage",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ThinkingLevel",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "decode",
    "encode",
    "from_json",
    "now_ms",
    "text_of",
    "to_json",
    "user_message",
]
