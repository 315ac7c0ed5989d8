"""Retry policy: classification, settings, back-off, the retry sequence (spec §3.7, S37-S39)."""

from __future__ import annotations

import pytest

from pitrio.actors.supervisor.retry import (
    RETRY_CANCELLED,
    RetrySettings,
    RetryState,
    ScheduleRetry,
    StopRetrying,
    is_retryable_error,
    is_retryable_error_text,
    next_summarization_retry,
    parse_retry_after_ms,
    retry_delay_ms,
    will_retry,
)
from pitrio.messages.codec import to_json
from pitrio.messages.events import AutoRetryEnd, AutoRetryStart
from tests.actors.test_supervisor_support import assistant, failed

# --- classification (§3.7.1) ---


@pytest.mark.parametrize(
    "text",
    [
        "overloaded_error",
        "Provider returned error",
        "rate limit exceeded",
        "Rate_limit reached",
        "Too Many Requests",
        "HTTP 429",
        "500 Internal Server Error",
        "status 502",
        "503 Service Unavailable (scripted)",
        "Gateway 504",
        "service unavailable",
        "server_error",
        "internal error",
        "network error",
        "connection error",
        "ECONNREFUSED connection refused",
        "connection lost",
        "WebSocket closed",
        "websocket error",
        "other side closed",
        "fetch failed",
        "upstream connect error",
        "reset before headers",
        "socket hang up",
        "stream ended without a final message",
        "http2 request did not get a response",
        "request timed out",
        "request time out",
        "timeout",
        "terminated",
        "Server requested retry delay of 120s",
    ],
)
def test_transient_errors_are_retryable(text: str) -> None:
    assert is_retryable_error(failed(text))
    assert is_retryable_error_text(text)


@pytest.mark.parametrize(
    "text",
    ["Invalid API key", "400 Bad Request: invalid tool schema", "model not found", ""],
)
def test_other_errors_are_not_retryable(text: str) -> None:
    assert not is_retryable_error(failed(text))


def test_status_codes_match_only_as_whole_numbers() -> None:
    # pi 1.6.0 anchors the codes (0.73.1 matched "500" inside "15000").
    assert not is_retryable_error(failed("quota of 15000 tokens reached"))
    assert is_retryable_error(failed("HTTP 500"))
    assert is_retryable_error(failed('500: {"message":"boom"}'))
    assert is_retryable_error(failed("upstream said 520"))
    assert not is_retryable_error(failed("error code 5000"))


@pytest.mark.parametrize(
    "text",
    [
        "429 insufficient_quota: You exceeded your current quota",
        "429 Too Many Requests: Monthly usage limit reached",
        "503 billing hard limit",
        'rate limit {"code": 1308}',
    ],
)
def test_usage_and_billing_limits_are_never_retried(text: str) -> None:
    assert not is_retryable_error(failed(text))
    assert not is_retryable_error_text(text)


@pytest.mark.parametrize(
    "text",
    [
        "server_busy",
        "The model is at capacity",
        "read ECONNRESET",
        "getaddrinfo ENOTFOUND api.example.com",
        "stream disconnected before completion",
        "Please retry your request",
        "ResourceExhausted",
    ],
)
def test_pi_1_6_transient_texts(text: str) -> None:
    assert is_retryable_error(failed(text))


def test_context_overflow_is_not_retried() -> None:
    # Matches "too many tokens" (overflow) although it also says 500.
    message = failed("500: too many tokens in request")
    assert not is_retryable_error(message)
    assert not is_retryable_error(failed("prompt is too long: 250000 tokens > 128000 maximum"))


def test_only_error_responses_are_retryable() -> None:
    assert not is_retryable_error(assistant("overloaded", stop="stop"))
    assert not is_retryable_error(assistant(None, stop="aborted", error="overloaded"))
    assert not is_retryable_error(assistant(None, stop="error", error=None))


# --- settings and back-off (§3.7.2, DESIGN §5.4) ---


def test_settings_defaults_and_json() -> None:
    assert RetrySettings() == RetrySettings(
        enabled=True, max_retries=3, base_delay_ms=2000, max_delay_ms=60000
    )
    parsed = RetrySettings.from_json(
        {
            "enabled": False,
            "maxRetries": 2,
            "baseDelayMs": 50,
            "maxAgentDelayMs": 1000,
            "provider": {},
        }
    )
    assert parsed == RetrySettings(
        enabled=False, max_retries=2, base_delay_ms=50, max_delay_ms=1000
    )
    # The legacy maxDelayMs is the provider-level cap in pi 1.6.0, not the agent's.
    assert RetrySettings.from_json({"maxDelayMs": 1000}) == RetrySettings()
    assert RetrySettings.from_json(None) == RetrySettings()
    assert RetrySettings.from_json({"maxRetries": "7", "enabled": 1}) == RetrySettings()


def test_exponential_backoff() -> None:
    settings = RetrySettings()
    assert [retry_delay_ms(n, settings) for n in (1, 2, 3)] == [2000, 4000, 8000]


def test_backoff_is_capped() -> None:
    settings = RetrySettings(base_delay_ms=10_000, max_delay_ms=60_000)
    assert [retry_delay_ms(n, settings) for n in (1, 3, 4, 10)] == [10_000, 40_000, 60_000, 60_000]
    uncapped = RetrySettings(base_delay_ms=10_000, max_delay_ms=0)
    assert retry_delay_ms(10, uncapped) == 10_000 * 512


def test_retry_after_raises_the_delay() -> None:
    settings = RetrySettings(base_delay_ms=1000)
    assert retry_delay_ms(1, settings, retry_after_ms=5000) == 5000
    assert retry_delay_ms(3, settings, retry_after_ms=500) == 4000  # backoff already longer
    assert retry_delay_ms(1, settings, retry_after_ms=60_000) == 60_000


def test_retry_after_beyond_the_cap_gives_up() -> None:
    assert retry_delay_ms(1, RetrySettings(), retry_after_ms=60_001) is None
    assert retry_delay_ms(1, RetrySettings(max_delay_ms=0), retry_after_ms=10**7) == 10**7


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("429 Too Many Requests; retry-after: 12", 12_000),
        ("Rate limited. Retry after 1.5s", 1500),
        ("please retry in 250ms", 250),
        ("retry after 30 seconds", 30_000),
        ("503 Service Unavailable", None),
        (None, None),
    ],
)
def test_parse_retry_after(text: str | None, expected: int | None) -> None:
    assert parse_retry_after_ms(text) == expected


# --- the sequence (§3.7.3, seed _prepareRetry, DESIGN §5.8) ---

FLAKY = "503 Service Unavailable (scripted)"
SETTINGS = RetrySettings(max_retries=3, base_delay_ms=1)


def test_s37_one_transient_failure_then_success() -> None:
    state = RetryState()
    state, step = state.on_run_end(failed("overloaded_error"), SETTINGS)
    assert isinstance(step, ScheduleRetry)
    assert step.event == AutoRetryStart(
        attempt=1, max_attempts=3, delay_ms=1, error_message="overloaded_error"
    )
    assert state.retrying
    state, end = state.on_message_end(assistant("fine"))
    assert end == AutoRetryEnd(success=True, attempt=1)
    assert not state.retrying
    state, step = state.on_run_end(assistant("fine"), SETTINGS)
    assert step == StopRetrying()
    assert state == RetryState()


def test_s38_retries_exhausted_reports_the_last_attempt() -> None:
    settings = RetrySettings(max_retries=2, base_delay_ms=50)
    state = RetryState()
    starts: list[AutoRetryStart] = []
    ends: list[AutoRetryEnd] = []
    calls = 0
    while True:
        calls += 1
        message = failed(FLAKY)
        state, end = state.on_message_end(message)
        assert end is None
        state, step = state.on_run_end(message, settings)
        if isinstance(step, ScheduleRetry):
            starts.append(step.event)
            continue
        assert step.event is not None
        ends.append(step.event)
        break
    assert calls == 3
    assert [(s.attempt, s.delay_ms) for s in starts] == [(1, 50), (2, 100)]
    assert ends == [AutoRetryEnd(success=False, attempt=2, final_error=FLAKY)]
    assert not state.retrying


def test_counter_resets_between_failures_of_one_run() -> None:
    # A success in between: the next failure starts again at attempt 1.
    state, _ = RetryState().on_run_end(failed(FLAKY), SETTINGS)
    state, _ = state.on_message_end(assistant("tool call", stop="toolUse"))
    state, step = state.on_run_end(failed(FLAKY), SETTINGS)
    assert isinstance(step, ScheduleRetry)
    assert step.attempt == 1


def test_different_error_ends_a_started_sequence() -> None:
    state, _ = RetryState(1).on_message_end(failed("Invalid API key"))
    state, step = state.on_run_end(failed("Invalid API key"), SETTINGS)
    assert step == StopRetrying(
        AutoRetryEnd(success=False, attempt=1, final_error="Invalid API key")
    )
    assert state == RetryState()


def test_aborted_response_during_a_sequence_is_a_cancelled_retry() -> None:
    aborted = assistant(None, stop="aborted", error="Request was aborted")
    state, end = RetryState(2).on_message_end(aborted)
    assert end is None  # not a success
    state, step = state.on_run_end(aborted, SETTINGS)
    assert step == StopRetrying(AutoRetryEnd(success=False, attempt=2, final_error=RETRY_CANCELLED))


def test_run_without_a_response_ends_a_started_sequence() -> None:
    assert RetryState().on_run_end(None, SETTINGS) == (RetryState(), StopRetrying())
    _, step = RetryState(1).on_run_end(None, SETTINGS)
    assert step == StopRetrying(AutoRetryEnd(success=False, attempt=1, final_error="Unknown error"))


def test_cancel_during_sleep() -> None:
    assert RetryState().on_cancel() == (RetryState(), None)
    assert RetryState(1).on_cancel() == (
        RetryState(),
        AutoRetryEnd(success=False, attempt=1, final_error=RETRY_CANCELLED),
    )


def test_disabled_or_zero_retries_never_start() -> None:
    state, step = RetryState().on_run_end(failed(FLAKY), RetrySettings(enabled=False))
    assert step == StopRetrying() and state == RetryState()
    state, step = RetryState().on_run_end(failed(FLAKY), RetrySettings(max_retries=0))
    assert step == StopRetrying() and state == RetryState()  # no end without a start


def test_retry_after_beyond_cap_ends_the_sequence() -> None:
    settings = RetrySettings(max_delay_ms=1000)
    state, step = RetryState(1).on_run_end(failed(FLAKY), settings, retry_after_ms=5000)
    assert step == StopRetrying(AutoRetryEnd(success=False, attempt=1, final_error=FLAKY))
    assert state == RetryState()
    _, step = RetryState().on_run_end(failed("429 retry-after: 30"), settings)
    assert step == StopRetrying()


def test_retry_after_from_the_error_text() -> None:
    _, step = RetryState().on_run_end(failed("429 rate limit, retry after 7s"), RetrySettings())
    assert isinstance(step, ScheduleRetry)
    assert step.delay_ms == 7000


def test_will_retry_predicate() -> None:
    assert will_retry(failed(FLAKY), RetryState(), SETTINGS)
    assert not will_retry(failed(FLAKY), RetryState(3), SETTINGS)
    assert not will_retry(assistant("ok"), RetryState(), SETTINGS)
    assert not will_retry(None, RetryState(), SETTINGS)


def test_events_serialise_like_pi() -> None:
    _, step = RetryState().on_run_end(failed(FLAKY), RetrySettings(max_retries=2, base_delay_ms=50))
    assert isinstance(step, ScheduleRetry)
    assert to_json(step.event) == {
        "type": "auto_retry_start",
        "attempt": 1,
        "maxAttempts": 2,
        "delayMs": 50,
        "errorMessage": FLAKY,
    }


def test_summarization_retry_schedule() -> None:
    settings = RetrySettings(max_retries=2, base_delay_ms=100)
    event = next_summarization_retry(1, FLAKY, settings)
    assert event is not None
    assert (event.attempt, event.max_attempts, event.delay_ms) == (1, 2, 100)
    assert next_summarization_retry(3, FLAKY, settings) is None
    assert next_summarization_retry(1, "Invalid API key", settings) is None
    assert next_summarization_retry(1, FLAKY, RetrySettings(enabled=False)) is None
    assert next_summarization_retry(1, FLAKY, settings, retry_after_ms=10**6) is None


def test_an_abort_before_the_retry_was_announced_reports_no_end() -> None:
    """Found by ``pitrio explore`` (random-clients): an abort landing after the decision to
    retry but before its ``auto_retry_start`` went out emitted an ``auto_retry_end`` for an
    attempt no client had heard of. Now the end names the last announced attempt, if any."""
    state, step = RetryState().on_run_end(failed(FLAKY), SETTINGS)
    assert isinstance(step, ScheduleRetry) and state.pending
    assert state.on_cancel() == (RetryState(), None)
    state = state.announced()
    assert state.on_cancel() == (
        RetryState(),
        AutoRetryEnd(success=False, attempt=1, final_error=RETRY_CANCELLED),
    )
    second, step = state.on_run_end(failed(FLAKY), SETTINGS)
    assert isinstance(step, ScheduleRetry) and second == RetryState(2, pending=True)
    assert second.on_cancel()[1] == AutoRetryEnd(
        success=False, attempt=1, final_error=RETRY_CANCELLED
    )
