"""What a tool is: its declaration for the model and the coroutine that runs it (spec §2.3)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import attrs

from pitrio.messages.agent import AgentToolResult, ToolDeclaration
from pitrio.messages.content import TextContent
from pitrio.messages.model import ToolSpec, sampling_strictness

UpdateFn = Callable[[AgentToolResult], Awaitable[None]]
"""``await on_update(partial)``: report the accumulated partial result of a running tool."""

ExecuteFn = Callable[[str, dict[str, Any], UpdateFn], Awaitable[AgentToolResult]]
"""``await execute(tool_call_id, args, on_update)``: run the tool; raise to signal failure.

Abort is ordinary trio cancellation of the calling task. Inside a batch, the body can reach its
call's :class:`~pitrio.actors.tool_executor.context.ToolCallContext` (nested calls, the model)
through :func:`~pitrio.actors.tool_executor.context.current_call`."""

ExecutionMode = Literal["sequential", "parallel"]
Exposure = Literal["direct", "codemode", "deferred", "hidden", "model-only"]
"""How a tool is reached (pi 1.6.0's ``exposure``): ``direct`` ones are declared when active
and callable by other tools while active; ``codemode`` and ``deferred`` ones are callable by
other tools (codemode scripts) whether active or not; ``hidden`` ones by nobody; a
``model-only`` one only by the model (``codemode`` itself: scripts start no scripts)."""

LoadoutHook = Callable[["Loadout"], "LoadoutChange"]
"""``prepare_loadout(loadout)``: what to change in the declared tools."""


@attrs.frozen
class LoadoutChange:
    """New descriptions by tool name, and the active tools whose declarations are left out
    of requests (they stay callable by other tools: codemode's ``only`` mode)."""

    descriptions: dict[str, str] = attrs.field(factory=dict)
    hidden: frozenset[str] = frozenset()


@attrs.frozen
class Loadout:
    """What a ``prepare_loadout`` hook sees: the declared (active) tools and the callable ones."""

    declared: tuple[AgentTool, ...]
    callable: tuple[AgentTool, ...]


JSON_SCHEMA_PREFER: dict[str, Any] = {"type": "json_schema", "strict": "prefer"}
"""The constrained sampling pi 1.6.0's built-in read, bash, edit and write tools ask for."""


def text_result(text: str, details: Any = None) -> AgentToolResult:
    """A tool result holding one text block."""
    return AgentToolResult(content=(TextContent(text=text),), details=details)


def _empty_parameters() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@attrs.frozen(kw_only=True)
class AgentTool:
    """A tool the agent can call.

    ``parameters`` is the JSON schema sent to the model; arguments are converted and checked
    against it before the tool runs. ``prepare_arguments`` may rewrite raw arguments before
    that (e.g. accept a legacy form); ``validate`` may add checks of its own and raises (its
    message becomes the error result) when arguments are invalid. ``execution_mode``
    ``"sequential"`` forces the whole batch it appears in to run one call at a time.
    ``mutates`` names the file a call changes (an absolute path) so that calls changing the
    same file run one after another in source order. ``aborted_result`` builds the result of a
    call cancelled by abort from its last partial result (default: ``Operation aborted``).
    ``prompt_snippet`` and ``prompt_guidelines`` describe the tool in the system prompt
    (spec §5.9). ``constrained_sampling`` asks providers for strict arguments (see
    :class:`~pitrio.messages.model.ToolSpec`).
    """

    name: str
    label: str = ""
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=_empty_parameters)
    execute: ExecuteFn
    prepare_arguments: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    validate: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    execution_mode: ExecutionMode | None = None
    aborted_result: Callable[[AgentToolResult | None], AgentToolResult] | None = None
    mutates: Callable[[dict[str, Any]], str | None] | None = None
    prompt_snippet: str | None = None
    prompt_guidelines: tuple[str, ...] = ()
    constrained_sampling: dict[str, Any] | None = None
    """How a provider may constrain the model's arguments (pi's ``constrainedSampling``,
    declared with the tool in the transcript), e.g. :data:`JSON_SCHEMA_PREFER`."""
    exposure: Exposure = "direct"
    namespace: dict[str, Any] | None = None
    """The group a tool belongs to (pi's ``namespace``: ``{name, description?,
    instructions?}``, an MCP server's tools share one), for codemode's listing and search."""
    output_schema: dict[str, Any] | None = None
    """The JSON schema of the tool's ``structured_content`` (pi's ``outputSchema``): a script
    calling the tool gets that value instead of the text."""
    prepare_loadout: LoadoutHook | None = None
    """Called whenever the active set is read: descriptions to replace (codemode lists the
    tools its scripts can call in its own description)."""

    @property
    def spec(self) -> ToolSpec:
        """The declaration sent to the model."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            constrained_sampling=sampling_strictness(self.constrained_sampling),
        )

    @property
    def declaration(self) -> ToolDeclaration:
        """The tool as the transcript's ``system`` messages declare it (``toolsAdded``)."""
        return ToolDeclaration(
            name=self.name,
            description=self.description,
            parameters=self.parameters,
            constrained_sampling=self.constrained_sampling,
        )

    def result_on_abort(self, partial: AgentToolResult | None) -> AgentToolResult:
        """The error result of a call that abort cancelled."""
        if self.aborted_result is not None:
            return self.aborted_result(partial)
        return text_result("Operation aborted", details={})


ExecuteCall = Callable[[AgentTool, str, dict[str, Any], UpdateFn], Awaitable[AgentToolResult]]
"""Runs one tool body: ``await execute(tool, tool_call_id, args, on_update)`` (the agent
loop's, through the tool executor; here rather than in :mod:`.batch`, which a start does not
import)."""
