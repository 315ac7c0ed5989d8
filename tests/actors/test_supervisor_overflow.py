"""Context-overflow detection (spec §3.8.3)."""

from __future__ import annotations

import pytest

from pitrio.actors.supervisor.overflow import (
    is_context_overflow,
    is_overflow_error_text,
    overflow_kind,
)
from tests.actors.test_supervisor_support import assistant, failed, usage


@pytest.mark.parametrize(
    "text",
    [
        "prompt is too long: 250000 tokens > 128000 maximum",
        "request_too_large",
        "Input is too long for requested model.",
        "Your input exceeds the context window of this model",
        "The input token count (1200000) exceeds the maximum number of tokens allowed",
        "This model's maximum prompt length is 131072 but the request contains 140000 tokens",
        "Please reduce the length of the messages or completion.",
        "This model's maximum context length is 128000 tokens. However, you requested 130000",
        "Requested 140000 tokens, which exceeds the limit of 131072",
        "the request exceeds the available context size, try increasing it",
        "input length is greater than the context length",
        "context window exceeds limit",
        "Exceeded model token limit",
        "Prompt too large for model with 8192 maximum context length",
        "model_context_window_exceeded",
        "prompt too long; exceeded max context length by 100 tokens",
        "prompt too long; exceeded context length",
        "context_length_exceeded",
        "context length exceeded",
        "too many tokens",
        "Token limit exceeded",
        "400 (no body)",
        "413 status code (no body)",
        "PROMPT IS TOO LONG",
    ],
)
def test_provider_overflow_errors(text: str) -> None:
    assert is_overflow_error_text(text)
    assert is_context_overflow(failed(text))
    assert overflow_kind(failed(text)) == "error"


@pytest.mark.parametrize(
    "text",
    [
        "Throttling error: too many tokens per minute",
        "Service unavailable: token limit exceeded upstream",
        "rate limit: too many tokens",
        "Too many requests: context_length_exceeded",
        "overloaded_error",
        "500 (no body)",
        "error 400 (no body)",  # the status pattern is anchored at the start
    ],
)
def test_non_overflow_errors(text: str) -> None:
    assert not is_context_overflow(failed(text))


def test_error_without_text_is_not_overflow() -> None:
    assert not is_context_overflow(assistant(None, stop="error", error=None))


def test_silent_overflow_needs_a_window() -> None:
    big = assistant("ok", use=usage(input=120_000, cache_read=10_000))
    assert overflow_kind(big, 128_000) == "silent"
    assert not is_context_overflow(big, 130_000)  # input + cacheRead must exceed the window
    assert not is_context_overflow(big)
    assert not is_context_overflow(big, 0)


def test_length_with_no_output_near_the_window() -> None:
    truncated = assistant(None, stop="length", use=usage(input=126_720, output=0))
    assert overflow_kind(truncated, 128_000) == "length"  # exactly 99 %
    short = assistant(None, stop="length", use=usage(input=126_719, output=0))
    assert not is_context_overflow(short, 128_000)
    answered = assistant("x", stop="length", use=usage(input=127_000, output=5))
    assert not is_context_overflow(answered, 128_000)


def test_usage_checks_ignore_other_stop_reasons() -> None:
    tool_use = assistant("x", stop="toolUse", use=usage(input=500_000))
    assert not is_context_overflow(tool_use, 128_000)
    aborted = assistant(None, stop="aborted", use=usage(input=500_000))
    assert not is_context_overflow(aborted, 128_000)
