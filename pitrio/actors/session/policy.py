"""Session-level texts and retry policy used by the session actor.

The retry classification and back-off live in the supervisor's pure policy; this module is the
one place the session actor imports them from.
"""

from __future__ import annotations

import re

import attrs

from pitrio.messages.agent import AssistantMessage

STREAMING_WITHOUT_BEHAVIOR = (
    "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue "
    "the message."
)

_RETRYABLE = re.compile(
    r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|"
    r"service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|"
    r"connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|"
    r"fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|"
    r"http2 request did not get a response|timed? out|timeout|terminated|retry delay",
    re.IGNORECASE,
)


@attrs.frozen(kw_only=True)
class RetrySettings:
    """``retry.*`` settings: attempts, base delay, cap."""

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int = 60_000


def is_retryable_error(message: AssistantMessage) -> bool:
    """Whether a failed response is worth retrying (pi's classification, spec §3.7.1)."""
    if message.stop_reason != "error" or not message.error_message:
        return False
    return _RETRYABLE.search(message.error_message) is not None


def retry_delay_ms(attempt: int, settings: RetrySettings) -> int:
    """Back-off before attempt ``attempt`` (1-based): base * 2^(n-1), capped."""
    delay: int = settings.base_delay_ms * 2 ** (attempt - 1)
    return min(delay, settings.max_delay_ms)
