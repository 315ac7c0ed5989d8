"""Log records correlated with traces: a :class:`logging.Filter` adding ``trace_id``/``span_id``.

pitrio's spans are made by an observer task, not entered as the "current span" of the actors
that log, so a record finds its span in two ways: the OpenTelemetry current span of the
logging task if there is one (an embedding program's own span), else the innermost open span
of the session the record names (``record.session_id``, or ``session`` among the fields of a
structured record, ``record.pitrio_fields``). Observers keep that last table up to date
(:func:`remember`). The filter never drops a record; without a span both ids are empty
strings, so a formatter can always name them.

The filter works whether telemetry is on or not (the OpenTelemetry API, a dependency, is
imported on the first record it sees; with telemetry off the ids are simply empty).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

_SESSIONS: dict[str, Any] = {}
"""Session id -> the ``SpanContext`` its log lines belong to now (written by observers in the
trio thread; a plain dict's get and set are atomic, so a logging thread may read it)."""


def remember(session_id: str, span_context: Any) -> None:
    """Record the span a session's log lines belong to from now on (``None``: none)."""
    if span_context is None:
        _SESSIONS.pop(session_id, None)
    else:
        _SESSIONS[session_id] = span_context


def forget(session_id: str) -> None:
    """The session ended: its lines belong to no span any more."""
    _SESSIONS.pop(session_id, None)


def session_of(record: logging.LogRecord) -> str | None:
    """The session a record is about, if it says so."""
    value = getattr(record, "session_id", None)
    if isinstance(value, str):
        return value
    fields = getattr(record, "pitrio_fields", None)
    if isinstance(fields, Mapping):
        value = fields.get("session") or fields.get("session_id")
        if isinstance(value, str):
            return value
    return None


class TraceContextFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` (lowercase hex, or ``""``) to every record.

    ``session_of`` picks the session a record is about (default :func:`session_of`). Install it
    on a handler (``handler.addFilter(TraceContextFilter())``) so every record through that
    handler carries the ids, whichever logger made it.
    """

    def __init__(self, session_of: Callable[[logging.LogRecord], str | None] = session_of):
        super().__init__()
        self._session_of = session_of

    def filter(self, record: logging.LogRecord) -> bool:
        """Annotate ``record``; always keep it."""
        context = _current_span_context()
        if context is None:
            session = self._session_of(record)
            context = None if session is None else _SESSIONS.get(session)
        if context is None:
            record.trace_id = record.span_id = ""
        else:
            record.trace_id = format(context.trace_id, "032x")
            record.span_id = format(context.span_id, "016x")
        return True


def _current_span_context() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:  # pragma: no cover - opentelemetry-api is a dependency
        return None
    context = trace.get_current_span().get_span_context()
    return context if context.is_valid else None
