"""The logging filter: trace and span ids on records, from the current span or the session's."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
import trio
import trio.testing
from opentelemetry.sdk.trace import TracerProvider

import pitrio
from pitrio import telemetry
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.telemetry import log_context
from pitrio.telemetry.log_context import TraceContextFilter
from tests.telemetry.conftest import Memory


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("pitrio.test", logging.INFO, __file__, 1, "line", None, None)
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_without_a_span_the_ids_are_empty_and_the_record_is_kept() -> None:
    record = _record(session_id="nobody")
    assert TraceContextFilter().filter(record) is True
    assert (record.trace_id, record.span_id) == ("", "")  # type: ignore[attr-defined]


def test_the_current_span_of_the_logging_code_wins() -> None:
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("outer") as span:
        record = _record()
        TraceContextFilter().filter(record)
    context = span.get_span_context()
    assert record.trace_id == format(context.trace_id, "032x")  # type: ignore[attr-defined]
    assert record.span_id == format(context.span_id, "016x")  # type: ignore[attr-defined]


async def test_a_sessions_log_lines_carry_its_open_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, memory: Memory
) -> None:
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(tmp_path / "agent"))
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(TraceContextFilter())
    handler.setFormatter(logging.Formatter("%(message)s trace=%(trace_id)s span=%(span_id)s"))
    log = logging.getLogger("pitrio.test.telemetry")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    # The second chunk waits far longer than the test: the request is mid-stream meanwhile.
    faux = FauxProvider([FauxReply(text="slow " * 20, chunk_delay=600)])
    try:
        with telemetry.using(memory.telemetry):
            async with pitrio.create_session(
                cwd=str(tmp_path), model="faux/faux-1", faux=faux, persist=False
            ) as session:
                session_id = session.header.id
                events = await session.subscribe()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.prompt, "hi")
                    async for item in events:
                        if item.event.type == "message_update":
                            break
                    await trio.testing.wait_all_tasks_blocked()
                    log.info("during", extra={"session_id": session_id})
                    log.info("structured", extra={"pitrio_fields": {"session": session_id}})
                    await session.abort()
                await session.wait_for_idle()
                await trio.testing.wait_all_tasks_blocked()
                log.info("after", extra={"session_id": session_id})
    finally:
        log.removeHandler(handler)
    spans = {span.name: span for span in memory.finished()}
    chat = spans["chat faux-1"].context
    assert chat is not None
    expected = f"trace={chat.trace_id:032x} span={chat.span_id:016x}"
    lines = out.getvalue().splitlines()
    assert lines[0] == f"during {expected}"  # the request streaming then
    assert lines[1] == f"structured {expected}"
    assert lines[2] == "after trace= span="  # the run is over
    assert session_id not in log_context._SESSIONS
