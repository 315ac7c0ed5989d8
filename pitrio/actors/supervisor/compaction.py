"""Compaction policy (spec §3.8): when to compact, where to cut, what to ask the summarizer.

Pure functions over session entries and messages; the Supervisor actor performs the effects
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

The measuring lives in :mod:`.compaction_measure`, the cut in :mod:`.compaction_cut`, the
summary requests in :mod:`.compaction_summary`; this module holds the automatic decision and
re-exports the rest, so callers import every piece from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from pitrio.actors.supervisor.compaction_cut import (
    CompactionPreparation,
    CutPoint,
    entry_tokens,
    find_cut_point,
    find_turn_start_index,
    is_valid_cut_point,
    latest_compaction_ms,
    manual_compaction_refusal,
    prepare_compaction,
)
from pitrio.actors.supervisor.compaction_measure import (
    ADDITIONAL_FOCUS,
    ALREADY_COMPACTED,
    COMPACTION_CANCELLED,
    DEFAULT_KEEP_RECENT_TOKENS,
    DEFAULT_RESERVE_TOKENS,
    IMAGE_CHARS,
    NO_PRIOR_HISTORY,
    NOTHING_TO_COMPACT,
    OVERFLOW_RECOVERY_FAILED,
    TOOL_RESULT_MAX_CHARS,
    TRUNCATION_RECOVERY_FAILED,
    TURN_CONTEXT_SEPARATOR,
    UNKNOWN_ERROR,
    CompactionSettings,
    ContextEstimate,
    ContextUsage,
    calculate_context_tokens,
    context_usage,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    last_assistant_usage,
    should_compact,
)
from pitrio.actors.supervisor.compaction_summary import (
    TURN_PREFIX_FAILURE,
    SummaryKind,
    SummaryPlan,
    SummaryRequest,
    build_summary_request,
    build_turn_prefix_request,
    compaction_failure_message,
    conversation_block,
    finish_compaction,
    plan_summary,
    response_text,
    serialize_conversation,
    serialize_messages,
)
from pitrio.actors.supervisor.overflow import overflow_kind
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    combine_usage,
)
from pitrio.messages.events import CompactionEnd
from pitrio.messages.model import Model

__all__ = [
    "ADDITIONAL_FOCUS",
    "ALREADY_COMPACTED",
    "COMPACTION_CANCELLED",
    "DEFAULT_KEEP_RECENT_TOKENS",
    "DEFAULT_RESERVE_TOKENS",
    "IMAGE_CHARS",
    "NOTHING_TO_COMPACT",
    "NO_PRIOR_HISTORY",
    "OVERFLOW_RECOVERY_FAILED",
    "TOOL_RESULT_MAX_CHARS",
    "TRUNCATION_RECOVERY_FAILED",
    "TURN_CONTEXT_SEPARATOR",
    "TURN_PREFIX_FAILURE",
    "UNKNOWN_ERROR",
    "CompactNow",
    "CompactionCheck",
    "CompactionDecision",
    "CompactionPreparation",
    "CompactionSettings",
    "ContextEstimate",
    "ContextUsage",
    "CutPoint",
    "NoCompaction",
    "OverflowRecoveryFailed",
    "SummaryKind",
    "SummaryPlan",
    "SummaryRequest",
    "auto_compaction_decision",
    "build_summary_request",
    "build_turn_prefix_request",
    "calculate_context_tokens",
    "combine_usage",
    "compaction_failure_message",
    "context_usage",
    "conversation_block",
    "entry_tokens",
    "estimate_context_tokens",
    "estimate_projected_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "find_turn_start_index",
    "finish_compaction",
    "is_same_model",
    "is_valid_cut_point",
    "last_assistant_usage",
    "latest_compaction_ms",
    "manual_compaction_refusal",
    "needs_branch_inputs",
    "plan_summary",
    "prepare_compaction",
    "response_text",
    "serialize_conversation",
    "serialize_messages",
    "should_compact",
    "threshold_between_turns",
    "without_branch_inputs",
]

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
    model_ref: str = ""
    """The current model's ``provider/id``: its ``compaction.modelOverrides`` entry applies."""
    context_messages: Sequence[AgentMessage] = ()
    """The projected context, for the estimate when ``message`` failed."""
    latest_compaction_ms: int | None = None
    """When the branch's latest compaction was appended, to ignore older measurements."""
    overflow_recovery_attempted: bool = False
    max_tokens: int = 0
    """The current model's own output limit; > 0 makes a ``length`` stop that gave fewer
    tokens recoverable (pi 1.6.0's ``isRecoverableLength``); 0 leaves it out."""
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
    return not isinstance(auto_compaction_decision(without_branch_inputs(check)), NoCompaction)


def without_branch_inputs(check: CompactionCheck) -> CompactionCheck:
    """``check`` without ``context_messages`` and ``latest_compaction_ms``: the check itself
    when it carries neither (the usual one, made without them: no copy, issue 38)."""
    if check.latest_compaction_ms is None and not check.context_messages:
        return check
    return attrs.evolve(check, context_messages=(), latest_compaction_ms=None)


def is_recoverable_length(message: AssistantMessage, check: CompactionCheck) -> bool:
    """Whether a ``length`` stop ended below the model's own output limit (pi 1.6.0: the cut
    may come from context pressure, so it gets one compact-and-retry like an overflow)."""
    return (
        message.stop_reason == "length"
        and check.max_tokens > 0
        and message.usage.output < check.max_tokens
    )


def auto_compaction_decision(check: CompactionCheck) -> CompactionDecision:
    """Decide whether and why to compact automatically (spec §3.8.9, seed classes).

    * overflow reported by the provider, or input truncated to fill the window (``length``
      with no output): compact and retry, once per run; the second time report
      :data:`OVERFLOW_RECOVERY_FAILED` instead;
    * a ``length`` stop below the model's output limit (:func:`is_recoverable_length`): the
      same, the second time :data:`TRUNCATION_RECOVERY_FAILED` (pi 1.6.0);
    * a successful response larger than the window (silent overflow): compact, no retry;
    * otherwise the threshold: the response's own usage, or for a failed response the
      estimate anchored on the last successful one - skipped when no usage exists or it
      predates the latest compaction.
    """
    message, settings = check.message, check.settings.for_model(check.model_ref)
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
    truncated = kind is None and check.same_model and is_recoverable_length(message, check)
    if kind is not None or truncated:
        if check.overflow_recovery_attempted:
            text = TRUNCATION_RECOVERY_FAILED if truncated else OVERFLOW_RECOVERY_FAILED
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
