"""The pure retry rules of the providers (the vendor SDKs' defaults), without a network."""

from __future__ import annotations

import email.utils

import attrs
import pytest

from pitrio.actors.model_router.providers.base import HttpSettings, provider_settings
from pitrio.actors.model_router.providers.retry import (
    GiveUp,
    RetryPolicy,
    TooLong,
    Wait,
    backoff_seconds,
    decide,
    requested_delay_ms,
    status_is_retryable,
)

POLICY = RetryPolicy()


def no_jitter() -> float:
    return 0.0


def test_the_defaults_are_the_sdks() -> None:
    assert (POLICY.max_retries, POLICY.initial_delay, POLICY.max_delay, POLICY.jitter) == (
        2,
        0.5,
        8.0,
        0.25,
    )
    # The HTTP client's own default is pi 1.6.0's: no provider-level retry at all.
    assert HttpSettings().retry_policy() == attrs.evolve(POLICY, max_retries=0)


@pytest.mark.parametrize(
    ("status", "expected"),
    [(400, False), (401, False), (403, False), (404, False), (422, False), (408, True),
     (409, True), (429, True), (500, True), (502, True), (503, True), (529, True)],
)  # fmt: skip
def test_retryable_statuses(status: int, expected: bool) -> None:
    assert status_is_retryable(status, {}) is expected


def test_x_should_retry_decides_first() -> None:
    assert status_is_retryable(400, {"x-should-retry": "true"})
    assert not status_is_retryable(503, {"x-should-retry": "false"})
    assert status_is_retryable(503, {"x-should-retry": "maybe"})  # only true/false count


def test_backoff_doubles_from_half_a_second_capped_at_eight_less_jitter() -> None:
    assert [backoff_seconds(n, POLICY, no_jitter) for n in range(6)] == [
        0.5, 1.0, 2.0, 4.0, 8.0, 8.0,
    ]  # fmt: skip
    assert backoff_seconds(0, POLICY, lambda: 1.0) == 0.375  # at most a quarter off


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"retry-after": "3"}, 3000.0),
        ({"retry-after": "1.5"}, 1500.0),
        ({"retry-after-ms": "250"}, 250.0),
        ({"retry-after-ms": "250", "retry-after": "9"}, 250.0),
        ({"retry-after-ms": "0", "retry-after": "9"}, 9000.0),  # a zero gives way, as in the SDKs
        ({"retry-after-ms": "0"}, 0.0),
        ({"retry-after-ms": "12abc"}, 12.0),  # read as parseFloat reads it
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-5"}, 0.0),
    ],
)
def test_requested_delays(headers: dict[str, str], expected: float | None) -> None:
    assert requested_delay_ms(headers) == expected


def test_retry_after_as_an_http_date() -> None:
    now = 1_700_000_000.0
    later = email.utils.formatdate(now + 30, usegmt=True)
    earlier = email.utils.formatdate(now - 30, usegmt=True)
    assert requested_delay_ms({"retry-after": later}, now) == 30000.0
    assert requested_delay_ms({"retry-after": earlier}, now) == 0.0


def test_decide() -> None:
    assert decide(0, POLICY, no_jitter, status=500) == Wait(0.5)
    assert decide(1, POLICY, no_jitter) == Wait(1.0)  # a failed connection
    assert decide(2, POLICY, no_jitter, status=500) == GiveUp()  # two repeats made
    assert decide(0, POLICY, no_jitter, status=400) == GiveUp()
    assert decide(0, POLICY, no_jitter, status=429, headers={"retry-after": "7"}) == Wait(7.0)
    assert decide(0, POLICY, no_jitter, status=429, headers={"retry-after": "61"}) == TooLong(
        "Server requested 61s retry delay (max: 60s)."
    )
    uncapped = RetryPolicy(max_retry_delay_ms=0)
    assert decide(0, uncapped, no_jitter, status=429, headers={"retry-after": "61"}) == Wait(61.0)
    assert decide(0, RetryPolicy(max_retries=0), no_jitter, status=500) == GiveUp()


def test_settings_json_sets_the_count_and_the_cap() -> None:
    http = provider_settings({"retry": {"provider": {"maxRetries": 5, "maxRetryDelayMs": 0}}}).http
    assert (http.max_retries, http.max_retry_delay_ms) == (5, 0)
    # pi 1.6.0: no provider-level retries unless asked for (0.73.1 left the SDK's 2).
    assert provider_settings({}).http.max_retries == 0


def test_legacy_max_delay_is_the_provider_cap_unless_that_is_set() -> None:
    # pi 1.6.0 migrates retry.maxDelayMs to retry.provider.maxRetryDelayMs.
    assert provider_settings({"retry": {"maxDelayMs": 5000}}).http.max_retry_delay_ms == 5000
    both = {"retry": {"maxDelayMs": 5000, "provider": {"maxRetryDelayMs": 7000}}}
    assert provider_settings(both).http.max_retry_delay_ms == 7000
    assert provider_settings({}).http.max_retry_delay_ms == 60000
