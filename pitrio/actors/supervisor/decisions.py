"""What happens after each low-level run of an accepted prompt (spec §3.6.2, DESIGN §3). Pure.

The session actor runs the agent loop, then asks :func:`decide_after_run` what comes next, in
pi's seed priority - first match wins:

1. abort requested: end (a started retry sequence ends as cancelled);
2. retryable error with attempts left: retry after a back-off;
3. retries exhausted (or the sequence ended on another failure): report it, go on;
4. compaction needed: compact (overflow: then retry once; threshold: no retry), or report a
   failed overflow recovery and go on;
5. queued messages: continue to deliver them;
6. otherwise: run the before-settle boundary, which may still ask to continue.

After a compaction :func:`decide_after_compaction` says whether the run continues, and after
the boundary :func:`decide_after_boundary` does. Retry and compaction are never driven by
timers: each decision is taken when the previous step has finished.

:class:`SupervisorState` is the per-session memory these decisions need (the retry attempt and
the overflow-recovery latch) with the transitions the session's event stream drives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from pitrio.actors.supervisor.compaction import (
    CompactionCheck,
    CompactionSettings,
    CompactNow,
    NoCompaction,
    OverflowRecoveryFailed,
    auto_compaction_decision,
    needs_branch_inputs,
    without_branch_inputs,
)
from pitrio.actors.supervisor.retry import (
    RetrySettings,
    RetryState,
    ScheduleRetry,
)
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.events import AutoRetryEnd, AutoRetryStart, CompactionEnd

# Stop reasons after which an overflow recovery may be attempted again: a response that
# neither failed nor was cut short shows the context fits again.
_LATCH_KEEPING_STOPS = frozenset({"error", "length"})


@attrs.frozen(kw_only=True)
class SupervisorState:
    """One session's retry counter and overflow-recovery latch."""

    retry: RetryState = attrs.field(factory=RetryState)
    overflow_recovery_attempted: bool = False

    def on_user_message_start(self) -> SupervisorState:
        """A user message entered the context: a new request may try overflow recovery again."""
        if not self.overflow_recovery_attempted:
            return self  # unchanged: the same object (the handle compares by identity first)
        return attrs.evolve(self, overflow_recovery_attempted=False)

    def on_assistant_message_end(
        self, message: AssistantMessage
    ) -> tuple[SupervisorState, AutoRetryEnd | None]:
        """An assistant response ended: a success closes a retry sequence and the latch."""
        retry, event = self.retry.on_message_end(message)
        attempted = self.overflow_recovery_attempted
        if message.stop_reason not in _LATCH_KEEPING_STOPS:
            attempted = False
        if retry is self.retry and attempted == self.overflow_recovery_attempted:
            return self, event
        return SupervisorState(retry=retry, overflow_recovery_attempted=attempted), event

    def on_abort(self) -> tuple[SupervisorState, AutoRetryEnd | None]:
        """The run was aborted: a started retry sequence ends as cancelled."""
        retry, event = self.retry.on_cancel()
        return attrs.evolve(self, retry=retry), event


@attrs.frozen(kw_only=True)
class RunEnded:
    """What the post-run decision looks at once a low-level run has ended."""

    last_assistant: AssistantMessage | None
    """The run's last assistant response (``None`` if it produced none)."""
    abort_requested: bool
    has_queued_messages: bool
    """Steering or follow-up messages waiting in the agent's queues."""
    context_window: int
    """The current model's context window; 0 when unknown."""
    max_tokens: int = 0
    """The current model's output limit (a shorter ``length`` stop is recoverable); 0: none."""
    same_model: bool
    """Whether ``last_assistant`` came from the current model."""
    retry_settings: RetrySettings = attrs.field(factory=RetrySettings)
    compaction_settings: CompactionSettings = attrs.field(factory=CompactionSettings)
    model_ref: str = ""
    """The current model's ``provider/id`` (its ``compaction.modelOverrides`` entry)."""
    context_messages: Sequence[AgentMessage] = ()
    """The projected context (for the threshold estimate after a failed response)."""
    latest_compaction_ms: int | None = None
    """When the branch's latest compaction entry was appended, if any."""
    retry_after_ms: int | None = None
    """A retry-after the provider gave for the failure, if the session knows one."""


@attrs.frozen
class End:
    """No continuation: settle the run. ``aborted`` skips the before-settle boundary."""

    reason: Literal["aborted", "settled"]


@attrs.frozen(kw_only=True)
class Retry:
    """Emit ``event``, omit ``failed`` from the context, sleep ``delay_ms``, then continue."""

    attempt: int
    delay_ms: int
    failed: AssistantMessage
    event: AutoRetryStart


@attrs.frozen(kw_only=True)
class Compact:
    """Compact for ``reason``; with ``will_retry`` the run continues after it (omit ``failed``
    from the context first)."""

    reason: Literal["threshold", "overflow"]
    will_retry: bool
    failed: AssistantMessage | None = None


@attrs.frozen
class Continue:
    """Run the agent loop once more (``agent.continue()``) and decide again afterwards."""

    reason: Literal["queued", "recovery", "boundary"]


@attrs.frozen
class BeforeSettle:
    """Run the before-settle boundary, then ask :func:`decide_after_boundary`."""


PostRunAction = End | Retry | Compact | Continue | BeforeSettle
"""The step the session takes next."""


@attrs.frozen(kw_only=True)
class PostRunDecision:
    """The next step, the events to emit before taking it, and the updated state."""

    action: PostRunAction
    events: tuple[AutoRetryEnd | CompactionEnd, ...] = ()
    state: SupervisorState

    @property
    def will_retry(self) -> bool:
        """Whether an automatic retry follows this run (``agent_end.willRetry``).

        Only a transient failure's retry counts, as pi 1.6.0's rule: an overflow or a cut
        reply recovered by compacting and continuing says false here and announces the
        continuation on ``compaction_end.willRetry``.
        """
        return isinstance(self.action, Retry)


def decide_after_run(state: SupervisorState, run: RunEnded) -> PostRunDecision:
    """The post-run decision in pi's seed priority (see the module docstring)."""
    if run.abort_requested:
        state, cancelled = state.on_abort()
        return PostRunDecision(
            action=End("aborted"), events=(cancelled,) if cancelled else (), state=state
        )

    events: list[AutoRetryEnd | CompactionEnd] = []
    message = run.last_assistant
    retry, step = state.retry.on_run_end(
        message, run.retry_settings, retry_after_ms=run.retry_after_ms
    )
    if retry is not state.retry:
        state = attrs.evolve(state, retry=retry)
    if isinstance(step, ScheduleRetry):
        retry_action = Retry(
            attempt=step.attempt, delay_ms=step.delay_ms, failed=step.failed, event=step.event
        )
        return PostRunDecision(action=retry_action, state=state)
    if step.event is not None:
        events.append(step.event)

    if message is not None:
        compaction = auto_compaction_decision(_compaction_check(state, run, message))
        if isinstance(compaction, CompactNow):
            if compaction.reason == "overflow" and compaction.will_retry:
                state = attrs.evolve(state, overflow_recovery_attempted=True)
            action = Compact(
                reason=compaction.reason,
                will_retry=compaction.will_retry,
                failed=compaction.failed,
            )
            return PostRunDecision(action=action, events=tuple(events), state=state)
        if isinstance(compaction, OverflowRecoveryFailed):
            events.append(compaction.event)

    next_action: PostRunAction = Continue("queued") if run.has_queued_messages else BeforeSettle()
    return PostRunDecision(action=next_action, events=tuple(events), state=state)


def _compaction_check(
    state: SupervisorState, run: RunEnded, message: AssistantMessage
) -> CompactionCheck:
    return CompactionCheck(
        message=message,
        context_window=run.context_window,
        max_tokens=run.max_tokens,
        same_model=run.same_model,
        settings=run.compaction_settings,
        model_ref=run.model_ref,
        context_messages=run.context_messages,
        latest_compaction_ms=run.latest_compaction_ms,
        overflow_recovery_attempted=state.overflow_recovery_attempted,
    )


def run_needs_branch_inputs(state: SupervisorState, run: RunEnded) -> bool:
    """Whether :func:`decide_after_run` may depend on the run's ``context_messages`` and
    ``latest_compaction_ms``; when not, it decides the same without them (see
    :func:`~pitrio.actors.supervisor.compaction.needs_branch_inputs`)."""
    message = run.last_assistant
    if run.abort_requested or message is None:
        return False
    return needs_branch_inputs(_compaction_check(state, run, message))


def decide_after_compaction(
    compact: Compact,
    *,
    succeeded: bool,
    abort_requested: bool,
    has_queued_messages: bool,
) -> End | Continue | BeforeSettle:
    """After an automatic compaction: retry the failed request, deliver queued messages, or
    go to the before-settle boundary. A failed overflow compaction does not retry."""
    if abort_requested:
        return End("aborted")
    if succeeded and compact.will_retry:
        return Continue("recovery")
    if has_queued_messages:
        return Continue("queued")
    return BeforeSettle()


def decide_after_boundary(
    *,
    abort_requested: bool,
    continue_requested: bool,
    has_queued_messages: bool,
    can_continue: bool = True,
) -> End | Continue:
    """After the before-settle boundary: continue if a handler asked (and the context can be
    continued) or messages are queued; otherwise settle."""
    if abort_requested:
        return End("aborted")
    if has_queued_messages:
        return Continue("queued")
    if continue_requested and can_continue:
        return Continue("boundary")
    return End("settled")


def decide_before_prompt(check: CompactionCheck) -> NoCompaction | CompactNow:
    """The compaction check before a new prompt runs (aborted responses included).

    The new prompt is itself the continuation, so nothing is retried: an overflowed last
    response is compacted away (and omitted) without a retry, and a failed recovery from
    the previous run is not reported a second time.
    """
    decision = auto_compaction_decision(_before_prompt(check))
    if isinstance(decision, CompactNow):
        return attrs.evolve(decision, will_retry=False)
    return NoCompaction()


def prompt_needs_branch_inputs(check: CompactionCheck) -> bool:
    """Whether :func:`decide_before_prompt` may depend on the check's ``context_messages``
    and ``latest_compaction_ms`` (see
    :func:`~pitrio.actors.supervisor.compaction.needs_branch_inputs`)."""
    return needs_branch_inputs(_before_prompt(check))


def prompt_may_compact(check: CompactionCheck) -> bool:
    """``prompt_needs_branch_inputs(check) or decide_before_prompt(check)`` compacts: whether
    the check before a prompt may compact, with the prompt's check made once (issue 38: it
    runs before every prompt)."""
    before = _before_prompt(check)
    if needs_branch_inputs(before):
        return True
    if without_branch_inputs(before) is before:
        # needs_branch_inputs decided on this very check: not a compaction.
        return False
    return isinstance(auto_compaction_decision(before), CompactNow)


def _before_prompt(check: CompactionCheck) -> CompactionCheck:
    return attrs.evolve(check, skip_aborted=False, overflow_recovery_attempted=False)
