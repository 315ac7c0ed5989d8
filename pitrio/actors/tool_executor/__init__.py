"""The tool executor: registry and active set, batches, the seven built-in tools, processes."""

from pitrio.actors.tool_executor.actor import ToolExecutor, ToolExecutorHandle
from pitrio.actors.tool_executor.batch import BatchResult, ToolBatch, run_tool_batch
from pitrio.actors.tool_executor.context import NestedCall, ToolCallContext, current_call
from pitrio.actors.tool_executor.hooks import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)
from pitrio.actors.tool_executor.registry import DEFAULT_ACTIVE_TOOLS, PromptEntry
from pitrio.actors.tool_executor.tool import AgentTool, ExecuteFn, UpdateFn, text_result
from pitrio.actors.tool_executor.tools import (
    BUILTIN_TOOL_NAMES,
    BashSettings,
    BuiltinSettings,
    ReadSettings,
    create_builtin_tools,
)

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "DEFAULT_ACTIVE_TOOLS",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentTool",
    "BashSettings",
    "BatchResult",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "BuiltinSettings",
    "ExecuteFn",
    "NestedCall",
    "PromptEntry",
    "ReadSettings",
    "ToolBatch",
    "ToolCallContext",
    "ToolExecutor",
    "ToolExecutorHandle",
    "UpdateFn",
    "create_builtin_tools",
    "current_call",
    "run_tool_batch",
    "text_result",
]
