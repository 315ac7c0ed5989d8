"""The tool executor: registry and active set, batches, the seven built-in tools, processes.

The batch's names (:mod:`.batch`) are imported on first access (module ``__getattr__``): the
first tool call needs them, a start does not (cold start, issue 38).
"""

import importlib
from typing import TYPE_CHECKING, Any

from pitrio.actors.tool_executor.actor import ToolExecutor, ToolExecutorHandle
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

if TYPE_CHECKING:
    from pitrio.actors.tool_executor.batch import BatchResult, ToolBatch, run_tool_batch

_BATCH = frozenset({"BatchResult", "ToolBatch", "run_tool_batch"})


def __getattr__(name: str) -> Any:
    """The batch's names, from :mod:`.batch` on first access."""
    if name not in _BATCH:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pitrio import _attrs_cache

    with _attrs_cache.caching():  # the batch's classes come from the method cache
        value = getattr(importlib.import_module(f"{__name__}.batch"), name)
    globals()[name] = value  # later lookups skip this function
    return value


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
