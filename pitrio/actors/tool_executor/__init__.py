"""The tool executor actor and the tool type."""

from pitrio.actors.tool_executor.actor import ToolExecutor, ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool, ExecuteFn, UpdateFn, text_result

__all__ = [
    "AgentTool",
    "ExecuteFn",
    "ToolExecutor",
    "ToolExecutorHandle",
    "UpdateFn",
    "text_result",
]
