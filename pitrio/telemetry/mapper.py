"""From a session's events to span and metric operations: the sans-IO core of the telemetry.

:class:`RunMapper` is a small state machine fed one event at a time with the time it was seen
(nanoseconds since the epoch); it answers with the operations the shell carries out on
OpenTelemetry (:class:`StartSpan`, :class:`EndSpan`, :class:`AddEvent`, :class:`Measure`).
Nothing here imports OpenTelemetry, so the mapping is tested alone.

The span tree of one run (from its first ``agent_start`` to ``agent_settled``)::

    invoke_agent pitrio                 run
      turn                              each turn_start .. turn_end
        chat <model>                    the LLM request of the turn
        execute_tool <name>             each tool call
      retry                             each auto-retry back-off (auto_retry_start .. the
                                        next agent_start)
      compaction                        a compaction inside the run; outside one it is a root

Spans are named by keys (``run``, ``turn``, ``llm``, ``tool:<id>``, ``retry``,
``compaction``); a parent is named by its key, so the shell links them with explicit parent
contexts and never relies on the task-local "current span".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import attrs

from pitrio.messages.agent import AssistantMessage
from pitrio.messages.content import text_of
from pitrio.messages.events import (
    AgentEnd,
    AgentSessionEvent,
    AgentSettled,
    AgentStart,
    AutoRetryEnd,
    AutoRetryStart,
    CompactionEnd,
    CompactionStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    SummarizationRetryScheduled,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)

AttrValue = str | bool | int | float | tuple[str, ...]
Attributes = Mapping[str, AttrValue]

ERROR_TEXT_LIMIT: Final = 500
"""Characters of an error text kept on a span (a tool's error output can be long)."""


@attrs.frozen
class StartSpan:
    """Open the span ``key`` under ``parent`` (a key; ``None``: a root span)."""

    key: str
    name: str
    parent: str | None
    start_ns: int
    attributes: Attributes = attrs.field(factory=dict)


@attrs.frozen
class EndSpan:
    """Set ``attributes`` on the span ``key`` and end it; ``error`` marks it failed."""

    key: str
    end_ns: int
    attributes: Attributes = attrs.field(factory=dict)
    error: str | None = None


@attrs.frozen
class AddEvent:
    """Add a timed event to the open span ``key``."""

    key: str
    name: str
    at_ns: int
    attributes: Attributes = attrs.field(factory=dict)


@attrs.frozen
class Measure:
    """Add ``value`` to a counter or record it in a histogram (as :data:`INSTRUMENTS` says)."""

    instrument: str
    value: float
    attributes: Attributes = attrs.field(factory=dict)


Operation = StartSpan | EndSpan | AddEvent | Measure


@attrs.frozen
class InstrumentSpec:
    """A metric instrument the shell creates: ``kind`` is ``counter`` or ``histogram``."""

    name: str
    kind: str
    unit: str
    description: str


_SECONDS_BUCKETS: Final = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    25,
    60,
    120,
    300,
)
SECONDS_BUCKETS: Final[tuple[float, ...]] = tuple(float(b) for b in _SECONDS_BUCKETS)
"""Bucket boundaries of the duration histograms (seconds: a tool call to a long run)."""

INSTRUMENTS: Final[tuple[InstrumentSpec, ...]] = (
    InstrumentSpec("pitrio.runs", "counter", "{run}", "Runs settled, by outcome."),
    InstrumentSpec("pitrio.run.duration", "histogram", "s", "Runs, agent_start to settled."),
    InstrumentSpec("pitrio.turns", "counter", "{turn}", "Turns ended."),
    InstrumentSpec("pitrio.turn.duration", "histogram", "s", "Turns, start to end."),
    InstrumentSpec("pitrio.llm.requests", "counter", "{request}", "LLM requests, by outcome."),
    InstrumentSpec("pitrio.llm.duration", "histogram", "s", "LLM requests, sent to done."),
    InstrumentSpec(
        "pitrio.llm.time_to_first_token", "histogram", "s", "LLM requests, sent to first delta."
    ),
    InstrumentSpec("pitrio.llm.tokens", "counter", "{token}", "Tokens used, by type."),
    InstrumentSpec("pitrio.llm.cost", "counter", "USD", "Cost of the LLM requests."),
    InstrumentSpec(
        "pitrio.llm.transport_retries",
        "counter",
        "{retry}",
        "Requests a provider repeated before anything streamed (status 0: no response).",
    ),
    InstrumentSpec("pitrio.tool.calls", "counter", "{call}", "Tool calls, by tool and error."),
    InstrumentSpec("pitrio.tool.duration", "histogram", "s", "Tool calls, start to end."),
    InstrumentSpec("pitrio.retries", "counter", "{retry}", "Automatic retries scheduled."),
    InstrumentSpec("pitrio.compactions", "counter", "{compaction}", "Compactions, by outcome."),
    InstrumentSpec("pitrio.compaction.duration", "histogram", "s", "Compactions, start to end."),
)
"""Every instrument the mapper measures into."""

_FAILED_STOPS: Final = frozenset({"error", "aborted"})
_CLOSE_ORDER: Final = ("llm", "turn", "retry", "compaction", "run")
"""Children before parents (tool spans, keyed per call, go first of all)."""
CURRENT_ORDER: Final = ("llm", "turn", "compaction", "retry", "run")
"""The span a log line belongs to: the innermost open one of these."""


def _seconds(start_ns: int, end_ns: int) -> float:
    return max(0, end_ns - start_ns) / 1e9


def _clip(text: str) -> str:
    return text if len(text) <= ERROR_TEXT_LIMIT else text[:ERROR_TEXT_LIMIT] + "..."


@attrs.define
class RunMapper:
    """The telemetry state of one session: which spans are open and what the run counted."""

    session_id: str
    open: dict[str, int] = attrs.field(factory=dict)
    """Open span key -> its start time."""
    turns: int = 0
    requests: int = 0
    tool_calls: int = 0
    retries: int = 0
    retry_attempt: int = 0
    last_stop: str | None = None
    last_error: str | None = None
    request_ready_ns: int | None = None
    first_token_ns: int | None = None
    compaction_reason: str = ""
    tool_names: dict[str, str] = attrs.field(factory=dict)

    def feed(self, event: AgentSessionEvent, now_ns: int) -> list[Operation]:
        """The operations ``event``, seen at ``now_ns``, calls for."""
        ops: list[Operation] = []
        match event:
            case AgentStart():
                self._start_run(ops, now_ns)
                if "retry" in self.open:
                    self._end(ops, "retry", now_ns)
            case TurnStart():
                self._start_run(ops, now_ns)
                self._end_if_open(ops, "turn", now_ns, "turn ended without turn_end")
                self.turns += 1
                self._start(ops, "turn", "turn", "run", now_ns, {"pitrio.turn.index": self.turns})
                self.request_ready_ns = now_ns
            case MessageStart(message=AssistantMessage() as message):
                self._start_request(ops, message, now_ns)
            case MessageUpdate():
                if "llm" in self.open and self.first_token_ns is None:
                    self.first_token_ns = now_ns
            case MessageEnd(message=AssistantMessage() as message):
                if "llm" not in self.open:
                    self._start_request(ops, message, now_ns)
                self._end_request(ops, message, now_ns)
            case MessageEnd():
                # A user, steering or tool-result message: the next request goes out after it.
                if "turn" in self.open:
                    self.request_ready_ns = now_ns
            case ToolExecutionStart(tool_call_id=call_id, tool_name=name):
                self.tool_names[call_id] = name
                attributes: dict[str, AttrValue] = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                }
                if event.parent_tool_call_id is not None:
                    attributes["pitrio.tool.parent_call_id"] = event.parent_tool_call_id
                parent = "turn" if "turn" in self.open else "run" if "run" in self.open else None
                self._start(
                    ops, f"tool:{call_id}", f"execute_tool {name}", parent, now_ns, attributes
                )
            case ToolExecutionEnd():
                self._end_tool(ops, event, now_ns)
            case TurnEnd(tool_results=results):
                if "turn" in self.open:
                    start = self.open["turn"]
                    self._end(ops, "turn", now_ns, {"pitrio.turn.tool_results": len(results)})
                    ops.append(Measure("pitrio.turns", 1))
                    ops.append(Measure("pitrio.turn.duration", _seconds(start, now_ns)))
            case AgentEnd(will_retry=will_retry):
                if "run" in self.open:
                    ops.append(
                        AddEvent("run", "agent_end", now_ns, {"will_retry": bool(will_retry)})
                    )
            case AutoRetryStart():
                self.retries += 1
                self.retry_attempt = event.attempt
                self._end_if_open(ops, "retry", now_ns, "superseded by the next retry")
                self._start(
                    ops,
                    "retry",
                    "retry",
                    "run" if "run" in self.open else None,
                    now_ns,
                    {
                        "pitrio.retry.attempt": event.attempt,
                        "pitrio.retry.max_attempts": event.max_attempts,
                        "pitrio.retry.delay_ms": event.delay_ms,
                        "pitrio.retry.error": _clip(event.error_message),
                    },
                )
                ops.append(Measure("pitrio.retries", 1))
            case AutoRetryEnd():
                error = None if event.success else (event.final_error or "retry cancelled")
                self._end_if_open(ops, "retry", now_ns, error)
                if "run" in self.open:
                    ops.append(
                        AddEvent(
                            "run",
                            "auto_retry_end",
                            now_ns,
                            {"success": event.success, "attempt": event.attempt},
                        )
                    )
                self.retry_attempt = 0
            case CompactionStart(reason=reason):
                self._end_if_open(ops, "compaction", now_ns, "superseded by another compaction")
                self.compaction_reason = reason
                self._start(
                    ops,
                    "compaction",
                    "compaction",
                    "run" if "run" in self.open else None,
                    now_ns,
                    {"pitrio.compaction.reason": reason},
                )
            case CompactionEnd():
                self._end_compaction(ops, event, now_ns)
            case SummarizationRetryScheduled():
                if "compaction" in self.open:
                    ops.append(
                        AddEvent(
                            "compaction",
                            "summarization_retry_scheduled",
                            now_ns,
                            {
                                "attempt": event.attempt,
                                "delay_ms": event.delay_ms,
                                "error": _clip(event.error_message),
                            },
                        )
                    )
            case AgentSettled():
                self._settle(ops, now_ns)
            case _:
                pass
        return ops

    def close(self, now_ns: int, reason: str = "session closed") -> list[Operation]:
        """End every open span (the session ended, or its event stream did)."""
        ops: list[Operation] = []
        self._close_children(ops, now_ns, reason)
        for key in ("compaction", "run"):
            self._end_if_open(ops, key, now_ns, reason)
        return ops

    def current(self) -> str | None:
        """The key of the innermost open span a log line of this session belongs to."""
        return next((key for key in CURRENT_ORDER if key in self.open), None)

    # -- runs ------------------------------------------------------------------------------

    def _start_run(self, ops: list[Operation], now_ns: int) -> None:
        if "run" in self.open:
            return
        self.turns = self.requests = self.tool_calls = self.retries = 0
        self.last_stop = self.last_error = None
        self._start(
            ops,
            "run",
            "invoke_agent pitrio",
            None,
            now_ns,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "pitrio",
                "gen_ai.conversation.id": self.session_id,
                "pitrio.session.id": self.session_id,
            },
        )
        # A compaction that began before the run (not a thing pi does) stays a root span.

    def _settle(self, ops: list[Operation], now_ns: int) -> None:
        if "run" not in self.open:
            return
        self._close_children(ops, now_ns, "run settled first")
        self._end_if_open(ops, "compaction", now_ns, "run settled first")
        start = self.open["run"]
        outcome = self.last_stop or "none"
        error = self.last_error if self.last_stop in _FAILED_STOPS else None
        if self.last_stop == "aborted":
            error = self.last_error or "aborted"
        self._end(
            ops,
            "run",
            now_ns,
            {
                "pitrio.run.turns": self.turns,
                "pitrio.run.llm_requests": self.requests,
                "pitrio.run.tool_calls": self.tool_calls,
                "pitrio.run.retries": self.retries,
                "pitrio.run.outcome": outcome,
            },
            error,
        )
        ops.append(Measure("pitrio.runs", 1, {"outcome": outcome}))
        ops.append(Measure("pitrio.run.duration", _seconds(start, now_ns), {"outcome": outcome}))

    # -- LLM requests ----------------------------------------------------------------------

    def _start_request(self, ops: list[Operation], message: AssistantMessage, now_ns: int) -> None:
        self._end_if_open(ops, "llm", now_ns, "request ended without its message")
        start = self.request_ready_ns if self.request_ready_ns is not None else now_ns
        self.first_token_ns = None
        parent = "turn" if "turn" in self.open else "run" if "run" in self.open else None
        self._start(
            ops,
            "llm",
            f"chat {message.model}",
            parent,
            start,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": message.provider,
                "gen_ai.request.model": message.model,
                "pitrio.llm.api": message.api,
                "pitrio.retry.attempt": self.retry_attempt,
            },
        )

    def _end_request(self, ops: list[Operation], message: AssistantMessage, now_ns: int) -> None:
        start = self.open["llm"]
        usage = message.usage
        stop = message.stop_reason
        attributes: dict[str, AttrValue] = {
            "gen_ai.response.model": message.response_model or message.model,
            "gen_ai.response.finish_reasons": (stop,),
            "gen_ai.usage.input_tokens": usage.input,
            "gen_ai.usage.output_tokens": usage.output,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write,
            "pitrio.llm.cost_usd": usage.cost.total,
        }
        if message.response_id:
            attributes["gen_ai.response.id"] = message.response_id
        if self.first_token_ns is not None:
            ttft = _seconds(start, self.first_token_ns)
            attributes["pitrio.llm.time_to_first_token_ms"] = round(ttft * 1000, 3)
        error = None
        if stop in _FAILED_STOPS:
            error = _clip(message.error_message or stop)
            attributes["error.type"] = stop
        self._end(ops, "llm", now_ns, attributes, error)
        self.requests += 1
        self.last_stop, self.last_error = stop, message.error_message
        self.request_ready_ns = None
        model = {"gen_ai.provider.name": message.provider, "gen_ai.request.model": message.model}
        ops.append(Measure("pitrio.llm.requests", 1, {**model, "outcome": stop}))
        ops.append(Measure("pitrio.llm.duration", _seconds(start, now_ns), model))
        if self.first_token_ns is not None:
            ops.append(
                Measure(
                    "pitrio.llm.time_to_first_token", _seconds(start, self.first_token_ns), model
                )
            )
        for kind, count in (
            ("input", usage.input),
            ("output", usage.output),
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
        ):
            if count:
                ops.append(
                    Measure("pitrio.llm.tokens", count, {**model, "gen_ai.token.type": kind})
                )
        if usage.cost.total:
            ops.append(Measure("pitrio.llm.cost", usage.cost.total, model))

    # -- tools and compaction --------------------------------------------------------------

    def _end_tool(self, ops: list[Operation], event: ToolExecutionEnd, now_ns: int) -> None:
        key = f"tool:{event.tool_call_id}"
        self.tool_names.pop(event.tool_call_id, None)
        if key not in self.open:
            return
        start = self.open[key]
        error = _clip(text_of(event.result.content) or "tool error") if event.is_error else None
        self._end(ops, key, now_ns, {"pitrio.tool.is_error": event.is_error}, error)
        self.tool_calls += 1
        tool = {"gen_ai.tool.name": event.tool_name}
        ops.append(Measure("pitrio.tool.calls", 1, {**tool, "error": event.is_error}))
        ops.append(Measure("pitrio.tool.duration", _seconds(start, now_ns), tool))

    def _end_compaction(self, ops: list[Operation], event: CompactionEnd, now_ns: int) -> None:
        if "compaction" not in self.open:
            return
        start = self.open["compaction"]
        attributes: dict[str, AttrValue] = {
            "pitrio.compaction.aborted": event.aborted,
            "pitrio.compaction.will_retry": event.will_retry,
        }
        if event.result is not None:
            attributes["pitrio.compaction.tokens_before"] = event.result.tokens_before
        outcome = "aborted" if event.aborted else "error" if event.error_message else "ok"
        error = None if outcome == "ok" else _clip(event.error_message or outcome)
        self._end(ops, "compaction", now_ns, attributes, error)
        labels = {"pitrio.compaction.reason": event.reason, "outcome": outcome}
        ops.append(Measure("pitrio.compactions", 1, labels))
        ops.append(Measure("pitrio.compaction.duration", _seconds(start, now_ns), labels))

    # -- span bookkeeping ------------------------------------------------------------------

    def _start(
        self,
        ops: list[Operation],
        key: str,
        name: str,
        parent: str | None,
        now_ns: int,
        attributes: Attributes,
    ) -> None:
        self.open[key] = now_ns
        ops.append(
            StartSpan(key, name, parent if parent in self.open else None, now_ns, attributes)
        )

    def _end(
        self,
        ops: list[Operation],
        key: str,
        now_ns: int,
        attributes: Attributes | None = None,
        error: str | None = None,
    ) -> None:
        del self.open[key]
        ops.append(EndSpan(key, now_ns, attributes or {}, error))

    def _end_if_open(self, ops: list[Operation], key: str, now_ns: int, error: str | None) -> None:
        if key in self.open:
            self._end(ops, key, now_ns, None, error)

    def _close_children(self, ops: list[Operation], now_ns: int, reason: str) -> None:
        for key in [k for k in self.open if k.startswith("tool:")]:
            self._end(ops, key, now_ns, None, reason)
        self.tool_names.clear()
        for key in _CLOSE_ORDER[:2]:  # llm, turn
            self._end_if_open(ops, key, now_ns, reason)
        self._end_if_open(ops, "retry", now_ns, reason)
