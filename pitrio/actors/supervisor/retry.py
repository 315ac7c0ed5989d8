"""Automatic retry of failed responses (spec §3.7, DESIGN §5.4 and §5.8). Pure: no trio.

A response is retried when it failed with a transient error (overload, rate limit, 5xx, network
trouble, ...) that is not a context overflow nor a usage or billing limit (pi 1.6.0's
classification). Attempt *n* waits ``base * 2**(n-1)`` milliseconds, capped by
``retry.maxAgentDelayMs``, and raised to a retry-after the provider wrote in its error (DESIGN
§5.4; pi 1.6.0 itself ignores it at this level); a provider asking for more than the cap ends
the sequence, as pi's provider layer does.

:class:`RetryState` is one session's retry sequence; its transitions return the events to emit
(``auto_retry_start`` / ``auto_retry_end``). The session actor feeds it every assistant
``message_end`` and every end of a low-level run, and sleeps where it says.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

import attrs

from pitrio.actors.supervisor._settings import int_setting
from pitrio.actors.supervisor.overflow import is_context_overflow, is_overflow_error_text
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.events import AutoRetryEnd, AutoRetryStart, SummarizationRetryScheduled

# pi 1.6.0's classification: two case-insensitive regexes of alternatives. A usage or billing
# limit is never transient, whatever else the text says; status codes count only as whole
# numbers ("HTTP 500", not "15000 tokens").
NON_RETRYABLE = (
    r"GoUsageLimitError|FreeUsageLimitError|Monthly usage limit reached|available balance"
    r"|insufficient_quota|out of budget|quota exceeded|billing"
    r"|subscription_sharing_usage_limit_exceeded"
    r"|subscription_sharing_workplace_individual_usage_limit_exceeded"
    r'|"code"\s*:\s*"?1308(?![0-9])'
)
RETRYABLE = (
    r"overloaded|server_busy|servers are currently busy|currently experiencing high demand"
    r"|model is at capacity|rate.?limit|too many requests"
    r"|(?<![a-z0-9])(?:429|500|502|503|504|520|524)(?![a-z0-9])"
    r"|service.?(?:is.?)?(?:temporarily.?)?unavailable|server.?error|internal.?error"
    r"|provider.?returned.?(?:an.?)?error|exceeded request buffer limit while retrying upstream"
    r"|unable to forward upstream|upstream.?request.?failed|upstream_stream_read_error"
    r"|stream was interrupted|http/?2 stream failed|network.?error|connection.?error"
    r"|connection.?refused|connection.?lost|connection.?closed|other side closed|fetch failed"
    r"|request to \S+ failed, reason:|getaddrinfo"
    r"|(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])"
    r"|connection reset by peer|ENOTFOUND|EAI_AGAIN|upstream.?connect|reset before headers"
    r"|socket hang up|socket connection was closed|timed? out|timeout|terminated"
    r"|websocket.?closed|websocket.?error|websocket.?connection.?limit.?reached|ended without"
    r"|stream ended before message_stop|stream ended before a terminal response event"
    r"|http2 request did not get a response|stream disconnected before completion"
    r"|cut short after the reply had begun|pending stream has been canceled|retry delay"
    r"|you can retry your request|try your request again|please retry your request"
    r"|ResourceExhausted|subscription_sharing_usage_unavailable"
    r"|subscription_sharing_user_unavailable"
)


def _transient(text: str) -> bool:
    non_retryable, retryable, _ = patterns()
    return non_retryable.search(text) is None and retryable.search(text) is not None


UNKNOWN_ERROR = "Unknown error"
RETRY_CANCELLED = "Retry cancelled"

_SUCCESS_STOPS = frozenset({"stop", "length", "toolUse"})

# "retry-after: 12", "Retry after 1.5s", "retry in 30 seconds", "retry after 500ms": the forms
# providers and their SDKs put in error texts. Bare numbers are seconds (the HTTP header's unit).
RETRY_AFTER = (
    r"retry[- ]?(?:after|in)\s*:?\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|sec(?:ond)?s?)?\b"
)


@functools.cache
def patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """``NON_RETRYABLE``, ``RETRYABLE`` and ``RETRY_AFTER`` compiled (case-insensitive) on the
    first failure: a start that never fails does not pay for them (~2.5 ms, issue 38)."""
    return (
        re.compile(NON_RETRYABLE, re.IGNORECASE),
        re.compile(RETRYABLE, re.IGNORECASE),
        re.compile(RETRY_AFTER, re.IGNORECASE),
    )


@attrs.frozen(kw_only=True)
class RetrySettings:
    """The agent-level ``retry.*`` settings (spec §8.2, DESIGN §5.4; pi 1.6.0's keys)."""

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int = 60000
    """``retry.maxAgentDelayMs``: cap on one back-off sleep and on a provider's retry-after;
    ``0`` disables the cap. (The legacy ``retry.maxDelayMs`` is the provider-level cap since
    pi 1.6.0, which migrates it to ``retry.provider.maxRetryDelayMs``.)"""

    @classmethod
    def from_json(cls, value: Mapping[str, Any] | None) -> RetrySettings:
        """Read the ``retry`` object of settings.json; missing or mistyped keys keep defaults."""
        if not value:
            return cls()
        defaults = cls()
        enabled = value.get("enabled", defaults.enabled)
        return cls(
            enabled=enabled if isinstance(enabled, bool) else defaults.enabled,
            max_retries=int_setting(value.get("maxRetries"), defaults.max_retries),
            base_delay_ms=int_setting(value.get("baseDelayMs"), defaults.base_delay_ms),
            max_delay_ms=int_setting(value.get("maxAgentDelayMs"), defaults.max_delay_ms),
        )


def is_retryable_error_text(text: str) -> bool:
    """Whether an error text names a transient failure (and not a context overflow)."""
    if is_overflow_error_text(text):
        return False
    return _transient(text)


def is_retryable_error(message: AssistantMessage) -> bool:
    """Whether ``message`` failed in a way worth retrying (pi's ``_isRetryableError``).

    It must have ``stop_reason`` ``error``, a non-empty error text matching the transient
    classification, and not be a context overflow.
    """
    if message.stop_reason != "error" or not message.error_message:
        return False
    if is_context_overflow(message):
        return False
    return _transient(message.error_message)


def parse_retry_after_ms(text: str | None) -> int | None:
    """A retry-after a provider wrote into an error text, in milliseconds (best effort)."""
    if not text:
        return None
    match = patterns()[2].search(text)
    if match is None:
        return None
    amount = float(match.group(1))
    unit: str = (match.group(2) or "s").lower()
    millis = amount if unit.startswith("m") else amount * 1000
    return round(millis)


def retry_delay_ms(
    attempt: int, settings: RetrySettings, retry_after_ms: int | None = None
) -> int | None:
    """How long to wait before retry ``attempt`` (1-based), or ``None`` to not retry at all.

    Exponential back-off ``base * 2**(attempt-1)``, capped by ``max_delay_ms``, then raised
    to the provider's retry-after. A retry-after beyond the cap gives ``None``: waiting that
    long inside a run is worse than reporting the error (pi's provider layer fails the same way).
    """
    delay = settings.base_delay_ms * (1 << max(attempt - 1, 0))
    cap = settings.max_delay_ms
    if cap > 0:
        delay = min(delay, cap)
    if retry_after_ms is not None and retry_after_ms > 0:
        if cap > 0 and retry_after_ms > cap:
            return None
        delay = max(delay, retry_after_ms)
    return delay


@attrs.frozen
class ScheduleRetry:
    """Retry: omit ``failed`` from the context, emit ``event``, sleep ``delay_ms``, continue."""

    attempt: int
    delay_ms: int
    failed: AssistantMessage
    event: AutoRetryStart


@attrs.frozen
class StopRetrying:
    """No retry follows; emit ``event`` (ends a started sequence) if there is one."""

    event: AutoRetryEnd | None = None


RetryStep = ScheduleRetry | StopRetrying
"""What the retry policy decided at the end of a low-level run."""


@attrs.frozen
class RetryState:
    """One session's retry sequence: how many retries of the current failure were made.

    ``attempt`` is 0 outside a sequence. A successful response ends the sequence (and resets
    the counter), so retries never accumulate across the calls of one run. ``pending``: the
    latest attempt was decided but its ``auto_retry_start`` not emitted yet (the shell emits
    it after omitting the failed response); an abort in that window must not report the end
    of an attempt no client heard of (found by ``pitrio explore``: an ``auto_retry_end``
    with no ``auto_retry_start`` before it).
    """

    attempt: int = 0
    pending: bool = False

    def announced(self) -> RetryState:
        """The latest attempt's ``auto_retry_start`` went out."""
        return RetryState(self.attempt) if self.pending else self

    @property
    def retrying(self) -> bool:
        """Whether a retry sequence is in progress."""
        return self.attempt > 0

    def on_message_end(self, message: AssistantMessage) -> tuple[RetryState, AutoRetryEnd | None]:
        """An assistant response ended: a successful one closes the sequence with success."""
        if self.attempt > 0 and message.stop_reason in _SUCCESS_STOPS:
            return RetryState(0), AutoRetryEnd(success=True, attempt=self.attempt)
        return self, None

    def on_run_end(
        self,
        message: AssistantMessage | None,
        settings: RetrySettings,
        *,
        retry_after_ms: int | None = None,
    ) -> tuple[RetryState, RetryStep]:
        """A low-level run ended with ``message`` as its last response: retry or not.

        A retryable failure with attempts left schedules the next attempt. Anything else ends
        a started sequence: exhausted or given up (the final ``auto_retry_end`` names the last
        attempt made, DESIGN §5.8), a different error, or an aborted response.
        """
        if message is not None and settings.enabled and is_retryable_error(message):
            attempt = self.attempt + 1
            if retry_after_ms is None:
                retry_after_ms = parse_retry_after_ms(message.error_message)
            delay = retry_delay_ms(attempt, settings, retry_after_ms)
            if attempt <= settings.max_retries and delay is not None:
                event = AutoRetryStart(
                    attempt=attempt,
                    max_attempts=settings.max_retries,
                    delay_ms=delay,
                    error_message=message.error_message or UNKNOWN_ERROR,
                )
                return RetryState(attempt, pending=True), ScheduleRetry(
                    attempt, delay, message, event
                )
            return self._end(message.error_message or UNKNOWN_ERROR)
        if self.attempt == 0:
            return self, StopRetrying()
        if message is None:
            return self._end(UNKNOWN_ERROR)
        if message.stop_reason == "aborted":
            return self._end(RETRY_CANCELLED)
        if message.stop_reason == "error":
            return self._end(message.error_message or UNKNOWN_ERROR)
        # A success already closed the sequence at its message_end; nothing left to report.
        return RetryState(0), StopRetrying()

    def on_cancel(self) -> tuple[RetryState, AutoRetryEnd | None]:
        """The run was aborted (e.g. during the back-off sleep): end a started sequence, as
        of the last attempt announced (none announced: nothing to end)."""
        last = self.attempt - 1 if self.pending else self.attempt
        if self.attempt == 0:
            return self, None
        if last == 0:
            return RetryState(0), None
        return RetryState(0), AutoRetryEnd(success=False, attempt=last, final_error=RETRY_CANCELLED)

    def _end(self, final_error: str) -> tuple[RetryState, StopRetrying]:
        if self.attempt == 0:
            return self, StopRetrying()
        event = AutoRetryEnd(success=False, attempt=self.attempt, final_error=final_error)
        return RetryState(0), StopRetrying(event)


def will_retry(
    message: AssistantMessage | None, state: RetryState, settings: RetrySettings
) -> bool:
    """Whether :meth:`RetryState.on_run_end` would schedule a retry for ``message``."""
    _, step = state.on_run_end(message, settings)
    return isinstance(step, ScheduleRetry)


def next_summarization_retry(
    attempt: int,
    error_message: str,
    settings: RetrySettings,
    *,
    retry_after_ms: int | None = None,
) -> SummarizationRetryScheduled | None:
    """The ``summarization_retry_scheduled`` event for retry ``attempt`` of a summary request.

    ``None`` when the error is not transient, retries are off or used up, or the provider asks
    for a wait beyond the cap. Summary requests share the run's retry settings.
    """
    if not settings.enabled or attempt > settings.max_retries:
        return None
    if not error_message or not is_retryable_error_text(error_message):
        return None
    if retry_after_ms is None:
        retry_after_ms = parse_retry_after_ms(error_message)
    delay = retry_delay_ms(attempt, settings, retry_after_ms)
    if delay is None:
        return None
    return SummarizationRetryScheduled(
        attempt=attempt,
        max_attempts=settings.max_retries,
        delay_ms=delay,
        error_message=error_message,
    )
