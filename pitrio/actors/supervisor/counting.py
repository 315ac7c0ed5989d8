"""What ``get_session_stats`` counts, as pi 1.6.0 counts it (pure).

pi 1.6.0 counts over the whole session file, not the current context: every ``message`` entry
of every branch, the history a compaction summarized, failed and retried attempts. Tokens
and cost add up every assistant response, the usage a tool reported on its result, what
compaction and branch summaries cost, and ``usage`` entries (requests made outside the
conversation, e.g. cache warming).

Entries of kinds this version does not model yet (a ``usage`` entry, a usage on a tool result
or a branch summary) are read from the fields they keep, so counting never depends on which
entry classes exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pitrio.messages.agent import AssistantMessage, Usage
from pitrio.messages.content import ToolCall
from pitrio.messages.entries import BranchSummaryEntry, CompactionEntry, MessageEntry


@attrs.frozen(kw_only=True)
class SessionCounts:
    """The counts and sums of ``get_session_stats`` (``tokens`` in pi's key order)."""

    user_messages: int = 0
    assistant_messages: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    total_messages: int = 0
    tokens: dict[str, int] = attrs.field(factory=dict)
    cost: float = 0.0


def _usage_numbers(usage: Any) -> tuple[float, float, float, float, float] | None:
    """(input, output, cacheRead, cacheWrite, cost total) of a usage object or its JSON."""
    if isinstance(usage, Usage):
        return (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.cost.total)
    if isinstance(usage, Mapping):
        cost = usage.get("cost")
        total = cost.get("total", 0) if isinstance(cost, Mapping) else 0

        def number(value: Any) -> float:
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return value if ok else 0

        return (
            number(usage.get("input")),
            number(usage.get("output")),
            number(usage.get("cacheRead")),
            number(usage.get("cacheWrite")),
            number(total),
        )
    return None


def _extra_usage(obj: Any) -> Any:
    """A ``usage`` the object has as a field or kept among its unknown fields, else ``None``."""
    usage = getattr(obj, "usage", None)
    if usage is not None:
        return usage
    extra = getattr(obj, "extra", None)
    if isinstance(extra, Mapping):
        return extra.get("usage")
    data = getattr(obj, "data", None)  # an entry of a type this version does not know
    if isinstance(data, Mapping):
        return data.get("usage")
    return None


def count_session(entries: Iterable[object]) -> SessionCounts:
    """Count ``entries`` (the whole file, in file order) as pi 1.6.0's ``getSessionStats``."""
    users = assistants = calls = results = total = 0
    sums = [0.0, 0.0, 0.0, 0.0, 0.0]

    def add(usage: Any) -> None:
        numbers = _usage_numbers(usage)
        if numbers is not None:
            for i, value in enumerate(numbers):
                sums[i] += value

    for entry in entries:
        kind = getattr(entry, "type", None)
        if kind == "usage" or isinstance(entry, CompactionEntry | BranchSummaryEntry):
            add(_extra_usage(entry))
        if not isinstance(entry, MessageEntry):
            continue
        total += 1
        message = entry.message
        if message.role == "user":
            users += 1
        elif message.role == "toolResult":
            results += 1
            add(_extra_usage(message))
        elif isinstance(message, AssistantMessage):
            assistants += 1
            calls += sum(isinstance(block, ToolCall) for block in message.content)
            add(message.usage)
    tokens_in, tokens_out, cache_read, cache_write, cost = sums
    tokens = {
        "input": int(tokens_in),
        "output": int(tokens_out),
        "cacheRead": int(cache_read),
        "cacheWrite": int(cache_write),
        "total": int(tokens_in + tokens_out + cache_read + cache_write),
    }
    return SessionCounts(
        user_messages=users,
        assistant_messages=assistants,
        tool_calls=calls,
        tool_results=results,
        total_messages=total,
        tokens=tokens,
        cost=cost,
    )
