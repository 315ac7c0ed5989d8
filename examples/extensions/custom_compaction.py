"""A compaction without a model call: the summary lists the user requests being compacted.

``session_before_compact`` receives the prepared compaction (what would be summarised and the
first entry kept) and returns its own result; pitrio writes it as the ``compaction`` entry,
and ``session_compact`` then reports ``from_extension=True``.
"""

from __future__ import annotations

from typing import Any

from pitrio.messages.agent import UserMessage
from pitrio.messages.content import text_of


def summary_of(messages: Any) -> str:
    """A bullet list of the user messages' first lines."""
    lines = ["## Requests so far"]
    for message in messages:
        if isinstance(message, UserMessage):
            first = text_of(message.content).strip().splitlines()
            if first:
                lines.append(f"- {first[0][:200]}")
    return "\n".join(lines)


def setup(api: Any) -> None:
    """Replace the model-written summary with a list of requests."""

    def before(event: Any, ctx: Any) -> dict[str, Any]:
        prep = event.preparation
        return {
            "compaction": {
                "summary": summary_of(prep.messages_to_summarize + prep.turn_prefix_messages),
                "first_kept_entry_id": prep.first_kept_entry_id,
                "tokens_before": prep.tokens_before,
                "details": {"source": "custom_compaction example"},
            }
        }

    api.on("session_before_compact", before)
