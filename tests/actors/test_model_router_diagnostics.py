"""Diagnostics: retry-after parsing and reading status / delay back off a failed message."""

from __future__ import annotations

import email.utils

from pitrio.actors.model_router.diagnostics import (
    error_diagnostic,
    error_name,
    http_status,
    parse_retry_after,
    retry_after_ms,
)
from pitrio.messages import AssistantMessage, Usage
from pitrio.messages.codec import from_json, to_json


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7000
    assert parse_retry_after({"retry-after": "0.25"}) == 250
    assert parse_retry_after({"retry-after-ms": "1500.2", "retry-after": "9"}) == 1501
    assert parse_retry_after({"retry-after-ms": "junk", "retry-after": "2"}) == 2000
    assert parse_retry_after({"retry-after": "-3"}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == 30000
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) is None


def test_read_back_from_a_message_and_through_the_codec() -> None:
    diagnostic = error_diagnostic(
        "429 rate_limit_error: slow down",
        name="HttpError",
        status=429,
        code="rate_limit_error",
        retry_after_ms=1500,
        timestamp=5,
    )
    message = AssistantMessage(
        content=(),
        api="a",
        provider="p",
        model="m",
        diagnostics=(diagnostic,),
        usage=Usage(),
        stop_reason="error",
        error_message="429 rate_limit_error: slow down",
        timestamp=5,
    )
    encoded = to_json(message)
    assert encoded["diagnostics"] == [
        {
            "type": "provider_error",
            "timestamp": 5,
            "error": {
                "name": "HttpError",
                "message": "429 rate_limit_error: slow down",
                "code": "rate_limit_error",
            },
            "details": {"status": 429, "retryAfterMs": 1500},
        }
    ]
    decoded = from_json(encoded, AssistantMessage)
    assert (retry_after_ms(decoded), http_status(decoded), error_name(decoded)) == (
        1500,
        429,
        "HttpError",
    )
    plain = AssistantMessage(
        content=(), api="a", provider="p", model="m", usage=Usage(), stop_reason="stop",
        timestamp=1,
    )  # fmt: skip
    assert (retry_after_ms(plain), http_status(plain), error_name(plain)) == (None, None, None)
