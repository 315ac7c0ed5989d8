"""When a failed request is repeated inside a provider, and after how long. Pure.

pi's providers call the vendors' SDKs (OpenAI's and Anthropic's), which repeat a request that
failed before anything streamed, twice by default, before the caller sees an error: a client
gets one clean turn, and only a failure that outlives the repeats reaches the session's
auto-retry. The rules here are those SDKs' defaults:

* repeated: a connection that failed or timed out before the response head, and a response
  whose ``x-should-retry`` header says ``true``, or (without that header) whose status is 408,
  409, 429 or at least 500; ``x-should-retry: false`` forbids it;
* the wait: what the server asked for (``retry-after-ms``, else ``retry-after`` in seconds or
  as an HTTP date), else ``0.5 s * 2**n`` capped at 8 s, shortened by up to a quarter at random
  (jitter);
* a server-requested wait longer than ``max_retry_delay_ms`` (pi's
  ``retry.provider.maxRetryDelayMs``, ``0`` = no cap) is not waited: the request fails at once,
  its text naming the delay (which pi's auto-retry rule ``retry delay`` then matches).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping

import attrs


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How a provider repeats a failed request (the vendor SDKs' defaults)."""

    max_retries: int = 2
    initial_delay: float = 0.5
    """Seconds before the first repeat when the server names no delay."""
    max_delay: float = 8.0
    """Longest computed wait, in seconds (a server-requested one may be longer)."""
    jitter: float = 0.25
    """Up to this fraction of a computed wait is taken off at random."""
    max_retry_delay_ms: int = 60000
    """Longest server-requested wait honoured; ``0`` = no cap."""


@attrs.frozen
class Wait:
    """Repeat the request after ``seconds``."""

    seconds: float


@attrs.frozen
class TooLong:
    """The server asked for a wait beyond the cap: fail now, saying so in the error text."""

    note: str


@attrs.frozen
class GiveUp:
    """Do not repeat: the failure is the answer."""


Verdict = Wait | TooLong | GiveUp


def status_is_retryable(status: int, headers: Mapping[str, str]) -> bool:
    """Whether a failed response may be repeated (``headers`` lower-cased or case-insensitive)."""
    verdict = headers.get("x-should-retry")
    if verdict == "true":
        return True
    if verdict == "false":
        return False
    return status in (408, 409, 429) or status >= 500


def requested_delay_ms(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait the server asked for, in milliseconds, or ``None`` if it named none.

    ``retry-after-ms`` first, then ``retry-after`` (seconds, or an HTTP date); a value that
    does not parse names nothing; a past date or negative number is no wait at all.
    """
    delay: float | None = None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        delay = _leading_float(raw_ms)
    raw = headers.get("retry-after")
    if raw and not delay:  # a zero retry-after-ms gives way to retry-after, as in the SDKs
        seconds = _leading_float(raw)
        if seconds is not None:
            delay = seconds * 1000
        else:
            import email.utils  # here: only an HTTP date needs it (start-up time, issue 38)

            try:
                when = email.utils.parsedate_to_datetime(raw.strip())
            except (TypeError, ValueError):
                when = None
            if when is not None:
                now = time.time() if now is None else now
                delay = (when.timestamp() - now) * 1000
    return None if delay is None else max(delay, 0.0)


def backoff_seconds(retries_done: int, policy: RetryPolicy, random: Callable[[], float]) -> float:
    """The computed wait before repeat number ``retries_done + 1`` (jitter included)."""
    base = min(policy.initial_delay * 2.0**retries_done, policy.max_delay)
    return base * (1 - random() * policy.jitter)


def decide(
    retries_done: int,
    policy: RetryPolicy,
    random: Callable[[], float],
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
    now: float | None = None,
) -> Verdict:
    """What to do after a failed try: ``status``/``headers`` of a failed response, or neither
    for a connection that failed before one arrived."""
    if retries_done >= policy.max_retries:
        return GiveUp()
    headers = headers or {}
    if status is not None and not status_is_retryable(status, headers):
        return GiveUp()
    requested = requested_delay_ms(headers, now) if status is not None else None
    if requested is None:
        return Wait(backoff_seconds(retries_done, policy, random))
    cap = policy.max_retry_delay_ms
    if cap and requested > cap:
        # pi 1.6.0's words (whole seconds, rounded up), put before the provider's own text.
        return TooLong(
            f"Server requested {math.ceil(requested / 1000)}s retry delay"
            f" (max: {math.ceil(cap / 1000)}s)."
        )
    return Wait(requested / 1000)


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def _leading_float(text: str) -> float | None:
    """The finite number ``text`` starts with, as JavaScript's ``parseFloat`` reads it (the
    SDKs do), or ``None``."""
    match = _NUMBER.match(text.strip())
    if match is None:
        return None
    value = float(match.group())
    return value if math.isfinite(value) else None


__all__ = [
    "GiveUp",
    "RetryPolicy",
    "TooLong",
    "Verdict",
    "Wait",
    "backoff_seconds",
    "decide",
    "requested_delay_ms",
    "status_is_retryable",
]
