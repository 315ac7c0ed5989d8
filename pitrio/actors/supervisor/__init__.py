"""The Supervisor's policies: retry, compaction, branch summaries, post-run decisions.

Everything here is pure (no trio, no I/O): the session actor feeds in what happened and gets
back what to do and which events to emit. ``retry`` classifies failures and paces retries,
``overflow`` recognises context overflows, ``compaction`` measures the context, picks the cut
point and builds the summary requests, ``branch_summary`` does the same for tree navigation,
and ``decisions`` orders them after each low-level run in pi's seed priority.
"""

from pitrio.actors.supervisor.branch_summary import (
    BranchSummarySettings,
    build_branch_summary_request,
    collect_entries_for_branch_summary,
    finish_branch_summary,
    navigation_target,
    prepare_branch_entries,
)
from pitrio.actors.supervisor.compaction import (
    CompactionPreparation,
    CompactionSettings,
    CutPoint,
    SummaryPlan,
    SummaryRequest,
    auto_compaction_decision,
    estimate_context_tokens,
    estimate_tokens,
    find_cut_point,
    finish_compaction,
    plan_summary,
    prepare_compaction,
    serialize_conversation,
    should_compact,
)
from pitrio.actors.supervisor.decisions import (
    BeforeSettle,
    Compact,
    Continue,
    End,
    PostRunDecision,
    Retry,
    RunEnded,
    SupervisorState,
    decide_after_boundary,
    decide_after_compaction,
    decide_after_run,
    decide_before_prompt,
)
from pitrio.actors.supervisor.overflow import is_context_overflow
from pitrio.actors.supervisor.retry import (
    RetrySettings,
    RetryState,
    is_retryable_error,
    retry_delay_ms,
)

__all__ = [
    "BeforeSettle",
    "BranchSummarySettings",
    "Compact",
    "CompactionPreparation",
    "CompactionSettings",
    "Continue",
    "CutPoint",
    "End",
    "PostRunDecision",
    "Retry",
    "RetrySettings",
    "RetryState",
    "RunEnded",
    "SummaryPlan",
    "SummaryRequest",
    "SupervisorState",
    "auto_compaction_decision",
    "build_branch_summary_request",
    "collect_entries_for_branch_summary",
    "decide_after_boundary",
    "decide_after_compaction",
    "decide_after_run",
    "decide_before_prompt",
    "estimate_context_tokens",
    "estimate_tokens",
    "find_cut_point",
    "finish_branch_summary",
    "finish_compaction",
    "is_context_overflow",
    "is_retryable_error",
    "navigation_target",
    "plan_summary",
    "prepare_branch_entries",
    "prepare_compaction",
    "retry_delay_ms",
    "serialize_conversation",
    "should_compact",
]
