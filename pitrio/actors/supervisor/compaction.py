"""Compaction policy (spec §3.8): when to compact, where to cut, what to ask the summarizer.

Pure functions over session entries and messages; the session actor performs the effects
(the summary model call, appending the ``compaction`` entry, events). The pieces, in the
order a compaction uses them:

* :class:`CompactionSettings`, :func:`estimate_tokens`, :func:`estimate_context_tokens`,
  :func:`should_compact` - measuring the context and the threshold;
* :func:`find_cut_point`, :func:`prepare_compaction` - which entries are summarized and
  which are kept verbatim (split turns included);
* :func:`serialize_conversation`, :func:`plan_summary` (:func:`build_summary_request`,
  :func:`build_turn_prefix_request`), :func:`finish_compaction` - the summary requests and
  the final :class:`~pitrio.messages.entries.CompactionResult`;
* :func:`auto_compaction_decision` - threshold versus overflow after a run, with the one
  overflow-recovery attempt per run.

Token accounting for the cut point counts every entry that reaches the model - custom
messages and branch summaries too (DESIGN §5.3) - and reads entries through their context
edits, so what is measured is what the model is sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from pitrio.actors.supervisor import prompts
from pitrio.actors.supervisor._entries import (
    Edits,
    collect_edits,
    entry_message,
    iso_to_ms,
    last_compaction_index,
    project_path,
)
from pitrio.actors.supervisor._text import (
    estimate_text_tokens,
    js_length,
    js_slice,
    js_stringify,
)
from pitrio.actors.supervisor.file_ops import FileOperations, format_file_lists
from pitrio.actors.supervisor.overflow import overflow_kind
from pitrio.actors.supervisor.retry import is_retryable_error
from pitrio.errors import SummarizationError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    LlmMessage,
    ThinkingLevel,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import convert_to_llm
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CompactionResult,
    CustomMessageEntry,
    MessageEntry,
    SessionEntry,
)
from pitrio.messages.events import CompactionEnd
from pitrio.messages.model import LlmContext, Model, StreamOptions

# --- settings -------------------------------------------------------------------------------

DEFAULT_RESERVE_TOKENS = 16384
DEFAULT_KEEP_RECENT_TOKENS = 20000

# An image's share of the estimate, in characters (so 1200 tokens), as pi counts it.
IMAGE_CHARS = 4800
# Tool results longer than this are cut in the text sent to the summarizer.
TOOL_RESULT_MAX_CHARS = 2000

NO_PRIOR_HISTORY = "No prior history."
TURN_CONTEXT_SEPARATOR = "\n\n---\n\n**Turn Context (split turn):**\n\n"
ADDITIONAL_FOCUS = "\n\nAdditional focus: "
UNKNOWN_ERROR = "Unknown error"

ALREADY_COMPACTED = "Already compacted"
NOTHING_TO_COMPACT = "Nothing to compact (session too small)"
COMPACTION_CANCELLED = "Compaction cancelled"
OVERFLOW_RECOVERY_FAILED = (
    "Context overflow recovery failed after one compact-and-retry attempt. "
    "Try reducing context or switching to a larger-context model."
)
TRUNCATION_RECOVERY_FAILED = (
    "Truncated response recovery failed after one compact-and-retry attempt."
)


def _int_setting(value: Any, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """The ``compaction.*`` settings (spec §3.8.1)."""

    enabled: bool = True
    """Automatic compaction on or off; manual compaction is always allowed."""
    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    """Room kept free for the response; also sizes the summary requests."""
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    """Roughly how many recent tokens stay verbatim after a compaction."""

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> CompactionSettings:
        """Read the ``compaction`` object of settings.json; bad or missing keys keep defaults."""
        if not value:
            return cls()
        defaults = cls()
        enabled = value.get("enabled", defaults.enabled)
        return cls(
            enabled=enabled if isinstance(enabled, bool) else defaults.enabled,
            reserve_tokens=_int_setting(value.get("reserveTokens"), defaults.reserve_tokens),
            keep_recent_tokens=_int_setting(
                value.get("keepRecentTokens"), defaults.keep_recent_tokens
            ),
        )


# --- token estimation (§3.8.2) ---------------------------------------------------------------


def _content_chars(content: str | Sequence[Any], *, images: bool) -> int:
    if isinstance(content, str):
        return js_length(content)
    chars = 0
    for block in content:
        if isinstance(block, TextContent):
            chars += js_length(block.text)
        elif images and isinstance(block, ImageContent):
            chars += IMAGE_CHARS
    return chars


def estimate_tokens(message: AgentMessage) -> int:
    """pi's rough token count of one message: characters / 4, rounded up.

    Users count their text (images are ignored); assistants their text, thinking and tool
    calls (name plus JSON arguments); custom messages and tool results their text plus 4800
    characters per image; bash executions command plus output; summaries their text.
    """
    match message:
        case UserMessage():
            chars = _content_chars(message.content, images=False)
        case AssistantMessage():
            chars = 0
            for block in message.content:
                if isinstance(block, TextContent):
                    chars += js_length(block.text)
                elif isinstance(block, ThinkingContent):
                    chars += js_length(block.thinking)
                elif isinstance(block, ToolCall):
                    chars += js_length(block.name) + js_length(js_stringify(block.arguments))
        case CustomMessage() | ToolResultMessage():
            chars = _content_chars(message.content, images=True)
        case BashExecutionMessage():
            chars = js_length(message.command) + js_length(message.output)
        case BranchSummaryMessage() | CompactionSummaryMessage():
            chars = js_length(message.summary)
        case _:
            return 0
    return estimate_text_tokens(chars)


def calculate_context_tokens(usage: Usage) -> int:
    """Tokens a response occupied: ``total_tokens``, else the sum of the four counts."""
    return usage.context_tokens


def _usage_of(message: AgentMessage) -> Usage | None:
    # Failed and aborted responses carry unreliable usage; they never anchor an estimate.
    if isinstance(message, AssistantMessage) and message.stop_reason not in ("aborted", "error"):
        return message.usage
    return None


def last_assistant_usage(entries: Sequence[SessionEntry]) -> Usage | None:
    """The usage of the last assistant ``message`` entry that neither failed nor was aborted."""
    for entry in reversed(entries):
        if isinstance(entry, MessageEntry):
            usage = _usage_of(entry.message)
            if usage is not None:
                return usage
    return None


@attrs.frozen(kw_only=True)
class ContextEstimate:
    """How full the context is: the last response's usage plus estimates for what followed."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    last_usage_index: int | None
    """Index of the message whose usage anchors the estimate; ``None`` if all is estimated."""


def estimate_context_tokens(messages: Sequence[AgentMessage]) -> ContextEstimate:
    """Estimate the context size of ``messages`` (pi's ``estimateContextTokens``).

    The last successful assistant response's usage counts what came up to it; the messages
    after it are estimated. Without any usable usage everything is estimated.
    """
    for index in range(len(messages) - 1, -1, -1):
        usage = _usage_of(messages[index])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing = sum(estimate_tokens(m) for m in messages[index + 1 :])
            return ContextEstimate(
                tokens=usage_tokens + trailing,
                usage_tokens=usage_tokens,
                trailing_tokens=trailing,
                last_usage_index=index,
            )
    total = sum(estimate_tokens(m) for m in messages)
    return ContextEstimate(
        tokens=total, usage_tokens=0, trailing_tokens=total, last_usage_index=None
    )


def should_compact(context_tokens: int, context_window: int, settings: CompactionSettings) -> bool:
    """Whether a context of ``context_tokens`` leaves less than the reserve free.

    An unknown window (``<= 0``) never triggers (DESIGN §5.2): pi's formula would compact
    on every turn there.
    """
    if not settings.enabled or context_window <= 0:
        return False
    return context_tokens > context_window - settings.reserve_tokens


@attrs.frozen(kw_only=True)
class ContextUsage:
    """How full the model's context is (``get_context_usage``); unknown after a compaction."""

    tokens: int | None
    context_window: int
    percent: float | None


def context_usage(
    path_entries: Sequence[SessionEntry],
    context_messages: Sequence[AgentMessage],
    context_window: int,
) -> ContextUsage | None:
    """The context usage report (spec §3.13); ``None`` when the window is unknown.

    Right after a compaction no response has measured the new context yet, so tokens and
    percent are unknown until one does.
    """
    if context_window <= 0:
        return None
    for entry in reversed(path_entries):
        if isinstance(entry, CompactionEntry):
            return ContextUsage(tokens=None, context_window=context_window, percent=None)
        if isinstance(entry, MessageEntry):
            usage = _usage_of(entry.message)
            if usage is not None and calculate_context_tokens(usage) > 0:
                break
    tokens = estimate_context_tokens(context_messages).tokens
    return ContextUsage(
        tokens=tokens, context_window=context_window, percent=tokens / context_window * 100
    )


# --- cut point (§3.8.4) ----------------------------------------------------------------------

_CUT_ROLES = frozenset(
    {"user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary"}
)


def is_valid_cut_point(entry: SessionEntry) -> bool:
    """Whether the kept part of a compaction may start at ``entry``.

    Any message but a tool result (which must stay with its call), and custom-message and
    branch-summary entries.
    """
    if isinstance(entry, MessageEntry):
        return entry.message.role in _CUT_ROLES
    return isinstance(entry, BranchSummaryEntry | CustomMessageEntry)


def _is_turn_start(entry: SessionEntry) -> bool:
    if isinstance(entry, MessageEntry):
        return entry.message.role in ("user", "bashExecution")
    return isinstance(entry, BranchSummaryEntry | CustomMessageEntry)


def entry_tokens(entry: SessionEntry, edits: Edits | None = None) -> int:
    """Estimated tokens ``entry`` puts in the model's context (0 if it puts none there)."""
    message = entry_message(entry, edits)
    if message is None:
        return 0
    if isinstance(message, BashExecutionMessage) and message.exclude_from_context:
        return 0
    return estimate_tokens(message)


@attrs.frozen(kw_only=True)
class CutPoint:
    """Where a compaction cuts: the first kept entry, and the turn it splits if it splits one."""

    first_kept_entry_index: int
    turn_start_index: int
    """Start of the split turn, or -1 when the cut falls between turns."""
    is_split_turn: bool


def find_turn_start_index(entries: Sequence[SessionEntry], index: int, start: int) -> int:
    """The nearest turn start at or before ``index`` (not before ``start``), or -1."""
    for i in range(index, start - 1, -1):
        if _is_turn_start(entries[i]):
            return i
    return -1


def find_cut_point(
    entries: Sequence[SessionEntry], start: int, end: int, keep_recent_tokens: int
) -> CutPoint:
    """Choose the first kept entry in ``entries[start:end]`` (spec §3.8.4).

    Walking back from the end, the cut lands on the first valid cut point at or after the
    entry where the kept tokens reach ``keep_recent_tokens``; with no such entry it stays at
    the first valid cut point. Non-message entries right before the cut (settings changes,
    labels, custom entries, ...) are kept with it. A cut on anything but a user message
    splits a turn; the turn's start is reported so its beginning can be summarized apart.
    """
    cut_points = [i for i in range(start, end) if is_valid_cut_point(entries[i])]
    if not cut_points:
        return CutPoint(first_kept_entry_index=start, turn_start_index=-1, is_split_turn=False)
    edits = collect_edits(entries)
    cut_index = cut_points[0]
    kept = 0
    for i in range(end - 1, start - 1, -1):
        kept += entry_tokens(entries[i], edits)
        if kept >= keep_recent_tokens:
            cut_index = next((c for c in cut_points if c >= i), cut_index)
            break
    while cut_index > start and not isinstance(
        entries[cut_index - 1], MessageEntry | CompactionEntry
    ):
        cut_index -= 1
    first = entries[cut_index]
    if isinstance(first, MessageEntry) and first.message.role == "user":
        return CutPoint(first_kept_entry_index=cut_index, turn_start_index=-1, is_split_turn=False)
    turn_start = find_turn_start_index(entries, cut_index, start)
    return CutPoint(
        first_kept_entry_index=cut_index,
        turn_start_index=turn_start,
        is_split_turn=turn_start != -1,
    )


# --- preparation (§3.8.5) --------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class CompactionPreparation:
    """Everything a compaction needs before the summary call (pi's ``CompactionPreparation``)."""

    first_kept_entry_id: str
    messages_to_summarize: tuple[AgentMessage, ...]
    turn_prefix_messages: tuple[AgentMessage, ...]
    is_split_turn: bool
    tokens_before: int
    previous_summary: str | None
    file_ops: FileOperations
    settings: CompactionSettings


def _messages_between(
    entries: Sequence[SessionEntry], start: int, end: int, edits: Edits
) -> tuple[AgentMessage, ...]:
    # Compaction entries are skipped: an earlier summary travels as ``previous_summary``.
    return tuple(m for e in entries[start:end] if (m := entry_message(e, edits)) is not None)


def prepare_compaction(
    path_entries: Sequence[SessionEntry],
    settings: CompactionSettings,
    *,
    context_messages: Sequence[AgentMessage] | None = None,
) -> CompactionPreparation | None:
    """Plan a compaction of the branch ``path_entries`` (root to leaf), or ``None``.

    ``None`` when the branch already ends with a compaction or has no entry to keep. An
    earlier compaction's kept entries are summarized again together with its summary (pi
    0.73.1). ``tokens_before`` estimates the current context; pass the session's projection as
    ``context_messages`` when it has one, else it is rebuilt from ``path_entries``.
    """
    if not path_entries or isinstance(path_entries[-1], CompactionEntry):
        return None
    previous_at = last_compaction_index(path_entries)
    boundary_start = 0
    previous_summary: str | None = None
    file_ops = FileOperations()
    if previous_at >= 0:
        previous = path_entries[previous_at]
        assert isinstance(previous, CompactionEntry)
        previous_summary = previous.summary
        boundary_start = next(
            (i for i, e in enumerate(path_entries) if e.id == previous.first_kept_entry_id),
            previous_at + 1,
        )
        if previous.from_hook is not True:
            # Lists written by an extension are not ours to carry forward.
            file_ops = file_ops.with_details(previous.details)
    if context_messages is None:
        context_messages = project_path(path_entries)
    tokens_before = estimate_context_tokens(context_messages).tokens

    cut = find_cut_point(
        path_entries, boundary_start, len(path_entries), settings.keep_recent_tokens
    )
    if cut.first_kept_entry_index >= len(path_entries):
        return None
    first_kept = path_entries[cut.first_kept_entry_index]
    if not first_kept.id:
        return None  # an id-less entry: the file needs migrating first
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    edits = collect_edits(path_entries)
    to_summarize = _messages_between(path_entries, boundary_start, history_end, edits)
    prefix: tuple[AgentMessage, ...] = ()
    if cut.is_split_turn:
        prefix = _messages_between(
            path_entries, cut.turn_start_index, cut.first_kept_entry_index, edits
        )
    file_ops = file_ops.with_messages(to_summarize).with_messages(prefix)
    return CompactionPreparation(
        first_kept_entry_id=first_kept.id,
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=file_ops,
        settings=settings,
    )


def manual_compaction_refusal(path_entries: Sequence[SessionEntry]) -> str:
    """Why a manual compaction has nothing to do (when :func:`prepare_compaction` gave ``None``)."""
    if path_entries and isinstance(path_entries[-1], CompactionEntry):
        return ALREADY_COMPACTED
    return NOTHING_TO_COMPACT


def latest_compaction_ms(path_entries: Sequence[SessionEntry]) -> int | None:
    """Unix milliseconds of the branch's latest compaction entry, or ``None``."""
    index = last_compaction_index(path_entries)
    return iso_to_ms(path_entries[index].timestamp) if index >= 0 else None


# --- serialisation and summary requests (§3.8.6) ---------------------------------------------


def _tool_call_text(call: ToolCall) -> str:
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    rendered = ", ".join(f"{key}={js_stringify(value)}" for key, value in arguments.items())
    return f"{call.name}({rendered})"


def _truncate_tool_result(text: str) -> str:
    length = js_length(text)
    if length <= TOOL_RESULT_MAX_CHARS:
        return text
    dropped = length - TOOL_RESULT_MAX_CHARS
    return js_slice(text, TOOL_RESULT_MAX_CHARS) + f"\n\n[... {dropped} more characters truncated]"


def _joined_text(content: str | Sequence[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.text for block in content if isinstance(block, TextContent))


def serialize_conversation(messages: Sequence[LlmMessage]) -> str:
    """The text the summarizer reads: one labelled part per message piece, blank-line separated.

    ``[User]: ...``; an assistant gives ``[Assistant thinking]: ...``, ``[Assistant]: ...``
    and ``[Assistant tool calls]: name(key=<json>, ...); ...`` (each only when present);
    ``[Tool result]: ...`` is cut to 2000 characters. Same labels as pi, so the fixtures'
    scripted summarizer counts the same lines.
    """
    parts: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            text = _joined_text(message.content)
            if text:
                parts.append(f"[User]: {text}")
        elif isinstance(message, AssistantMessage):
            texts = [b.text for b in message.content if isinstance(b, TextContent)]
            thinking = [b.thinking for b in message.content if isinstance(b, ThinkingContent)]
            calls = [_tool_call_text(b) for b in message.content if isinstance(b, ToolCall)]
            if thinking:
                parts.append("[Assistant thinking]: " + "\n".join(thinking))
            if texts:
                parts.append("[Assistant]: " + "\n".join(texts))
            if calls:
                parts.append("[Assistant tool calls]: " + "; ".join(calls))
        elif isinstance(message, ToolResultMessage):
            text = _joined_text(message.content)
            if text:
                parts.append(f"[Tool result]: {_truncate_tool_result(text)}")
    return "\n\n".join(parts)


def serialize_messages(messages: Sequence[AgentMessage]) -> str:
    """:func:`serialize_conversation` of agent messages, converted as the model sees them."""
    return serialize_conversation(convert_to_llm(messages))


def conversation_block(messages: Sequence[AgentMessage]) -> str:
    """``messages`` serialized and wrapped in ``<conversation>`` tags, ready for a prompt."""
    return f"<conversation>\n{serialize_messages(messages)}\n</conversation>\n\n"


SummaryKind = Literal["initial", "update", "turn_prefix", "branch"]


@attrs.frozen(kw_only=True)
class SummaryRequest:
    """One summary model call: the system prompt, the single user prompt, the output limit."""

    kind: SummaryKind
    system_prompt: str
    prompt: str
    max_tokens: int
    reasoning_allowed: bool = True
    """Whether the session's thinking level applies (compaction yes, branch summaries no)."""

    def context(self, timestamp: int) -> LlmContext:
        """The provider context: the prompt as one user message, no tools."""
        user = UserMessage(content=(TextContent(text=self.prompt),), timestamp=timestamp)
        return LlmContext(system_prompt=self.system_prompt, messages=(user,))

    def stream_options(
        self, model: Model, thinking_level: ThinkingLevel | None, api_key: str | None = None
    ) -> StreamOptions:
        """Options for the call: the output limit, and reasoning at the session's level when
        the model reasons and thinking is on (pi 0.73.1)."""
        reasoning: ThinkingLevel | None = None
        if (
            self.reasoning_allowed
            and model.reasoning
            and thinking_level is not None
            and thinking_level != "off"
        ):
            reasoning = thinking_level
        return StreamOptions(reasoning=reasoning, max_tokens=self.max_tokens, api_key=api_key)


def _with_focus(instructions: str, custom_instructions: str | None) -> str:
    if custom_instructions:
        return instructions + ADDITIONAL_FOCUS + custom_instructions
    return instructions


def build_summary_request(
    preparation: CompactionPreparation, custom_instructions: str | None = None
) -> SummaryRequest:
    """The history summary request: the initial one, or the update one after a compaction.

    The prompt holds the conversation to summarize, then the earlier summary in
    ``<previous-summary>`` tags when there is one, then the instructions (plus the user's
    ``Additional focus``). The output may use 80 % of the reserve.
    """
    prompt = conversation_block(preparation.messages_to_summarize)
    if preparation.previous_summary is not None:
        prompt += f"<previous-summary>\n{preparation.previous_summary}\n</previous-summary>\n\n"
        instructions = prompts.UPDATE_INSTRUCTIONS
        kind: SummaryKind = "update"
    else:
        instructions = prompts.INITIAL_INSTRUCTIONS
        kind = "initial"
    prompt += _with_focus(instructions, custom_instructions)
    return SummaryRequest(
        kind=kind,
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompt,
        max_tokens=int(0.8 * preparation.settings.reserve_tokens),
    )


def build_turn_prefix_request(preparation: CompactionPreparation) -> SummaryRequest:
    """The request summarizing the beginning of a split turn (half the reserve as output)."""
    prompt = conversation_block(preparation.turn_prefix_messages)
    prompt += prompts.TURN_PREFIX_INSTRUCTIONS
    return SummaryRequest(
        kind="turn_prefix",
        system_prompt=prompts.SYSTEM_PROMPT,
        prompt=prompt,
        max_tokens=int(0.5 * preparation.settings.reserve_tokens),
    )


@attrs.frozen(kw_only=True)
class SummaryPlan:
    """The model calls one compaction makes (the two of a split turn may run in parallel)."""

    history: SummaryRequest | None
    """The history request; ``None`` means the history part is the text "No prior history."."""
    turn_prefix: SummaryRequest | None
    """The split turn's prefix request, if the cut splits a turn with something before it."""


def plan_summary(
    preparation: CompactionPreparation, custom_instructions: str | None = None
) -> SummaryPlan:
    """Which summary calls to make for ``preparation`` (spec §3.8.6).

    Without a split turn the history request is always made, even for empty history. With a
    split turn the prefix gets its own request, and an empty history is not asked about (the
    history part becomes "No prior history.", as in pi - an earlier summary is then not
    carried into the new one).
    """
    if preparation.is_split_turn and preparation.turn_prefix_messages:
        history = (
            build_summary_request(preparation, custom_instructions)
            if preparation.messages_to_summarize
            else None
        )
        return SummaryPlan(history=history, turn_prefix=build_turn_prefix_request(preparation))
    return SummaryPlan(
        history=build_summary_request(preparation, custom_instructions), turn_prefix=None
    )


def response_text(message: AssistantMessage, *, failure: str = "Summarization failed") -> str:
    """The text blocks of a summary response joined by newlines.

    A failed response raises :class:`~pitrio.errors.SummarizationError` with
    ``"<failure>: <error text>"`` (``retryable`` if the error is transient).
    """
    if message.stop_reason == "error":
        error = message.error_message or UNKNOWN_ERROR
        raise SummarizationError(f"{failure}: {error}", retryable=is_retryable_error(message))
    return "\n".join(b.text for b in message.content if isinstance(b, TextContent))


TURN_PREFIX_FAILURE = "Turn prefix summarization failed"


def finish_compaction(
    preparation: CompactionPreparation,
    plan: SummaryPlan,
    history_text: str | None,
    turn_prefix_text: str | None = None,
) -> CompactionResult:
    """Assemble the :class:`CompactionResult` from the summary texts the plan's calls gave.

    A split turn's parts are joined under a "Turn Context (split turn)" rule; the file lists
    are appended last and stored in ``details``.
    """
    history = history_text if plan.history is not None and history_text is not None else None
    summary = history if history is not None else NO_PRIOR_HISTORY
    if plan.turn_prefix is not None:
        summary += TURN_CONTEXT_SEPARATOR + (turn_prefix_text or "")
    read_files, modified_files = preparation.file_ops.file_lists()
    summary += format_file_lists(read_files, modified_files)
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        details=preparation.file_ops.details(),
    )


def compaction_failure_message(reason: str, error: str) -> str:
    """The ``compaction_end.errorMessage`` of a compaction that raised ``error``."""
    if reason == "overflow":
        return f"Context overflow recovery failed: {error}"
    if reason == "manual":
        return f"Compaction failed: {error}"
    return f"Auto-compaction failed: {error}"


# --- the automatic decision (§3.8.9) ---------------------------------------------------------


def is_same_model(message: AssistantMessage, model: Model | None) -> bool:
    """Whether ``message`` was answered by ``model`` (same provider and id)."""
    return model is not None and message.provider == model.provider and message.model == model.id


@attrs.frozen(kw_only=True)
class CompactionCheck:
    """What the automatic compaction check looks at after a run (or before a prompt)."""

    message: AssistantMessage
    """The run's last assistant response."""
    context_window: int
    """The current model's window; 0 when unknown."""
    same_model: bool
    """Whether ``message`` came from the current model (only then can it show overflow)."""
    settings: CompactionSettings
    context_messages: Sequence[AgentMessage] = ()
    """The projected context, for the estimate when ``message`` failed."""
    latest_compaction_ms: int | None = None
    """When the branch's latest compaction was appended, to ignore older measurements."""
    overflow_recovery_attempted: bool = False
    skip_aborted: bool = True
    """After a run an aborted response is not checked; before a prompt it is."""


@attrs.frozen
class NoCompaction:
    """Nothing to do."""


@attrs.frozen(kw_only=True)
class CompactNow:
    """Compact for ``reason``; with ``will_retry`` the failed response is retried afterwards.

    ``failed`` is the response to omit from the context before compacting (an overflow that
    will be retried); ``tokens`` is the measured context size of a threshold compaction.
    """

    reason: Literal["threshold", "overflow"]
    will_retry: bool
    failed: AssistantMessage | None = None
    tokens: int | None = None


@attrs.frozen
class OverflowRecoveryFailed:
    """The run overflowed again after its one recovery: report ``event``, do not compact."""

    event: CompactionEnd


CompactionDecision = NoCompaction | CompactNow | OverflowRecoveryFailed
"""What the automatic compaction check decided."""


def needs_branch_inputs(check: CompactionCheck) -> bool:
    """Whether the check's answer may depend on its ``context_messages`` or
    ``latest_compaction_ms`` (which the session reads from the store).

    Not when, without them, the check decides not to compact for a response that did not fail:
    the latest compaction can only turn a compaction into none, and the context is read only
    for a failed response. So the session asks the store only when they may matter (issue 7:
    one actor round trip less before each prompt and after each run).
    """
    if check.message.stop_reason == "error":
        return True
    bare = attrs.evolve(check, context_messages=(), latest_compaction_ms=None)
    return not isinstance(auto_compaction_decision(bare), NoCompaction)


def auto_compaction_decision(check: CompactionCheck) -> CompactionDecision:
    """Decide whether and why to compact automatically (spec §3.8.9, seed classes).

    * overflow reported by the provider, or input truncated to fill the window (``length``
      with no output): compact and retry, once per run; the second time report
      :data:`OVERFLOW_RECOVERY_FAILED` (or :data:`TRUNCATION_RECOVERY_FAILED`) instead;
    * a successful response larger than the window (silent overflow): compact, no retry;
    * otherwise the threshold: the response's own usage, or for a failed response the
      estimate anchored on the last successful one - skipped when no usage exists or it
      predates the latest compaction.
    """
    message, settings = check.message, check.settings
    if not settings.enabled:
        return NoCompaction()
    if check.skip_aborted and message.stop_reason == "aborted":
        return NoCompaction()
    stale_before = check.latest_compaction_ms
    if stale_before is not None and message.timestamp <= stale_before:
        return NoCompaction()

    kind = overflow_kind(message, check.context_window) if check.same_model else None
    if kind == "silent":
        return CompactNow(reason="overflow", will_retry=False)
    if kind is not None:
        if check.overflow_recovery_attempted:
            text = TRUNCATION_RECOVERY_FAILED if kind == "length" else OVERFLOW_RECOVERY_FAILED
            return OverflowRecoveryFailed(
                CompactionEnd(
                    reason="overflow",
                    result=None,
                    aborted=False,
                    will_retry=False,
                    error_message=text,
                )
            )
        return CompactNow(reason="overflow", will_retry=True, failed=message)

    if message.stop_reason == "error":
        estimate = estimate_context_tokens(check.context_messages)
        if estimate.last_usage_index is None:
            return NoCompaction()
        anchor = check.context_messages[estimate.last_usage_index]
        if stale_before is not None and anchor.timestamp <= stale_before:
            return NoCompaction()
        tokens = estimate.tokens
    else:
        tokens = calculate_context_tokens(message.usage)
    if should_compact(tokens, check.context_window, settings):
        return CompactNow(reason="threshold", will_retry=False, tokens=tokens)
    return NoCompaction()


def threshold_between_turns(
    context_messages: Sequence[AgentMessage],
    context_window: int,
    settings: CompactionSettings,
    latest_compaction: int | None = None,
) -> int | None:
    """Seed's between-turn check: the context size if it crossed the threshold, else ``None``.

    Anchored on the last successful response's usage; a measurement older than the latest
    compaction does not count.
    """
    estimate = estimate_context_tokens(context_messages)
    if estimate.last_usage_index is None:
        return None
    anchor = context_messages[estimate.last_usage_index]
    if latest_compaction is not None and anchor.timestamp <= latest_compaction:
        return None
    return estimate.tokens if should_compact(estimate.tokens, context_window, settings) else None
