"""What a running tool can reach about its own call: :func:`current_call`.

A batch sets a :class:`ToolCallContext` for each call it runs (a context variable, so it is
private to the call's task). Through it a tool may run another tool — a *nested call* (seed
§3.15.2) that goes through the same lookup, validation and hooks, emits ``tool_execution_*``
events carrying ``parentToolCallId`` and is recorded under ``nestedCalls`` in the parent's
result details — and may say what its result is if abort cuts it short.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Protocol

import attrs

from pitrio.messages.agent import AgentToolResult
from pitrio.messages.model import Model

MAX_NESTING_DEPTH = 8
"""Nested calls deeper than this fail instead of running (a tool calling itself forever)."""


@attrs.frozen
class NestedCall:
    """The outcome of :meth:`ToolCallContext.execute_tool`."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool


class NestedRunner(Protocol):
    """What runs nested calls: the batch that runs the parent call."""

    async def run_nested(
        self, parent: ToolCallContext, name: str, args: dict[str, Any]
    ) -> NestedCall:
        """Run ``name(args)`` as a call nested in ``parent`` and record it there."""
        ...


class ToolCallContext:
    """One tool call as its body sees it; owned by the batch, used from the call's task."""

    __slots__ = (
        "_aborted_result",
        "_count",
        "_records",
        "_runner",
        "depth",
        "held_files",
        "model",
        "tool_call_id",
        "tool_name",
    )

    def __init__(
        self,
        *,
        tool_call_id: str,
        tool_name: str,
        model: Model | None = None,
        runner: NestedRunner | None = None,
        depth: int = 0,
        held_files: frozenset[str] = frozenset(),
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.model = model
        self.depth = depth
        self.held_files = held_files
        self._runner = runner
        self._records: list[dict[str, Any]] = []
        self._count = 0
        self._aborted_result: AgentToolResult | None = None

    async def execute_tool(self, name: str, args: dict[str, Any] | None = None) -> NestedCall:
        """Run another tool of the batch's tool set as a call nested in this one.

        Validation failures, unknown tools, blocking hooks and tool errors come back as an
        error :class:`NestedCall`, never as an exception; abort propagates as cancellation.
        """
        if self._runner is None:
            raise RuntimeError("nested tool calls need a running batch")
        return await self._runner.run_nested(self, name, dict(args or {}))

    def next_nested_id(self) -> str:
        """The id of this call's next nested call: ``<parent id>/<n>``."""
        self._count += 1
        return f"{self.tool_call_id}/{self._count}"

    def record(self, entry: dict[str, Any]) -> None:
        """Remember one finished nested call (the batch adds these to the result details)."""
        self._records.append(entry)

    @property
    def nested_calls(self) -> tuple[dict[str, Any], ...]:
        """Records of the nested calls made so far, in the order they finished."""
        return tuple(self._records)

    def set_aborted_result(self, result: AgentToolResult) -> None:
        """The result to report if abort ends this call (e.g. output so far + ``aborted``)."""
        self._aborted_result = result

    @property
    def aborted_result(self) -> AgentToolResult | None:
        """What :meth:`set_aborted_result` set, if anything."""
        return self._aborted_result


_CURRENT: ContextVar[ToolCallContext | None] = ContextVar("pitrio_tool_call", default=None)


def current_call() -> ToolCallContext | None:
    """The context of the tool call running in this task, or ``None`` outside a batch."""
    return _CURRENT.get()


def enter_call(context: ToolCallContext | None) -> Any:
    """Make ``context`` current in this task; pass the token to :func:`leave_call`."""
    return _CURRENT.set(context)


def leave_call(token: Any) -> None:
    """Undo the matching :func:`enter_call`."""
    _CURRENT.reset(token)
