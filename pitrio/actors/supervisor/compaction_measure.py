"""Compaction policy, measuring (spec §3.8.2): the settings, the texts pi reports, the token
estimates of messages and of a context, the threshold test and the context usage. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from pitrio.actors.supervisor._entries import collect_edits
from pitrio.actors.supervisor._settings import int_setting
from pitrio.actors.supervisor._text import (
    estimate_text_tokens,
    js_length,
    js_stringify,
)
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.entries import (
    CompactionEntry,
    ContextEditEntry,
    MessageEntry,
    SessionEntry,
)
from pitrio.messages.transcript import replay

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


@attrs.frozen
class ModelOverride:
    """One ``compaction.modelOverrides`` entry; ``None``: the ordinary value applies."""

    ref: str
    reserve: int | None
    keep: int | None


@attrs.frozen(kw_only=True)
class CompactionSettings:
    """The ``compaction.*`` settings (spec §3.8.1)."""

    enabled: bool = True
    """Automatic compaction on or off; manual compaction is always allowed."""
    reserve_tokens: int = DEFAULT_RESERVE_TOKENS
    """Room kept free for the response; also sizes the summary requests."""
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    """Roughly how many recent tokens stay verbatim after a compaction."""
    model_overrides: tuple[ModelOverride, ...] = ()
    """pi 1.6.0's ``compaction.modelOverrides``: per-model token values (:meth:`for_model`)."""

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> CompactionSettings:
        """Read the ``compaction`` object of settings.json; bad or missing keys keep defaults."""
        if not value:
            return cls()
        defaults = cls()
        enabled = value.get("enabled", defaults.enabled)
        overrides = value.get("modelOverrides")
        return cls(
            enabled=enabled if isinstance(enabled, bool) else defaults.enabled,
            reserve_tokens=int_setting(value.get("reserveTokens"), defaults.reserve_tokens),
            keep_recent_tokens=int_setting(
                value.get("keepRecentTokens"), defaults.keep_recent_tokens
            ),
            model_overrides=tuple(
                ModelOverride(
                    ref, _token_count(entry.get("reserveTokens")),
                    _token_count(entry.get("keepRecentTokens")),
                )
                for ref, entry in (overrides.items() if isinstance(overrides, Mapping) else ())
                if isinstance(entry, Mapping)
            ),
        )  # fmt: skip

    def for_model(self, ref: str) -> CompactionSettings:
        """The settings for the model ``ref`` (``provider/modelId``, exact and case-sensitive):
        each token value of its override entry in place of the ordinary one, an absent value
        falling back on its own (pi 1.6.0's rule). ``self`` when no entry changes anything, so
        callers comparing by identity see no change."""
        for override in self.model_overrides:
            if override.ref != ref:
                continue
            reserve = self.reserve_tokens if override.reserve is None else override.reserve
            keep = self.keep_recent_tokens if override.keep is None else override.keep
            if (reserve, keep) == (self.reserve_tokens, self.keep_recent_tokens):
                return self
            return attrs.evolve(self, reserve_tokens=reserve, keep_recent_tokens=keep)
        return self


def _token_count(value: Any) -> int | None:
    # The settings layer has reported and dropped anything but a non-negative safe integer.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return None
    return value


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
    characters per image; bash executions command plus output; summaries their text; system
    messages their content, sections and added tool declarations (as JSON).
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
        case SystemMessage():
            # pi 1.6.0 counts the prompt a system message carries: its content, every section
            # still set, and the tool declarations it adds as JSON.
            chars = _content_chars(message.content, images=True)
            chars += sum(js_length(text) for text in (message.sections or {}).values() if text)
            if message.tools_added:
                chars += js_length(js_stringify(to_json(message.tools_added)))
        case _:
            return 0
    return estimate_text_tokens(chars)


def calculate_context_tokens(usage: Usage) -> int:
    """Tokens a response occupied: ``total_tokens``, else the sum of the four counts."""
    return usage.context_tokens


def _usage_of(message: AgentMessage) -> Usage | None:
    # Failed and aborted responses carry unreliable usage, and an all-zero one none at all:
    # they never anchor an estimate (pi's getAssistantUsage).
    if (
        isinstance(message, AssistantMessage)
        and message.stop_reason not in ("aborted", "error")
        and calculate_context_tokens(message.usage) > 0
    ):
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


def _last_measured_and_changed(path_entries: Sequence[SessionEntry]) -> tuple[int, int]:
    # Where on the branch the last response the context still holds with a usable usage
    # is, and where the last entry that changed the context after the fact (a context edit
    # or a compaction) is; -1 for none.
    omitted = edits_omitting(collect_edits(path_entries))
    measured_at = -1
    for index in range(len(path_entries) - 1, -1, -1):
        entry = path_entries[index]
        if (
            isinstance(entry, MessageEntry)
            and entry.id not in omitted
            and _usage_of(entry.message) is not None
        ):
            measured_at = index
            break
    changed_at = max(
        (
            i
            for i, entry in enumerate(path_entries)
            if isinstance(entry, ContextEditEntry | CompactionEntry)
        ),
        default=-1,
    )
    return measured_at, changed_at


def _estimate_all(context_messages: Sequence[AgentMessage]) -> int:
    # Every message estimated, the system messages once as the prompt they replay into
    # (pi 1.6.0 counts the current system message, not each patch on the way to it).
    current = replay(context_messages)
    tokens = 0 if current is None else estimate_tokens(current)
    return tokens + sum(
        estimate_tokens(m) for m in context_messages if not isinstance(m, SystemMessage)
    )


def estimate_projected_context_tokens(
    path_entries: Sequence[SessionEntry], context_messages: Sequence[AgentMessage]
) -> int:
    """The size of the context ``context_messages`` (the projection of the branch
    ``path_entries``) as pi 1.6.0 estimates it before a compaction (its ``tokensBefore``).

    The last response's usage anchors the estimate only when nothing changed the context
    after it; after a ``context_edit`` (an overflowing or retried attempt omitted, say) or a
    compaction every message is estimated from its characters, the prompt included.
    """
    measured_at, changed_at = _last_measured_and_changed(path_entries)
    if measured_at >= 0 and measured_at > changed_at:
        return estimate_context_tokens(context_messages).tokens
    return _estimate_all(context_messages)


def context_usage(
    path_entries: Sequence[SessionEntry],
    context_messages: Sequence[AgentMessage],
    context_window: int,
) -> ContextUsage | None:
    """The context usage report (spec §3.13, pi 1.6.0); ``None`` when the window is unknown.

    After a compaction the size is unknown (tokens and percent ``None``) until a response
    the context still holds has measured it. A response's usage anchors the estimate only
    when nothing changed the context after it: with a ``context_edit`` or a compaction
    later on the branch (a retried or recovered attempt omitted, say), every message is
    estimated instead.
    """
    if context_window <= 0:
        return None
    measured_at, changed_at = _last_measured_and_changed(path_entries)
    compacted_at = max(
        (i for i, entry in enumerate(path_entries) if isinstance(entry, CompactionEntry)),
        default=-1,
    )
    if compacted_at >= 0 and measured_at < compacted_at:
        return ContextUsage(tokens=None, context_window=context_window, percent=None)
    if measured_at > changed_at:
        tokens = estimate_context_tokens(context_messages).tokens
    else:
        tokens = sum(estimate_tokens(message) for message in context_messages)
    return ContextUsage(
        tokens=tokens, context_window=context_window, percent=tokens / context_window * 100
    )


def edits_omitting(edits: Mapping[str, object]) -> frozenset[str]:
    """The targets ``edits`` take out of the context (a ``None`` replacement)."""
    return frozenset(target for target, replacement in edits.items() if replacement is None)
