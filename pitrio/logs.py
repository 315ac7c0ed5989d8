"""Structured logs on the standard library's :mod:`logging`: events, and their two formats.

An *event* is a log record with a name and fields, made by :func:`event`::

    event(log, "run_end", session="...", duration_ms=812, usage={...})

:class:`JsonFormatter` writes every record as one JSON object per line,
``{"time", "level", "logger", "event", "fields"}``; a record made by a plain ``log.info("...")``
call becomes the event ``"message"`` with its text in ``fields.message``. :class:`TextFormatter`
writes the same as one readable line (``time level logger event key=value ...``).
:func:`configure` installs one of them on the root logger (``pitrio serve --log-level``,
``--log-format``).

Cheap by construction: :func:`event` returns before building anything when its level is
disabled, and callers only log per run, per connection or per failure, never per delta.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, TextIO

from pitrio.telemetry.log_context import TraceContextFilter

LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error")
"""The levels ``--log-level`` takes (lowest first)."""
FORMATS: tuple[str, ...] = ("json", "text")
"""The formats ``--log-format`` takes."""

_FIELDS = "pitrio_fields"
_EVENT = "pitrio_event"
PLAIN_EVENT = "message"
"""The event name of a record made by a plain logging call."""


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log the event ``name`` with ``fields`` (JSON-serialisable values) at ``level``."""
    if not logger.isEnabledFor(level):
        return
    logger.log(level, name, extra={_EVENT: name, _FIELDS: fields})


def _time(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record_fields(
    record: logging.LogRecord, formatter: logging.Formatter
) -> tuple[str, dict[str, Any]]:
    """The event name and fields of ``record`` (a plain record's text is ``fields.message``;
    an exception adds ``fields.exception``, its traceback as text; a worker of ``pitrio
    serve --workers`` adds ``fields.worker``, its slot)."""
    name = getattr(record, _EVENT, None)
    fields: dict[str, Any]
    if isinstance(name, str):
        fields = dict(getattr(record, _FIELDS, None) or {})
    else:
        name = PLAIN_EVENT
        fields = {"message": record.getMessage()}
    worker = getattr(record, "worker", None)
    if worker is not None:  # set by WorkerFilter in a worker of ``serve --workers``
        fields["worker"] = worker
    if record.exc_info:
        fields["exception"] = formatter.formatException(record.exc_info)
    return name, fields


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``event``,
    ``fields``."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = record_fields(record, self)
        entry = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": name,
            "fields": fields,
        }
        # Set by TraceContextFilter when the record belongs to a span (telemetry on).
        trace_id = getattr(record, "trace_id", "")
        if trace_id:
            entry["trace_id"] = trace_id
            entry["span_id"] = getattr(record, "span_id", "")
        # default=str: a field that is not JSON (a Path, an exception) is written as its text
        # rather than losing the whole line.
        return json.dumps(entry, ensure_ascii=False, default=str)


def _text_value(value: Any) -> str:
    if isinstance(value, str) and value and not any(c.isspace() or c in '"=' for c in value):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time level logger event key=value ...`` on one line (values with spaces quoted as
    JSON); a plain record shows its text after the logger name."""

    def format(self, record: logging.LogRecord) -> str:
        name, fields = record_fields(record, self)
        head = f"{_time(record)} {record.levelname.lower():<7} {record.name}"
        if name == PLAIN_EVENT and set(fields) <= {"message", "exception"}:
            line = f"{head} {fields['message']}"
            if "exception" in fields:
                line += "\n" + fields["exception"]
            return line
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        return f"{head} {name} {pairs}".rstrip()


def configure(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> None:
    """Send every record at ``level`` or above to ``stream`` (stderr) in ``fmt``.

    Raises :class:`ValueError` for a level or format not in :data:`LEVELS` / :data:`FORMATS`.
    """
    if level.lower() not in LEVELS:
        raise ValueError(f"unknown log level {level!r} (one of {', '.join(LEVELS)})")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (one of {', '.join(FORMATS)})")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    # Records about a session with an open span carry its trace and span ids (empty, and so
    # left out of the line, when telemetry is off).
    handler.addFilter(TraceContextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class WorkerFilter(logging.Filter):
    """Names the worker (of ``pitrio serve --workers``) on every record it passes."""

    def __init__(self, worker: int) -> None:
        super().__init__()
        self.worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        """Adds ``worker`` to the record; passes every record."""
        record.worker = self.worker
        return True


def name_worker(worker: int) -> None:
    """Every line logged from now on names ``worker`` (call after :func:`configure`)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(WorkerFilter(worker))
