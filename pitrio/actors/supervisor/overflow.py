"""Context-overflow detection (spec §3.8.3, pi-ai's ``isContextOverflow``).

A response overflowed the context when the provider said so (an error whose text matches one of
the provider phrasings below and none of the exclusions), when a successful response used more
input than the window holds (silent overflow), or when the server cut the input to fill the
window and answered nothing (``length`` with no output). Pure: no I/O, no trio.
"""

from __future__ import annotations

import functools
import re
from typing import Literal

from pitrio.messages.agent import AssistantMessage

# The phrasings providers use for "your prompt does not fit" (pi-ai 0.73.1), one per provider
# family; all are matched case-insensitively anywhere in the error text.
OVERFLOW_PHRASES: tuple[str, ...] = (
    r"prompt is too long",
    r"request_too_large",
    r"input is too long for requested model",
    r"exceeds the context window",
    r"input token count.*exceeds the maximum",
    r"maximum prompt length is \d+",
    r"reduce the length of the messages",
    r"maximum context length is \d+ tokens",
    r"exceeds the limit of \d+",
    r"exceeds the available context size",
    r"greater than the context length",
    r"context window exceeds limit",
    r"exceeded model token limit",
    r"too large for model with \d+ maximum context length",
    r"model_context_window_exceeded",
    r"prompt too long; exceeded (?:max )?context length",
    r"context[_ ]length[_ ]exceeded",
    r"too many tokens",
    r"token limit exceeded",
    r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
)

# Errors that mention tokens or limits but are throttling, not overflow: retrying helps them,
# compacting does not.
NON_OVERFLOW_PHRASES: tuple[str, ...] = (
    r"^(Throttling error|Service unavailable):",
    r"rate limit",
    r"too many requests",
)


@functools.cache
def patterns() -> tuple[tuple[re.Pattern[str], ...], tuple[re.Pattern[str], ...]]:
    """The exclusions and the overflow phrasings, compiled on the first error text: only a
    failed response needs them, and compiling them was ~1.3 ms of every start (issue 38)."""
    return (
        tuple(re.compile(phrase, re.IGNORECASE) for phrase in NON_OVERFLOW_PHRASES),
        tuple(re.compile(phrase, re.IGNORECASE) for phrase in OVERFLOW_PHRASES),
    )


# A ``length`` stop with no output counts as overflow once the input filled this share of the
# window: the server truncated the prompt to fit and had no room left to answer.
LENGTH_OVERFLOW_RATIO = 0.99

OverflowKind = Literal["error", "silent", "length"]
"""How a response overflowed: a provider error, a too-large successful response, or truncation."""


def is_overflow_error_text(text: str) -> bool:
    """Whether a provider's error text reports a context overflow."""
    exclusions, overflows = patterns()
    if any(p.search(text) for p in exclusions):
        return False
    return any(p.search(text) for p in overflows)


def overflow_kind(
    message: AssistantMessage, context_window: int | None = None
) -> OverflowKind | None:
    """How ``message`` overflowed the context, or ``None`` if it did not.

    The usage-based checks need a known window (``context_window`` > 0).
    """
    if message.stop_reason == "error":
        if message.error_message and is_overflow_error_text(message.error_message):
            return "error"
        return None
    if not context_window or context_window <= 0:
        return None
    usage = message.usage
    used = usage.input + usage.cache_read
    if message.stop_reason == "stop" and used > context_window:
        return "silent"
    if (
        message.stop_reason == "length"
        and usage.output == 0
        and used >= LENGTH_OVERFLOW_RATIO * context_window
    ):
        return "length"
    return None


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """Whether ``message`` shows that the request did not fit the model's context window."""
    return overflow_kind(message, context_window) is not None
