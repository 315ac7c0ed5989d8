"""Post-run decisions in pi's seed priority (spec §3.6.2, DESIGN §3; S37-S45 as policy).

The session-level halves of these scenarios (``prompt()`` returning at settle, S39; the
100 ms-free continuation, S40) belong to the session actor's tests; here the decisions that
drive them are checked, including two replays of pi's RPC transcripts.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.supervisor.compaction import (
    OVERFLOW_RECOVERY_FAILED,
    TRUNCATION_RECOVERY_FAILED,
    CompactionCheck,
    CompactionSettings,
    CompactNow,
    NoCompaction,
    auto_compaction_decision,
    needs_branch_inputs,
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
    prompt_may_compact,
    prompt_needs_branch_inputs,
    run_needs_branch_inputs,
)
from pitrio.actors.supervisor.retry import RETRY_CANCELLED, RetrySettings, RetryState
from pitrio.messages.agent import AssistantMessage, StopReason
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.events import AutoRetryEnd, CompactionEnd
from tests.actors.test_supervisor_support import (
    assistant,
    failed,
    transcript_events,
    usage,
    user,
)

FLAKY = "503 Service Unavailable (scripted)"
OVERFLOW = "prompt is too long: 250000 tokens > 128000 maximum"


def _run(message: AssistantMessage | None, **kwargs: Any) -> RunEnded:
    defaults: dict[str, Any] = {
        "abort_requested": False,
        "has_queued_messages": False,
        "context_window": 200_000,
        "same_model": True,
    }
    return RunEnded(last_assistant=message, **{**defaults, **kwargs})


def _decide(
    message: AssistantMessage | None, state: SupervisorState | None = None, **kwargs: Any
) -> PostRunDecision:
    return decide_after_run(state or SupervisorState(), _run(message, **kwargs))


# --- priority --------------------------------------------------------------------------------


def test_abort_beats_everything() -> None:
    state = SupervisorState(retry=RetryState(1))
    decision = _decide(failed(FLAKY), state, abort_requested=True, has_queued_messages=True)
    assert decision.action == End("aborted")
    assert decision.events == (AutoRetryEnd(success=False, attempt=1, final_error=RETRY_CANCELLED),)
    assert decision.state.retry == RetryState()
    assert not decision.will_retry
    assert _decide(assistant("ok"), abort_requested=True).events == ()


def test_retryable_error_retries_before_compaction() -> None:
    # Large enough to cross the threshold, yet the retry comes first.
    error = failed(FLAKY, ts=5)
    big = assistant("x", ts=1, use=usage(total=199_000))
    decision = _decide(error, context_messages=[big, error], has_queued_messages=True)
    assert isinstance(decision.action, Retry)
    assert (decision.action.attempt, decision.action.delay_ms) == (1, 2000)
    assert decision.action.failed is error
    assert decision.action.event.error_message == FLAKY
    assert decision.events == ()
    assert decision.will_retry
    # Decided, not yet announced: its auto_retry_start goes out when the back-off starts.
    assert decision.state.retry == RetryState(1, pending=True)
    assert decision.state.retry.announced() == RetryState(1)


def test_exhausted_retries_fall_through_to_compaction() -> None:
    error = failed(FLAKY, ts=5)
    big = assistant("x", ts=1, use=usage(total=199_000))
    state = SupervisorState(retry=RetryState(3))
    decision = _decide(error, state, context_messages=[big, error])
    assert decision.events == (AutoRetryEnd(success=False, attempt=3, final_error=FLAKY),)
    assert decision.action == Compact(reason="threshold", will_retry=False)
    assert not decision.will_retry
    assert decision.state.retry == RetryState()


def test_exhausted_retries_then_queued_then_boundary() -> None:
    state = SupervisorState(retry=RetryState(3))
    queued = _decide(failed(FLAKY), state, has_queued_messages=True)
    assert queued.action == Continue("queued")
    assert len(queued.events) == 1
    assert _decide(failed(FLAKY), state).action == BeforeSettle()


def test_success_without_anything_pending_goes_to_the_boundary() -> None:
    decision = _decide(assistant("ok", use=usage(total=100)))
    assert decision == PostRunDecision(action=BeforeSettle(), state=SupervisorState())
    assert _decide(None).action == BeforeSettle()
    assert _decide(None, has_queued_messages=True).action == Continue("queued")


def test_retry_disabled_leaves_the_error_to_compaction_and_boundary() -> None:
    decision = _decide(failed(FLAKY), retry_settings=RetrySettings(enabled=False))
    assert decision.action == BeforeSettle()
    assert decision.events == ()


# --- overflow recovery once per run (S41) ----------------------------------------------------


def test_s41_overflow_recovered_once_then_reported() -> None:
    error = failed(OVERFLOW)
    first = _decide(error)
    assert first.action == Compact(reason="overflow", will_retry=True, failed=error)
    # pi 1.6.0: agent_end.willRetry is for a transient failure's retry only; the recovery
    # says so on compaction_end (pitrio said true here before).
    assert not first.will_retry
    assert first.state.overflow_recovery_attempted
    # The continuation overflows again: no second compaction.
    second = decide_after_run(first.state, _run(failed(OVERFLOW, ts=9000)))
    assert second.action == BeforeSettle()
    assert second.events == (
        CompactionEnd(
            reason="overflow",
            result=None,
            aborted=False,
            will_retry=False,
            error_message=OVERFLOW_RECOVERY_FAILED,
        ),
    )


def test_length_stop_below_the_output_limit_is_recovered_once() -> None:
    # pi 1.6.0 (isRecoverableLength): a length stop with fewer output tokens than the model's
    # own limit gets one omit-compact-retry, then the truncation text.
    cut = assistant("cut", stop="length", use=usage(input=5, output=5, total=10))
    first = _decide(cut, max_tokens=4096)
    assert first.action == Compact(reason="overflow", will_retry=True, failed=cut)
    assert not first.will_retry  # pi 1.6.0's agent_end.willRetry (the finish_length case)
    second = decide_after_run(first.state, _run(cut, max_tokens=4096))
    assert second.events == (
        CompactionEnd(
            reason="overflow",
            result=None,
            aborted=False,
            will_retry=False,
            error_message=TRUNCATION_RECOVERY_FAILED,
        ),
    )
    # at the limit, with no known limit, or from another model: a plain stop
    assert _decide(cut, max_tokens=cut.usage.output).action == BeforeSettle()
    assert _decide(cut).action == BeforeSettle()
    assert _decide(cut, max_tokens=4096, same_model=False).action == BeforeSettle()


def test_overflow_latch_resets() -> None:
    latched = SupervisorState(overflow_recovery_attempted=True)
    assert not latched.on_user_message_start().overflow_recovery_attempted
    stops: tuple[StopReason, ...] = ("stop", "toolUse", "aborted")
    for stop in stops:
        state, _ = latched.on_assistant_message_end(assistant("x", stop=stop))
        assert not state.overflow_recovery_attempted, stop
    for message in (failed(OVERFLOW), assistant(None, stop="length")):
        state, _ = latched.on_assistant_message_end(message)
        assert state.overflow_recovery_attempted


def test_retry_success_is_reported_at_message_end() -> None:
    state, event = SupervisorState(retry=RetryState(2)).on_assistant_message_end(assistant("ok"))
    assert event == AutoRetryEnd(success=True, attempt=2)
    assert state == SupervisorState()
    state, event = SupervisorState().on_abort()
    assert (state, event) == (SupervisorState(), None)


# --- after compaction and after the boundary (S40) -------------------------------------------


def test_s40_threshold_compaction_delivers_queued_messages_once() -> None:
    compact = Compact(reason="threshold", will_retry=False)
    after = decide_after_compaction(
        compact, succeeded=True, abort_requested=False, has_queued_messages=True
    )
    assert after == Continue("queued")
    # The continuation delivered them; the next post-run decision has nothing queued.
    assert _decide(assistant("ok")).action == BeforeSettle()
    assert (
        decide_after_compaction(
            compact, succeeded=True, abort_requested=False, has_queued_messages=False
        )
        == BeforeSettle()
    )


def test_after_overflow_compaction() -> None:
    compact = Compact(reason="overflow", will_retry=True)
    ok = decide_after_compaction(
        compact, succeeded=True, abort_requested=False, has_queued_messages=False
    )
    assert ok == Continue("recovery")
    failed_compaction = decide_after_compaction(
        compact, succeeded=False, abort_requested=False, has_queued_messages=False
    )
    assert failed_compaction == BeforeSettle()
    aborted = decide_after_compaction(
        compact, succeeded=True, abort_requested=True, has_queued_messages=True
    )
    assert aborted == End("aborted")


def test_after_boundary() -> None:
    def decide(**kwargs: bool) -> End | Continue:
        args = {
            "abort_requested": False,
            "continue_requested": False,
            "has_queued_messages": False,
            **kwargs,
        }
        return decide_after_boundary(**args)

    assert decide() == End("settled")
    assert decide(continue_requested=True) == Continue("boundary")
    assert decide(continue_requested=True, can_continue=False) == End("settled")
    assert decide(has_queued_messages=True) == Continue("queued")
    assert decide(abort_requested=True, continue_requested=True) == End("aborted")


# --- before a prompt (S42) -------------------------------------------------------------------


def _check(message: AssistantMessage, **kwargs: Any) -> CompactionCheck:
    defaults: dict[str, Any] = {
        "context_window": 200_000,
        "same_model": True,
        "settings": CompactionSettings(),
    }
    return CompactionCheck(message=message, **{**defaults, **kwargs})


def test_before_prompt() -> None:
    aborted = assistant(None, stop="aborted", use=usage(total=190_000))
    assert decide_before_prompt(_check(aborted)) == CompactNow(
        reason="threshold", will_retry=False, tokens=190_000
    )
    stale = assistant("x", ts=10, use=usage(total=10**6))
    assert decide_before_prompt(_check(stale, latest_compaction_ms=10)) == NoCompaction()
    error = failed(OVERFLOW)
    # The new prompt is the retry; a failed recovery is not reported twice.
    assert decide_before_prompt(_check(error, overflow_recovery_attempted=True)) == CompactNow(
        reason="overflow", will_retry=False, failed=error
    )


# --- replays of pi's transcripts -------------------------------------------------------------


def _replay(name: str, retry: RetrySettings, window: int) -> tuple[list[Any], list[Any]]:
    """Feed a transcript's agent events through the supervisor; return the retry/compaction
    events it would emit and the actions it took, in order."""
    state = SupervisorState()
    emitted: list[Any] = []
    actions: list[Any] = []
    last: AssistantMessage | None = None
    context: list[Any] = []
    for event in transcript_events(name):
        kind = event.get("type")
        if kind == "message_start" and event["message"]["role"] == "user":
            state = state.on_user_message_start()
        elif kind == "message_end":
            message = from_json(event["message"], AssistantMessage | type(user("")))
            context.append(message)
            if isinstance(message, AssistantMessage):
                last = message
                state, end = state.on_assistant_message_end(message)
                if end is not None:
                    emitted.append(end)
        elif kind == "agent_end":
            decision = decide_after_run(
                state,
                _run(
                    last,
                    context_window=window,
                    retry_settings=retry,
                    compaction_settings=CompactionSettings(keep_recent_tokens=60),
                    context_messages=list(context),
                ),
            )
            state = decision.state
            emitted.extend(decision.events)
            actions.append(decision.action)
            if isinstance(decision.action, Retry):
                emitted.append(decision.action.event)
                context.remove(decision.action.failed)  # omitted from the projection
            elif isinstance(decision.action, Compact):
                emitted.append(decision.action)
                actions.append(
                    decide_after_compaction(
                        decision.action,
                        succeeded=True,
                        abort_requested=False,
                        has_queued_messages=False,
                    )
                )
    return emitted, actions


def test_retry_transcript_replay() -> None:
    emitted, actions = _replay(
        "retry_transient_error", RetrySettings(max_retries=2, base_delay_ms=50), 128_000
    )
    recorded = [
        e for e in transcript_events("retry_transient_error") if e["type"].startswith("auto_retry")
    ]
    assert [to_json(e) for e in emitted] == recorded
    assert [type(a).__name__ for a in actions] == [
        "Retry",
        "BeforeSettle",
        "Retry",
        "Retry",
        "BeforeSettle",
    ]


def test_overflow_transcript_replay() -> None:
    emitted, actions = _replay("overflow_compaction", RetrySettings(max_retries=2), 128_000)
    recorded = [
        e
        for e in transcript_events("overflow_compaction")
        if e["type"] in ("compaction_start", "auto_retry_start", "auto_retry_end")
    ]
    assert recorded == [{"type": "compaction_start", "reason": "overflow"}]
    (compact,) = emitted
    assert attrs.evolve(compact, failed=None) == Compact(reason="overflow", will_retry=True)
    assert actions == [
        BeforeSettle(),
        BeforeSettle(),
        compact,
        Continue("recovery"),
        BeforeSettle(),
    ]


def test_policies_are_pure() -> None:
    """No supervisor policy module imports trio (or does I/O through it)."""
    import ast
    from pathlib import Path

    import pitrio.actors.supervisor as package

    for path in Path(package.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            assert not any(n == "trio" or n.startswith("trio.") for n in names), path.name


# -- which checks need the store's branch inputs (issue 7: one store query less per check) --

_STOPS: tuple[StopReason, ...] = ("stop", "length", "toolUse", "error", "aborted")
_TIMES = st.sampled_from([0, 100, 2_000, 5_000])


@st.composite
def _responses(draw: st.DrawFn) -> AssistantMessage:
    stop = draw(st.sampled_from(_STOPS))
    # Sizes around the thresholds and times that often tie: the cases that decide.
    tokens = draw(st.sampled_from([0, 1_000, 90_000, 150_000, 190_000, 199_000, 250_000]))
    use = usage(input=tokens, output=draw(st.sampled_from([0, 10, 5_000])))
    error = draw(st.sampled_from([None, OVERFLOW, FLAKY])) if stop == "error" else None
    text = None if stop == "error" else "ok"
    return assistant(text, stop=stop, error=error, use=use, ts=draw(_TIMES))


@st.composite
def _branches(draw: st.DrawFn) -> tuple[tuple[AssistantMessage, ...], int | None]:
    context = tuple(draw(st.lists(_responses(), max_size=4)))
    return context, draw(st.one_of(st.none(), _TIMES))


@st.composite
def _checks(draw: st.DrawFn) -> CompactionCheck:
    return CompactionCheck(
        message=draw(_responses()),
        context_window=draw(st.sampled_from([0, 100_000, 200_000])),
        same_model=draw(st.booleans()),
        settings=CompactionSettings(
            enabled=draw(st.booleans()), reserve_tokens=draw(st.sampled_from([0, 16_384]))
        ),
        overflow_recovery_attempted=draw(st.booleans()),
    )


@settings(max_examples=400, deadline=None)
@given(check=_checks(), branch=_branches())
def test_a_check_that_needs_no_branch_inputs_decides_the_same_with_them(
    check: CompactionCheck, branch: tuple[tuple[AssistantMessage, ...], int | None]
) -> None:
    context, latest = branch
    full = attrs.evolve(check, context_messages=context, latest_compaction_ms=latest)
    if not needs_branch_inputs(check):
        assert auto_compaction_decision(full) == auto_compaction_decision(check)
    if not prompt_needs_branch_inputs(check):
        assert decide_before_prompt(full) == decide_before_prompt(check)
    for either in (check, full):  # the one-pass check before a prompt says the same
        assert prompt_may_compact(either) == (
            prompt_needs_branch_inputs(either)
            or isinstance(decide_before_prompt(either), CompactNow)
        )
    run = _run(
        check.message,
        context_window=check.context_window,
        same_model=check.same_model,
        compaction_settings=check.settings,
    )
    state = SupervisorState(overflow_recovery_attempted=check.overflow_recovery_attempted)
    if not run_needs_branch_inputs(state, run):
        with_branch = attrs.evolve(run, context_messages=context, latest_compaction_ms=latest)
        assert decide_after_run(state, with_branch) == decide_after_run(state, run)


def test_the_common_turn_needs_no_branch_inputs() -> None:
    # A successful response below the threshold: no store query before the next prompt or
    # after the run; a failed one, or one over the threshold, still gets them.
    small = assistant(use=usage(input=1_000, output=10))
    check = CompactionCheck(
        message=small, context_window=200_000, same_model=True, settings=CompactionSettings()
    )
    assert not needs_branch_inputs(check) and not prompt_needs_branch_inputs(check)
    assert not run_needs_branch_inputs(SupervisorState(), _run(small))
    assert needs_branch_inputs(attrs.evolve(check, message=failed(FLAKY)))
    large = attrs.evolve(check, message=assistant(use=usage(input=199_000, output=10)))
    assert needs_branch_inputs(large)  # compacts unless a newer compaction says otherwise
    assert not run_needs_branch_inputs(SupervisorState(), _run(None))
    assert not run_needs_branch_inputs(SupervisorState(), _run(small, abort_requested=True))
