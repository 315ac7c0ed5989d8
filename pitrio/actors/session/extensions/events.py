"""What extension handlers receive and may return (spec §7.3), as plain data.

Every event an extension can handle is one frozen class here; agent events (``agent_start``,
``message_update``, ``tool_execution_end``, ...) are handed over as the wire events themselves.
A handler returns ``None`` or the event's result class; a ``dict`` with the same field names
(snake_case or pi's camelCase) is accepted too, so short handlers stay short.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pitrio.actors.tool_executor.hooks import BeforeToolCallResult
from pitrio.messages.agent import AgentMessage, ToolResultMessage
from pitrio.messages.content import ImageContent
from pitrio.messages.model import Model

InputSource = Literal["interactive", "rpc", "extension"]


# -- input (§3.4) -------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class InputEvent:
    """Text typed or sent by a client, before any expansion."""

    text: str
    images: tuple[ImageContent, ...]
    source: InputSource


@attrs.frozen(kw_only=True)
class InputResult:
    """``continue`` (as is), ``transform`` (replace text, and images when given) or
    ``handled`` (the agent does not run)."""

    action: Literal["continue", "transform", "handled"] = "continue"
    text: str | None = None
    images: tuple[ImageContent, ...] | None = None


# -- before_agent_start ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BeforeAgentStartEvent:
    """A prompt is about to run; ``system_prompt`` is the prompt as chained so far."""

    prompt: str
    images: tuple[ImageContent, ...]
    system_prompt: str


@attrs.frozen(kw_only=True)
class InjectedMessage:
    """A custom message an extension adds to the run's start messages."""

    custom_type: str
    content: str | tuple[Any, ...]
    display: bool = True
    details: Any = None


@attrs.frozen(kw_only=True)
class BeforeAgentStartResult:
    """A message to add to the start messages and/or a system prompt for this run."""

    message: InjectedMessage | None = None
    system_prompt: str | None = None


# -- context, tools, messages ------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ContextEvent:
    """The messages about to be sent to the model (a copy; return a new list to change it)."""

    messages: tuple[AgentMessage, ...]


@attrs.frozen(kw_only=True)
class ContextResult:
    """The messages to send instead."""

    messages: tuple[AgentMessage, ...] | None = None


@attrs.frozen(kw_only=True)
class ToolCallEvent:
    """A validated tool call about to run. ``input`` may be changed in place (it is not
    validated again)."""

    tool_name: str
    tool_call_id: str
    input: dict[str, Any]
    parent_tool_call_id: str | None = None
    """Set when another tool (a codemode script, ``execute_tool``) made this call."""


ToolCallResult = BeforeToolCallResult
"""A ``tool_call`` handler's answer: ``block=True`` refuses the call with ``reason``. The
agent loop's own hook result, so the session hands it on as it is."""


@attrs.frozen(kw_only=True)
class ToolResultEvent:
    """A tool's result, as changed by the handlers before this one."""

    tool_name: str
    tool_call_id: str
    input: dict[str, Any]
    content: tuple[Any, ...]
    details: Any
    is_error: bool
    parent_tool_call_id: str | None = None


@attrs.frozen(kw_only=True)
class ToolResultPatch:
    """What to change in a tool result; fields left ``None`` keep their current value."""

    content: tuple[Any, ...] | None = None
    details: Any = None
    is_error: bool | None = None


@attrs.frozen(kw_only=True)
class MessageEndResult:
    """A replacement for the finished message; it must have the same role."""

    message: AgentMessage | None = None


# -- session lifecycle ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class SessionStartEvent:
    """The session is ready (``startup``, ``new``, ``resume``, ``fork``, ``reload``)."""

    reason: str
    previous_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionShutdownEvent:
    """The session is going away (``quit``, ``new``, ``resume``, ``fork``, ``reload``)."""

    reason: str
    target_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeSwitchEvent:
    """The runtime is about to replace this session; a handler may cancel."""

    reason: Literal["new", "resume"]
    target_session_file: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeForkEvent:
    """A fork from ``entry_id`` is about to be made; a handler may cancel."""

    entry_id: str
    position: Literal["before", "at"] = "before"


@attrs.frozen(kw_only=True)
class CancelResult:
    """The result of a ``session_before_*`` handler."""

    cancel: bool = False


@attrs.frozen(kw_only=True)
class SessionBeforeCompactEvent:
    """A compaction is prepared: ``preparation`` holds what would be summarised."""

    preparation: Any
    branch_entries: tuple[Any, ...]
    custom_instructions: str | None


@attrs.frozen(kw_only=True)
class CompactionOverride:
    """A compaction computed by an extension instead of the model."""

    summary: str
    first_kept_entry_id: str
    tokens_before: int
    details: Any = None


@attrs.frozen(kw_only=True)
class BeforeCompactResult:
    """Cancel the compaction, or supply its result."""

    cancel: bool = False
    compaction: CompactionOverride | None = None


@attrs.frozen(kw_only=True)
class SessionCompactEvent:
    """A compaction entry was written (``from_extension``: its summary came from a handler)."""

    compaction_entry: Any
    from_extension: bool


@attrs.frozen(kw_only=True)
class ModelSelectEvent:
    """The model changed (``set``, ``cycle`` or ``restore``)."""

    model: Model
    previous_model: Model | None
    source: Literal["set", "cycle", "restore"]


@attrs.frozen(kw_only=True)
class ThinkingLevelSelectEvent:
    """The thinking level changed."""

    level: str
    previous_level: str


@attrs.frozen(kw_only=True)
class TurnEndEvent:
    """A turn finished: its assistant message and tool results, with their entry ids."""

    turn_index: int
    message: AgentMessage
    tool_results: tuple[ToolResultMessage, ...]
    message_entry_id: str | None = None
    tool_result_entry_ids: tuple[str, ...] = ()

    entries: tuple[Any, ...] = ()
    """Drafts asked for by the handlers before this one."""
    continue_: bool = False


@attrs.frozen(kw_only=True)
class AgentBeforeSettleEvent:
    """The run is about to settle; a handler may add entries or ask for one more request."""

    outcome: Literal["completed", "aborted", "error"]
    context_messages: tuple[AgentMessage, ...] = ()
    can_continue: bool = True
    entries: tuple[Any, ...] = ()
    continue_: bool = False


@attrs.frozen(kw_only=True)
class BoundaryResult:
    """``turn_end`` / ``agent_before_settle``: drafts of entries to write (see
    :mod:`~pitrio.actors.session.extensions.drafts`) and whether to make one more request.
    ``None`` fields keep what the handlers before decided."""

    entries: tuple[Any, ...] | None = None
    continue_: bool | None = None


# -- project_trust (pi 1.6.0) ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProjectTrustEvent:
    """A project with protected files is about to be trusted or not (only user-level and
    ``-e`` extensions see it: the project's own are not loaded yet)."""

    cwd: str
    type: Literal["project_trust"] = "project_trust"


@attrs.frozen(kw_only=True)
class ProjectTrustResult:
    """``yes`` / ``no`` decide (the first such answer wins); ``undecided`` passes on.
    ``remember``: save the answer in ``trust.json``."""

    trusted: Literal["yes", "no", "undecided"] = "undecided"
    remember: bool = False


@attrs.frozen(kw_only=True)
class ProjectTrustContext:
    """What a ``project_trust`` handler gets as ``ctx``: no session exists yet.

    ``mode`` is ``rpc``, ``print``, ``json`` (or ``daemon``); ``has_ui`` is ``False`` and the
    dialog methods answer at once as pi 1.6.0's do without a terminal (``None`` / ``False``);
    ``notify`` adds a line to the session's start-up warnings.
    """

    cwd: str
    mode: str
    has_ui: bool = False
    notes: list[str] = attrs.field(factory=list)

    async def select(self, title: str, options: list[str]) -> str | None:
        """No dialog before the session exists: ``None``."""
        return None

    async def confirm(self, title: str, message: str) -> bool:
        """No dialog before the session exists: ``False``."""
        return False

    async def input(self, title: str, placeholder: str | None = None) -> str | None:
        """No dialog before the session exists: ``None``."""
        return None

    def notify(self, message: str, type: str = "info") -> None:
        """Reported with the session's start-up warnings."""
        self.notes.append(message)
