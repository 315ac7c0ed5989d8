"""Events: the 10 core ``AgentEvent`` types (spec §2.10) and the session-level additions (§3.2).

``AgentEnd.will_retry`` and :class:`AgentSettled`, :class:`EntryAppended` are the seed-only
additions of the newer pi that pitrio targets.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from pitrio.messages.agent import AgentMessage, AgentToolResult, ToolResultMessage
from pitrio.messages.codec import extra_field, tag
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.stream import PartialUpdate


@attrs.frozen(kw_only=True)
class AgentStart:
    """A run began."""

    type: Literal["agent_start"] = tag("agent_start")
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class AgentEnd:
    """A low-level run ended; ``messages`` are the messages it added."""

    type: Literal["agent_end"] = tag("agent_end")
    messages: tuple[AgentMessage, ...]
    will_retry: bool | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class TurnStart:
    """A turn (one assistant response and its tool calls) began."""

    type: Literal["turn_start"] = tag("turn_start")
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class TurnEnd:
    """A turn ended with its assistant message and tool results in source order."""

    type: Literal["turn_end"] = tag("turn_end")
    message: AgentMessage
    tool_results: tuple[ToolResultMessage, ...]
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class MessageStart:
    """A message began (a complete one, or the first partial of a streamed assistant)."""

    type: Literal["message_start"] = tag("message_start")
    message: AgentMessage
    queue_id: str | None = None
    """The id a queued steer or follow-up got when it was queued (its delivery receipt)."""
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class MessageUpdate:
    """A streamed assistant message changed."""

    type: Literal["message_update"] = tag("message_update")
    assistant_message_event: PartialUpdate
    message: AgentMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class MessageEnd:
    """A message is final."""

    type: Literal["message_end"] = tag("message_end")
    message: AgentMessage
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolExecutionStart:
    """A tool call is about to be prepared and run; ``args`` are the raw arguments."""

    type: Literal["tool_execution_start"] = tag("tool_execution_start")
    tool_call_id: str
    tool_name: str
    args: Any
    parent_tool_call_id: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolExecutionUpdate:
    """A running tool reported its accumulated partial result."""

    type: Literal["tool_execution_update"] = tag("tool_execution_update")
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: AgentToolResult
    parent_tool_call_id: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ToolExecutionEnd:
    """A tool call finished (or was refused) with its result."""

    type: Literal["tool_execution_end"] = tag("tool_execution_end")
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    duration_ms: int | None = None
    """How long the tool ran; absent for a call refused before it ran (pi 1.6.0)."""
    parent_tool_call_id: str | None = None
    extra: dict[str, Any] | None = extra_field()


AgentEvent = (
    AgentStart
    | AgentEnd
    | TurnStart
    | TurnEnd
    | MessageStart
    | MessageUpdate
    | MessageEnd
    | ToolExecutionStart
    | ToolExecutionUpdate
    | ToolExecutionEnd
)
"""Any event of the core agent loop."""


@attrs.frozen(kw_only=True)
class QueueUpdate:
    """The queued steering / follow-up texts shown to the user changed."""

    type: Literal["queue_update"] = tag("queue_update")
    steering: tuple[str, ...]
    follow_up: tuple[str, ...]
    extra: dict[str, Any] | None = extra_field()


CompactionReason = Literal["manual", "threshold", "overflow"]


@attrs.frozen(kw_only=True)
class CompactionStart:
    """A compaction began."""

    type: Literal["compaction_start"] = tag("compaction_start")
    reason: CompactionReason
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class CompactionEnd:
    """A compaction finished, failed or was cancelled."""

    type: Literal["compaction_end"] = tag("compaction_end")
    reason: CompactionReason
    result: CompactionResult | None = None
    aborted: bool
    will_retry: bool
    error_message: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SessionInfoChanged:
    """The session was (re)named; no ``name`` means the name was cleared."""

    type: Literal["session_info_changed"] = tag("session_info_changed")
    name: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ThinkingLevelChanged:
    """The thinking level actually changed."""

    type: Literal["thinking_level_changed"] = tag("thinking_level_changed")
    level: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class AutoRetryStart:
    """A failed response will be retried after ``delay_ms``."""

    type: Literal["auto_retry_start"] = tag("auto_retry_start")
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class AutoRetryEnd:
    """A retry sequence ended: succeeded, exhausted or cancelled."""

    type: Literal["auto_retry_end"] = tag("auto_retry_end")
    success: bool
    attempt: int
    final_error: str | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class AgentSettled:
    """The whole accepted run is settled: no retry, compaction or queued continuation follows."""

    type: Literal["agent_settled"] = tag("agent_settled")
    aborted: bool = False
    """Whether an abort was requested during the run (pi 1.6.0)."""
    turn: Any = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class EntryAppended:
    """A session entry was appended to the session tree."""

    type: Literal["entry_appended"] = tag("entry_appended")
    entry: SessionEntry
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class EntryRecorded(EntryAppended):
    """An entry the session's own flow appended: a message, a model or thinking-level change,
    a label, a name, a bash record, a branch summary.

    It is written as ``entry_appended`` too, but pi 1.6.0 announces only the entries that are
    not otherwise visible in its events (an extension's ``appendEntry``, boundary drafts,
    retry omissions); pi-compatible transports leave these out unless a client asks for every
    entry (``set_event_format {"entries": "all"}``), while the daemon and the SDK see them all.
    """


@attrs.frozen(kw_only=True)
class SummarizationRetryScheduled:
    """A compaction or branch-summary request will be retried."""

    type: Literal["summarization_retry_scheduled"] = tag("summarization_retry_scheduled")
    attempt: int
    max_attempts: int
    delay_ms: int
    error_message: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SummarizationRetryAttemptStart:
    """A summarization retry attempt begins."""

    type: Literal["summarization_retry_attempt_start"] = tag("summarization_retry_attempt_start")
    source: Literal["branchSummary", "compaction"]
    reason: CompactionReason | None = None
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SummarizationRetryFinished:
    """A summarization retry sequence ended."""

    type: Literal["summarization_retry_finished"] = tag("summarization_retry_finished")
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class BashExecutionUpdate:
    """Streaming output of a user ``!`` command."""

    type: Literal["bash_execution_update"] = tag("bash_execution_update")
    id: str | None = None
    delta: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class SessionReadOnly:
    """The session file could not be written: nothing more is recorded, prompts are refused
    (pitrio's own event; ``error`` names the file and the system's error)."""

    type: Literal["session_read_only"] = tag("session_read_only")
    error: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class EntriesMerged:
    """Another writer (pi, say, which appends without a lock) appended entries to the session
    file; they were read into the session, which continues from the file's last entry
    (pitrio's own event: pi 1.6.0 has none for this). ``entry_ids`` are the entries taken in,
    in file order; ``leaf_id`` the session's leaf after taking them; ``message`` says so."""

    type: Literal["entries_merged"] = tag("entries_merged")
    path: str
    entry_ids: tuple[str, ...]
    leaf_id: str | None
    message: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ExtensionError:
    """An extension's handler or command failed (pi's RPC ``extension_error`` record).

    ``extension_path`` names the extension file, or ``command:<name>`` for a command.
    """

    type: Literal["extension_error"] = tag("extension_error")
    extension_path: str
    event: str
    error: str
    extra: dict[str, Any] | None = extra_field()


@attrs.frozen(kw_only=True)
class ExtensionUiRequest:
    """A dialog or a fire-and-forget UI call from an extension (pi-rpc.md §9).

    Dialogs (``select``, ``confirm``, ``input``, ``editor``) wait for an
    ``extension_ui_response`` with the same ``id``; the others expect no reply.
    """

    type: Literal["extension_ui_request"] = tag("extension_ui_request")
    id: str
    method: str
    title: str | None = None
    options: tuple[str, ...] | None = None
    message: str | None = None
    placeholder: str | None = None
    prefill: str | None = None
    timeout: int | None = None
    notify_type: str | None = None
    status_key: str | None = None
    status_text: str | None = None
    widget_key: str | None = None
    widget_lines: tuple[str, ...] | None = None
    widget_placement: str | None = None
    text: str | None = None
    plan_entries: tuple[dict[str, str], ...] | None = None
    """``setPlan`` (pitrio's, no pi method): the whole plan, each entry's ``content``,
    ``priority`` and ``status`` (an empty plan clears it)."""
    extra: dict[str, Any] | None = extra_field()


SessionOnlyEvent = (
    QueueUpdate
    | CompactionStart
    | CompactionEnd
    | SessionInfoChanged
    | ThinkingLevelChanged
    | AutoRetryStart
    | AutoRetryEnd
    | AgentSettled
    | EntryAppended
    | EntryRecorded
    | SummarizationRetryScheduled
    | SummarizationRetryAttemptStart
    | SummarizationRetryFinished
    | BashExecutionUpdate
    | ExtensionError
    | ExtensionUiRequest
    | SessionReadOnly
    | EntriesMerged
)
"""Events only the session layer emits."""

AgentSessionEvent = AgentEvent | SessionOnlyEvent
"""Any event a session subscriber receives."""
