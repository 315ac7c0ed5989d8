"""What extension handlers receive and may return (spec §7.3), as plain data.

Every event an extension can handle is one frozen class here; agent events (``agent_start``,
``message_update``, ``tool_execution_end``, ...) are handed over as the wire events themselves.
A handler returns ``None`` or the event's result class; a ``dict`` with the same field names
(snake_case or pi's camelCase) is accepted too, so short handlers stay short.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pitrio.actors.session.extensions.asks import InputSource as InputSource
from pitrio.actors.tool_executor.hooks import BeforeToolCallResult
from pitrio.messages.agent import AgentMessage, LlmMessage, ToolResultMessage
from pitrio.messages.content import ImageContent
from pitrio.messages.convert import convert_to_llm
from pitrio.messages.model import Model

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
    """A run is about to start; ``system_prompt`` is the prompt as chained so far.
    ``message_type`` says what started it (pi 1.6.0): ``user`` (a prompt: ``prompt`` and
    ``images``) or ``custom`` (``send_message(..., trigger_turn=True)`` while idle: the
    starting ``message``; ``prompt`` empty)."""

    prompt: str
    images: tuple[ImageContent, ...]
    system_prompt: str
    message_type: Literal["user", "custom"] = "user"
    message: Any = None


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
class TreePreparation:
    """What a tree navigation is about to do (pi 1.6.0's ``preparation``): the entries of the
    branch left behind, back to the common ancestor, and the summary options asked for."""

    target_id: str
    old_leaf_id: str | None
    common_ancestor_id: str | None
    entries_to_summarize: tuple[Any, ...]
    user_wants_summary: bool
    custom_instructions: str | None = None
    replace_instructions: bool = False
    label: str | None = None


@attrs.frozen(kw_only=True)
class SessionBeforeTreeEvent:
    """``session_before_tree``: a navigation is prepared; a handler may cancel it, supply the
    branch summary or change the summary options and the label."""

    preparation: TreePreparation


@attrs.frozen(kw_only=True)
class TreeSummaryOverride:
    """A branch summary supplied by an extension (used only when a summary was asked for)."""

    summary: str
    details: Any = None
    usage: Any = None


@attrs.frozen(kw_only=True)
class BeforeTreeResult:
    """Cancel the navigation, supply its summary, or override its options (``None``: keep)."""

    cancel: bool = False
    summary: TreeSummaryOverride | None = None
    custom_instructions: str | None = None
    replace_instructions: bool | None = None
    label: str | None = None


@attrs.frozen(kw_only=True)
class SessionTreeEvent:
    """``session_tree``: the navigation is done and the new branch's context installed;
    ``from_extension`` is ``None`` when no summary was written."""

    new_leaf_id: str | None
    old_leaf_id: str | None
    summary_entry: Any = None
    from_extension: bool | None = None


@attrs.frozen(kw_only=True)
class ResourcesDiscoverEvent:
    """``resources_discover``, after ``session_start``: extensions may add skill, prompt
    template and theme paths (``reason``: ``reload`` after a reload, ``startup`` otherwise)."""

    cwd: str
    reason: Literal["startup", "reload"] = "startup"


@attrs.frozen(kw_only=True)
class ResourcesDiscoverResult:
    """Paths a ``resources_discover`` handler adds (files or directories; relative ones are
    taken from the session's cwd)."""

    skill_paths: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    prompt_paths: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    theme_paths: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen(kw_only=True)
class DiscoveredPaths:
    """Every handler's paths, each with the extension that gave it: ``(path, extension)``."""

    skill_paths: tuple[tuple[str, str], ...] = ()
    prompt_paths: tuple[tuple[str, str], ...] = ()
    theme_paths: tuple[tuple[str, str], ...] = ()


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
    outcome: Literal["completed", "aborted", "error"] = "completed"
    """How the turn's response ended (pi 1.6.0)."""
    context: BoundaryContext | None = None
    """The session's context at this boundary (pi 1.6.0's preview; see the class)."""


@attrs.frozen(kw_only=True)
class BoundaryContext:
    """What a boundary handler sees of the session's context (pi 1.6.0's
    ``BoundaryContextPreview``, in part): the projected messages with the drafts of the
    handlers before it applied (not written yet; those drafts are also in ``entries``) and
    whether a continuation could start from them."""

    context_messages: tuple[AgentMessage, ...]
    can_continue: bool

    @property
    def llm_messages(self) -> tuple[LlmMessage, ...]:
        """pi's ``llmMessages``: the messages as the model would be sent them (converted
        when read)."""
        return tuple(convert_to_llm(self.context_messages))


@attrs.frozen(kw_only=True)
class AgentBeforeSettleEvent:
    """The run is about to settle; a handler may add entries or ask for one more request."""

    outcome: Literal["completed", "aborted", "error"]
    context_messages: tuple[AgentMessage, ...] = ()
    can_continue: bool = True
    entries: tuple[Any, ...] = ()
    continue_: bool = False
    context: BoundaryContext | None = None
    """As :attr:`TurnEndEvent.context` (pi 1.6.0)."""


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


# -- cache_warming_decision (pi 1.6.0) ------------------------------------------------------


@attrs.frozen(kw_only=True)
class CacheWarmingDecisionEvent:
    """A prompt-cache refresh is due: pi's price estimates and its own decision. Handlers
    read anything else (the model, idleness) from ``ctx``."""

    warm_cost: float
    """What this refresh costs."""
    miss_cost: float
    """What the next real request pays extra when the cache entry is lost."""
    continuation_probability: float
    """pi's chance that a real request comes before the entry expires."""
    action: Literal["warm", "stop"]
    type: Literal["cache_warming_decision"] = "cache_warming_decision"


@attrs.frozen(kw_only=True)
class CacheWarmingDecisionResult:
    """``warm`` or ``stop`` overrides pi's decision (the last handler giving one wins);
    ``stop`` ends warming until the next real request."""

    action: Literal["warm", "stop"] | None = None


# -- pi 1.6.0: user_bash, ui prompts (issue 35) -------------------------------------------


@attrs.frozen(kw_only=True)
class UserBashEvent:
    """A user's own shell command (``!cmd``, ``!!cmd``, RPC ``bash``) about to run."""

    command: str
    exclude_from_context: bool
    cwd: str
    type: Literal["user_bash"] = "user_bash"


@attrs.frozen(kw_only=True)
class UserBashResult:
    """Exactly one of: ``operations``, a backend the command runs through (an object whose
    ``async exec(command, cwd, *, on_data)`` streams bytes to ``on_data`` and returns the exit
    code); ``result``, the finished command (a ``BashResult`` or a dict of its fields),
    recorded without running anything."""

    operations: Any = None
    result: Any = None


@attrs.frozen(kw_only=True)
class UiPromptEvent:
    """``ui_prompt_start`` / ``ui_prompt_end``: a blocking dialog span (nested dialogs are one
    span, named after the outer one)."""

    type: Literal["ui_prompt_start", "ui_prompt_end"]
    kind: str
    title: str | None = None
    reason: Literal["ui_prompt"] = "ui_prompt"


# -- pi 1.6.0: the provider request's hooks (issue 35) ----------------------------------------


@attrs.frozen(kw_only=True)
class ContextWithSystemEvent:
    """The whole request transcript, system messages included (index 0: the prompt and the
    initial tools); return a list to send instead (it must keep a system message first)."""

    messages: tuple[AgentMessage, ...]
    type: Literal["context_with_system"] = "context_with_system"


@attrs.frozen(kw_only=True)
class ProviderHeadersEvent:
    """The request's HTTP headers: change ``headers`` in place (``None`` removes one)."""

    headers: dict[str, str | None]
    type: Literal["before_provider_headers"] = "before_provider_headers"


@attrs.frozen(kw_only=True)
class ProviderRequestEvent:
    """The provider's JSON payload about to be sent: return another to send it instead (the
    handlers after see it); ``None`` keeps it (changed in place or not)."""

    payload: Any
    type: Literal["before_provider_request"] = "before_provider_request"


@attrs.frozen(kw_only=True)
class ProviderResponseEvent:
    """An HTTP answer arrived; its body is not read yet."""

    status: int
    headers: dict[str, str]
    type: Literal["after_provider_response"] = "after_provider_response"


@attrs.frozen(kw_only=True)
class ProviderStreamEvent:
    """One stream event as decoded, before it is normalised (read-only; not persisted)."""

    provider: str
    api: str
    model: str
    data: Any
    type: Literal["provider_stream_event"] = "provider_stream_event"


# -- pi 1.6.0: MCP servers extensions register (issue 35) -------------------------------------


@attrs.frozen(kw_only=True)
class RegisteredMcpServer:
    """An MCP server an extension registered (``config``: an ``mcpServers`` entry)."""

    name: str
    config: dict[str, Any]
    extension_path: str

    def to_json(self) -> dict[str, Any]:
        """pi's ``RegisteredMcpServer`` object."""
        return {"name": self.name, "config": self.config, "extensionPath": self.extension_path}


@attrs.frozen(kw_only=True)
class McpServersChangeEvent:
    """An extension registered or removed an MCP server after start-up: every registered
    server after the change, in registration order."""

    servers: tuple[RegisteredMcpServer, ...]
    type: Literal["mcp_servers_change"] = "mcp_servers_change"


@attrs.frozen(kw_only=True)
class SessionCompactFailedEvent:
    """A compaction failed or was aborted (pi 1.6.0); ``error_message`` for a failure that is
    not an abort. ``from_extension``: always ``False`` here (a compaction a handler supplied
    is written without a request that could fail)."""

    reason: str
    aborted: bool
    will_retry: bool
    error_message: str | None = None
    from_extension: bool = False
    type: Literal["session_compact_failed"] = "session_compact_failed"
