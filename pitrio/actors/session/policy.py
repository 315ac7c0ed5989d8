"""Texts of the session layer's refusals (pi's wording, so clients can match on it)."""

from __future__ import annotations

STREAMING_WITHOUT_BEHAVIOR = (
    "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue "
    "the message."
)
