"""What the daemon's log says about one session's runs (pure): start, end, failures.

:class:`RunLedger` is fed the few events that matter (a run's start, each assistant
``message_end``, each failed tool, the settle) and returns the log events to write:
``run_start``, ``provider_error`` (with the HTTP status when there is one), ``tool_failed`` and
``run_end`` (duration, turns, token usage summed over the run's responses, cost in USD, the
last stop reason). It never sees a delta: the hosted session's :class:`~.activity.Activity`
calls it only for those event types, so a turn costs a few ``isinstance`` checks more.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from pitrio.actors.model_router.diagnostics import http_status
from pitrio.messages.agent import AssistantMessage

_LEADING_STATUS = re.compile(r"^([1-5]\d\d):? ")
"""The HTTP providers' error texts start with the status: ``429 Rate limit reached...``, or
``400: {...}`` (pi 1.6.0's completions text, the status then the error body as JSON)."""
_MAX_ERROR = 500
"""Characters of an error text a log line keeps."""

LogEvent = tuple[str, str, dict[str, Any]]
"""``(level, event name, fields)``; level is ``info``, ``warning`` or ``error``."""


def error_status(message: AssistantMessage) -> int | None:
    """The HTTP status a failed response carries: its diagnostics' (``PITRIO_PROVIDER_
    DIAGNOSTICS=1``), else the number its error text starts with, else ``None``."""
    status = http_status(message)
    if status is not None:
        return status
    match = _LEADING_STATUS.match(message.error_message or "")
    return int(match.group(1)) if match else None


def _clip(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR] + "..."


@attrs.define
class RunLedger:
    """The accounts of the run in progress of one session (see the module docstring)."""

    session_id: str
    runs: int = 0
    started_at: float | None = None
    turns: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    errors: int = 0
    tool_failures: int = 0
    model: str | None = None
    stop_reason: str | None = None

    def start(self, now: float) -> LogEvent:
        """A run began (``agent_start``) at ``now`` (seconds, any monotonic clock)."""
        self.runs += 1
        self.started_at = now
        self.turns = self.input = self.output = self.cache_read = self.cache_write = 0
        self.total_tokens = self.errors = self.tool_failures = 0
        self.cost = 0.0
        self.model = self.stop_reason = None
        return "info", "run_start", {"session": self.session_id, "run": self.runs}

    def response(self, message: AssistantMessage) -> LogEvent | None:
        """An assistant message ended: its usage counts; a failure is a ``provider_error``
        (an abort is not a failure)."""
        usage = message.usage
        self.turns += 1
        self.input += usage.input
        self.output += usage.output
        self.cache_read += usage.cache_read
        self.cache_write += usage.cache_write
        self.total_tokens += usage.total_tokens
        self.cost += usage.cost.total
        self.model = f"{message.provider}/{message.model}"
        self.stop_reason = message.stop_reason
        if message.stop_reason != "error":
            return None
        self.errors += 1
        fields: dict[str, Any] = {
            "session": self.session_id,
            "run": self.runs,
            "model": self.model,
            "status": error_status(message),
            "error": _clip(message.error_message),
        }
        return "warning", "provider_error", fields

    def tool_failed(self, tool: str, call_id: str, text: str) -> LogEvent:
        """A tool call ended with ``isError``; ``text`` is what it told the model."""
        self.tool_failures += 1
        fields = {
            "session": self.session_id,
            "run": self.runs,
            "tool": tool,
            "toolCallId": call_id,
            "error": _clip(text),
        }
        return "warning", "tool_failed", fields

    def settled(self, now: float) -> LogEvent | None:
        """The run settled (``agent_settled``); ``None`` when no run was started (a settle
        that ends a compaction or an aborted command only)."""
        if self.started_at is None:
            return None
        duration_ms = round((now - self.started_at) * 1000)
        self.started_at = None
        fields: dict[str, Any] = {
            "session": self.session_id,
            "run": self.runs,
            "duration_ms": duration_ms,
            "turns": self.turns,
            "model": self.model,
            "stop_reason": self.stop_reason,
            "usage": {
                "input": self.input,
                "output": self.output,
                "cacheRead": self.cache_read,
                "cacheWrite": self.cache_write,
                "totalTokens": self.total_tokens,
            },
            "cost": round(self.cost, 6),
            "errors": self.errors,
            "tool_failures": self.tool_failures,
        }
        return "info", "run_end", fields
