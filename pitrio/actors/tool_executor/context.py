"""What a running tool can reach about its own call: :func:`current_call`.

A batch sets a :class:`ToolCallContext` for each call it runs (a context variable, so it is
private to the call's task). Through it a tool may run another tool — a *nested call* (pi
1.6.0's ``ctx.executeTool``) that goes through the same lookup, validation and hooks, emits
``tool_execution_*`` events carrying ``parentToolCallId`` and is recorded, with the calls of
its own nested calls, in the ``nestedCalls`` of the model-issued call's result message
(:class:`NestedCallRecorder`, pi's bounded record, which also sums the nested results'
usage onto that message) — and may say what its result is if abort
cuts it short.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import orjson
import trio

from pitrio.messages.agent import (
    AgentToolResult,
    NestedToolCallRecord,
    NestedToolCalls,
    Usage,
    combine_usage,
)
from pitrio.messages.model import Model

if TYPE_CHECKING:
    from pitrio.actors.tool_executor.tool import AgentTool

MAX_NESTING_DEPTH = 8
"""Nested calls deeper than this fail instead of running (a tool calling itself forever)."""


@attrs.frozen
class NestedCall:
    """The outcome of :meth:`ToolCallContext.execute_tool`."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool


MAX_RECORDED_CALLS = 256
MAX_ARGUMENT_BYTES = 8 * 1024
MAX_ARGUMENT_BYTES_TOTAL = 32 * 1024
MAX_ERROR_CHARS = 500


class NestedCallRecorder:
    """The nested calls of one model-issued call, its nested calls' calls included, with pi
    1.6.0's bounds: 256 calls, arguments over 8 KiB (or past 32 KiB in all) left out with
    their size, and ``complete`` false when anything was left out or had not finished."""

    def __init__(self) -> None:
        self._calls: list[dict[str, Any]] = []
        self._started: dict[int, float] = {}
        self._complete = True
        self._argument_bytes = 0
        self.usage: Usage | None = None
        """The summed ``usage`` of every nested result, those dropped from the record too:
        nested results are not stored, so this is where their model work is counted (pi
        1.6.0 adds it to the model-issued call's result message)."""

    def start(self, call_id: str, name: str, args: dict[str, Any]) -> int | None:
        """Record a call as it starts; its handle for :meth:`finish` (``None``: dropped)."""
        if len(self._calls) >= MAX_RECORDED_CALLS:
            self._complete = False
            return None
        record: dict[str, Any] = {"id": call_id, "name": name, "status": "unfinished"}
        size = len(orjson.dumps(args))
        if size > MAX_ARGUMENT_BYTES or self._argument_bytes + size > MAX_ARGUMENT_BYTES_TOTAL:
            record["arguments_bytes"] = size
            self._complete = False
        else:
            record["arguments"] = args
            self._argument_bytes += size
        self._calls.append(record)
        handle = len(self._calls) - 1
        self._started[handle] = trio.current_time()
        return handle

    def finish(self, handle: int | None, is_error: bool, error_text: str) -> None:
        """Record how the call ``handle`` ended."""
        if handle is None:
            return
        record = self._calls[handle]
        record["status"] = "error" if is_error else "ok"
        started = self._started.pop(handle, trio.current_time())
        record["duration_ms"] = max(0, round((trio.current_time() - started) * 1000))
        if is_error and error_text:
            record["error"] = error_text[:MAX_ERROR_CHARS]

    def add_usage(self, usage: Usage | None) -> None:
        """Count a nested result's usage."""
        if usage is not None:
            self.usage = usage if self.usage is None else combine_usage(self.usage, usage)

    def snapshot(self) -> NestedToolCalls | None:
        """The record so far (``None`` when no nested call was made)."""
        if not self._calls and self._complete:
            return None
        calls = tuple(NestedToolCallRecord(**record) for record in self._calls)
        complete = self._complete and all(call.status != "unfinished" for call in calls)
        return NestedToolCalls(calls=calls, complete=complete)


class NestedRunner(Protocol):
    """What runs nested calls: the batch that runs the parent call."""

    async def run_nested(
        self, parent: ToolCallContext, name: str, args: dict[str, Any]
    ) -> NestedCall:
        """Run ``name(args)`` as a call nested in ``parent`` and record it there."""
        ...

    def reach(self, tools: Sequence[AgentTool]) -> tuple[AgentTool, ...]:
        """Let nested calls reach ``tools`` too (registered since the batch began: an MCP
        server that connected while a script waited for it); the callable tools now."""
        ...


class ToolCallContext:
    """One tool call as its body sees it; owned by the batch, used from the call's task."""

    __slots__ = (
        "_aborted_result",
        "_count",
        "_runner",
        "callable_tools",
        "depth",
        "held_files",
        "model",
        "recorder",
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
        recorder: NestedCallRecorder | None = None,
        callable_tools: tuple[AgentTool, ...] = (),
    ) -> None:
        self.tool_call_id = tool_call_id
        self.tool_name = tool_name
        self.model = model
        self.depth = depth
        self.held_files = held_files
        self.recorder = recorder if recorder is not None else NestedCallRecorder()
        """Shared by a model-issued call and every call nested in it."""
        self.callable_tools = callable_tools
        """The tools :meth:`execute_tool` may run (what codemode lists to its scripts)."""
        self._runner = runner
        self._count = 0
        self._aborted_result: AgentToolResult | Callable[[], AgentToolResult] | None = None

    def reach(self, tools: Sequence[AgentTool]) -> None:
        """Let this call's nested calls reach ``tools`` too (the session's callable tools
        read after waiting for the MCP servers a script needs)."""
        if self._runner is not None:
            self.callable_tools = self._runner.reach(tools)

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

    def set_aborted_result(self, result: AgentToolResult | Callable[[], AgentToolResult]) -> None:
        """The result to report if abort ends this call (e.g. output so far + ``aborted``),
        or what makes it when the abort comes (a tool whose state keeps changing)."""
        self._aborted_result = result

    @property
    def aborted_result(self) -> AgentToolResult | None:
        """What :meth:`set_aborted_result` set, if anything."""
        made = self._aborted_result
        return made() if callable(made) else made


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
