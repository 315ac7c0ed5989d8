"""``pitrio.logs``: events and their JSON and text lines."""

from __future__ import annotations

import io
import json
import logging

import pytest

from pitrio import logs


@pytest.fixture
def restore_root() -> object:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_time_level_logger_event_and_fields(restore_root: object) -> None:
    out = io.StringIO()
    logs.configure("info", "json", out)
    log = logging.getLogger("pitrio.test")
    logs.event(log, "run_end", session="s", usage={"input": 3})
    log.warning("plain %s", "text")
    logs.event(log, "hidden", logging.DEBUG, x=1)
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed")
    first, second, third = (json.loads(line) for line in out.getvalue().splitlines())
    assert set(first) == {"time", "level", "logger", "event", "fields"}
    assert first["time"].endswith("Z") and first["level"] == "info"
    assert first["logger"] == "pitrio.test" and first["event"] == "run_end"
    assert first["fields"] == {"session": "s", "usage": {"input": 3}}
    assert second["event"] == "message" and second["fields"] == {"message": "plain text"}
    assert second["level"] == "warning"
    assert third["level"] == "error" and "ValueError: boom" in third["fields"]["exception"]


def test_text_lines_are_key_value(restore_root: object) -> None:
    out = io.StringIO()
    logs.configure("debug", "text", out)
    log = logging.getLogger("pitrio.test")
    logs.event(log, "client_connected", logging.DEBUG, remote="127.0.0.1:5", note="two words")
    log.info("listening")
    event_line, plain_line = out.getvalue().splitlines()
    stamp, level, rest = event_line.split(" ", 2)
    assert stamp.endswith("Z") and level == "debug"
    assert rest.strip() == 'pitrio.test client_connected remote=127.0.0.1:5 note="two words"'
    assert plain_line.endswith("info    pitrio.test listening")


def test_a_disabled_event_costs_no_record(restore_root: object) -> None:
    logs.configure("warning", "json", io.StringIO())
    made: list[logging.LogRecord] = []
    logging.getLogger("pitrio.test").addFilter(lambda r: made.append(r) or True)
    logs.event(logging.getLogger("pitrio.test"), "run_end", session="s")
    assert made == []


def test_configure_refuses_unknown_levels_and_formats() -> None:
    with pytest.raises(ValueError, match="unknown log level 'loud'"):
        logs.configure("loud", "json")
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        logs.configure("info", "xml")


def test_a_record_of_a_session_with_an_open_span_carries_its_ids(restore_root: object) -> None:
    from opentelemetry.trace import SpanContext, TraceFlags

    from pitrio.telemetry import log_context

    out = io.StringIO()
    logs.configure("info", "json", out)
    log = logging.getLogger("pitrio.test")
    context = SpanContext(
        trace_id=0x1234, span_id=0xABC, is_remote=False, trace_flags=TraceFlags(1)
    )
    log_context.remember("traced", context)
    try:
        logs.event(log, "run_start", session="traced")
        logs.event(log, "run_start", session="untraced")
    finally:
        log_context.forget("traced")
    traced, untraced = (json.loads(line) for line in out.getvalue().splitlines())
    assert traced["trace_id"] == format(0x1234, "032x")
    assert traced["span_id"] == format(0xABC, "016x")
    assert "trace_id" not in untraced and "span_id" not in untraced
