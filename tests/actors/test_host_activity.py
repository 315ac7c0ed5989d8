"""A hosted session's activity (pitrio/actors/host/activity.py): a run in progress, the
messages queued, the host events of a start and a settle, and the run log's lines."""

from __future__ import annotations

import logging

import pytest

from pitrio.actors.host.activity import Activity
from pitrio.actors.host.context import HostEvent
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent
from pitrio.messages.events import (
    AgentSettled,
    AgentStart,
    MessageEnd,
    QueueUpdate,
    ToolExecutionEnd,
)
from tests.actors.test_supervisor_support import assistant, failed


def tool_end(text: str, *, is_error: bool) -> ToolExecutionEnd:
    result = AgentToolResult(content=(TextContent(text=text), TextContent(text="(exit 1)")))
    return ToolExecutionEnd(tool_call_id="c1", tool_name="bash", result=result, is_error=is_error)


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, dict[str, object]]]:
    records = [r for r in caplog.records if r.name == "pitrio.host"]
    return [(r.getMessage(), dict(getattr(r, "pitrio_fields", {}))) for r in records]


def test_a_run_from_start_to_settle(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pitrio.host")
    told: list[HostEvent] = []
    activity = Activity("s1", told.append)
    assert not activity.running and activity.queued == 0
    activity.observe(AgentStart(), 10.0)
    activity.observe(AgentStart(), 10.1)  # a retry's start inside the same run: no new run
    assert activity.running and told == [{"type": "session_busy", "sessionId": "s1"}]
    activity.observe(QueueUpdate(steering=("a",), follow_up=("b", "c")), 10.2)
    assert activity.queued == 3
    activity.observe(tool_end("fine", is_error=False), 10.3)
    activity.observe(tool_end("boom", is_error=True), 10.4)
    activity.observe(MessageEnd(message=failed("429 Rate limit")), 10.5)
    activity.observe(MessageEnd(message=assistant()), 10.6)
    activity.observe(AgentSettled(), 11.0)
    assert not activity.running
    assert told[1:] == [{"type": "session_idle", "sessionId": "s1"}]
    lines = logged(caplog)
    assert [name for name, _ in lines] == ["run_start", "tool_failed", "provider_error", "run_end"]
    assert lines[1][1]["error"] == "boom (exit 1)"  # the text the model was told
    assert lines[3][1]["duration_ms"] == 1000 and lines[3][1]["turns"] == 2
    assert activity.runs.runs == 1


def test_a_tree_that_ends_leaves_no_run_in_progress(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pitrio.host")
    told: list[HostEvent] = []
    activity = Activity("s1", told.append)
    activity.observe(AgentStart(), 1.0)
    activity.ended()  # a crash or a stop: nothing settled, nobody told
    assert not activity.running and len(told) == 1
    activity.observe(AgentStart(), 2.0)  # the restarted tree's first run is a new run
    assert activity.running and activity.runs.runs == 2
    assert [name for name, _ in logged(caplog)] == ["run_start", "run_start"]
