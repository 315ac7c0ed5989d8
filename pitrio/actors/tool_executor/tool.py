"""What a tool is: its declaration for the model and the coroutine that runs it (spec §2.3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs

from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent
from pitrio.messages.model import ToolSpec

UpdateFn = Callable[[AgentToolResult], Awaitable[None]]
"""``await on_update(partial)``: report the accumulated partial result of a running tool."""

ExecuteFn = Callable[[str, dict[str, Any], UpdateFn], Awaitable[AgentToolResult]]
"""``await execute(tool_call_id, args, on_update)``: run the tool; raise to signal failure.

Abort is ordinary trio cancellation of the calling task."""


def text_result(text: str, details: Any = None) -> AgentToolResult:
    """A tool result holding one text block."""
    return AgentToolResult(content=(TextContent(text=text),), details=details)


@attrs.frozen(kw_only=True)
class AgentTool:
    """A tool the agent can call.

    ``prepare_arguments`` may rewrite raw arguments before validation; ``validate`` raises
    (its message becomes the error result) when arguments are invalid; ``execution_mode``
    ``"sequential"`` forces the whole batch it appears in to run one call at a time;
    ``aborted_result`` builds the result of a call cancelled by abort from its last partial
    result (default: the text ``Operation aborted``).
    """

    name: str
    label: str = ""
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=lambda: {"type": "object", "properties": {}})
    execute: ExecuteFn
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    validate: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    execution_mode: Literal["sequential", "parallel"] | None = None
    aborted_result: Callable[[AgentToolResult | None], AgentToolResult] | None = None

    @property
    def spec(self) -> ToolSpec:
        """The declaration sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def result_on_abort(self, partial: AgentToolResult | None) -> AgentToolResult:
        """The error result of a call that abort cancelled."""
        if self.aborted_result is not None:
            return self.aborted_result(partial)
        return text_result("Operation aborted", details={})
