"""Texts of the session layer's refusals (pi's wording, so clients can match on it)."""

from __future__ import annotations

PROMPT_DURING_COMPACTION = (
    "Cannot submit a prompt while compaction is in progress. Wait for compaction to finish and "
    "retry."
)
"""A prompt sent while a manual compaction or a branch summary runs (pi 1.6.0)."""

STREAMING_WITHOUT_BEHAVIOR = (
    "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue "
    "the message."
)
