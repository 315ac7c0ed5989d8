"""The pure mapper from session events to span and metric operations, fed by hand."""

from __future__ import annotations

from pitrio.messages.agent import AgentToolResult, AssistantMessage, Cost, Usage, UserMessage
from pitrio.messages.content import TextContent
from pitrio.messages.entries import CompactionResult
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
from pitrio.messages.stream import TextDelta
from pitrio.telemetry.mapper import (
    AddEvent,
    EndSpan,
    Measure,
    Operation,
    RunMapper,
    StartSpan,
)

MS = 1_000_000


def _assistant(stop: str = "stop", error: str | None = None) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text="hi"),),
        api="faux-api",
        provider="faux",
        model="m1",
        usage=Usage(input=10, output=5, cache_read=3, cost=Cost(total=0.25)),
        stop_reason=stop,  # type: ignore[arg-type]
        error_message=error,
        timestamp=0,
    )


def _user() -> UserMessage:
    return UserMessage(content="hello", timestamp=0)


def _feed(mapper: RunMapper, timeline: list[tuple[int, AgentSessionEvent]]) -> list[Operation]:
    ops: list[Operation] = []
    for at_ms, event in timeline:
        ops.extend(mapper.feed(event, at_ms * MS))
    return ops


def _spans(ops: list[Operation]) -> list[tuple[str, str, str | None]]:
    return [(op.key, op.name, op.parent) for op in ops if isinstance(op, StartSpan)]


def _ends(ops: list[Operation]) -> dict[str, EndSpan]:
    return {op.key: op for op in ops if isinstance(op, EndSpan)}


def _measures(ops: list[Operation], name: str) -> list[Measure]:
    return [op for op in ops if isinstance(op, Measure) and op.instrument == name]


def test_a_turn_times_its_request_from_the_last_message_before_it() -> None:
    reply = _assistant()
    ops = _feed(
        RunMapper("s1"),
        [
            (0, AgentStart()),
            (1, TurnStart()),
            (2, MessageStart(message=_user())),
            (3, MessageEnd(message=_user())),
            (10, MessageStart(message=reply)),
            (
                15,
                MessageUpdate(
                    assistant_message_event=TextDelta(content_index=0, delta="h", partial=reply),
                    message=reply,
                ),
            ),
            (
                20,
                MessageUpdate(
                    assistant_message_event=TextDelta(content_index=0, delta="i", partial=reply),
                    message=reply,
                ),
            ),
            (40, MessageEnd(message=reply)),
            (41, TurnEnd(message=reply, tool_results=())),
            (42, AgentEnd(messages=(reply,))),
            (50, AgentSettled()),
        ],
    )
    assert _spans(ops) == [
        ("run", "invoke_agent pitrio", None),
        ("turn", "turn", "run"),
        ("llm", "chat m1", "turn"),
    ]
    start = next(op for op in ops if isinstance(op, StartSpan) and op.key == "llm")
    assert start.start_ns == 3 * MS  # sent after the user message, not when the reply began
    llm = _ends(ops)["llm"]
    assert llm.end_ns == 40 * MS and llm.error is None
    assert llm.attributes["pitrio.llm.time_to_first_token_ms"] == 12.0  # 3 ms -> 15 ms
    assert llm.attributes["gen_ai.usage.input_tokens"] == 10
    assert llm.attributes["gen_ai.usage.cache_read.input_tokens"] == 3
    assert llm.attributes["pitrio.llm.cost_usd"] == 0.25
    assert [m.value for m in _measures(ops, "pitrio.llm.time_to_first_token")] == [0.012]
    assert [m.value for m in _measures(ops, "pitrio.llm.duration")] == [0.037]
    tokens = {
        str(m.attributes["gen_ai.token.type"]): m.value for m in _measures(ops, "pitrio.llm.tokens")
    }
    assert tokens == {"input": 10, "output": 5, "cache_read": 3}  # no zero cache_write point
    assert [m.value for m in _measures(ops, "pitrio.llm.cost")] == [0.25]
    run = _ends(ops)["run"]
    assert run.end_ns == 50 * MS  # agent_settled, not agent_end, closes the run
    assert run.attributes["pitrio.run.outcome"] == "stop" and run.error is None
    assert [m.value for m in _measures(ops, "pitrio.run.duration")] == [0.05]
    assert any(isinstance(op, AddEvent) and op.name == "agent_end" for op in ops)


def test_parallel_tool_calls_are_siblings_and_an_error_marks_only_its_own() -> None:
    reply = _assistant("toolUse")
    failed = AgentToolResult(content=(TextContent(text="ENOENT: no such file"),))
    ops = _feed(
        RunMapper("s1"),
        [
            (0, AgentStart()),
            (0, TurnStart()),
            (1, MessageStart(message=reply)),
            (2, MessageEnd(message=reply)),
            (3, ToolExecutionStart(tool_call_id="a", tool_name="read", args={})),
            (3, ToolExecutionStart(tool_call_id="b", tool_name="bash", args={})),
            (5, ToolExecutionEnd(tool_call_id="b", tool_name="bash", result=failed, is_error=True)),
            (
                9,
                ToolExecutionEnd(
                    tool_call_id="a",
                    tool_name="read",
                    result=AgentToolResult(content=()),
                    is_error=False,
                ),
            ),
        ],
    )
    assert _spans(ops)[-2:] == [
        ("tool:a", "execute_tool read", "turn"),
        ("tool:b", "execute_tool bash", "turn"),
    ]
    ends = _ends(ops)
    assert ends["tool:b"].error == "ENOENT: no such file"
    assert ends["tool:a"].error is None
    calls = {
        (str(m.attributes["gen_ai.tool.name"]), m.attributes["error"])
        for m in _measures(ops, "pitrio.tool.calls")
    }
    assert calls == {("read", False), ("bash", True)}
    assert sorted(m.value for m in _measures(ops, "pitrio.tool.duration")) == [0.002, 0.006]


def test_a_retry_spans_the_back_off_and_numbers_the_next_request() -> None:
    bad, good = _assistant("error", "503 Service Unavailable"), _assistant()
    mapper = RunMapper("s1")
    ops = _feed(
        mapper,
        [
            (0, AgentStart()),
            (0, TurnStart()),
            (1, MessageStart(message=bad)),
            (2, MessageEnd(message=bad)),
            (2, TurnEnd(message=bad, tool_results=())),
            (3, AgentEnd(messages=(bad,), will_retry=True)),
            (
                3,
                AutoRetryStart(
                    attempt=1,
                    max_attempts=3,
                    delay_ms=2000,
                    error_message="503 Service Unavailable",
                ),
            ),
            (2003, AgentStart()),
            (2003, TurnStart()),
            (2004, MessageStart(message=good)),
            (2005, MessageEnd(message=good)),
            (2005, AutoRetryEnd(success=True, attempt=1)),
            (2006, TurnEnd(message=good, tool_results=())),
            (2006, AgentEnd(messages=(good,))),
            (2007, AgentSettled()),
        ],
    )
    starts = [op for op in ops if isinstance(op, StartSpan)]
    assert [(s.key, s.parent) for s in starts] == [
        ("run", None),
        ("turn", "run"),
        ("llm", "turn"),
        ("retry", "run"),
        ("turn", "run"),
        ("llm", "turn"),
    ]  # one run across the retry: the second agent_start opens no new one
    assert [s.attributes["pitrio.retry.attempt"] for s in starts if s.key == "llm"] == [0, 1]
    ends = [op for op in ops if isinstance(op, EndSpan)]
    retry = next(e for e in ends if e.key == "retry")
    assert retry.end_ns == 2003 * MS and retry.error is None
    first_llm = next(e for e in ends if e.key == "llm")
    assert first_llm.error == "503 Service Unavailable"
    assert first_llm.attributes["error.type"] == "error"
    run = next(e for e in ends if e.key == "run")
    assert run.attributes["pitrio.run.retries"] == 1 and run.error is None
    outcomes = [m.attributes["outcome"] for m in _measures(ops, "pitrio.llm.requests")]
    assert outcomes == ["error", "stop"]
    assert len(_measures(ops, "pitrio.retries")) == 1


def test_an_exhausted_retry_fails_the_run() -> None:
    bad = _assistant("error", "overloaded")
    ops = _feed(
        RunMapper("s1"),
        [
            (0, AgentStart()),
            (0, TurnStart()),
            (1, MessageEnd(message=bad)),  # no message_start: the request span still exists
            (1, TurnEnd(message=bad, tool_results=())),
            (2, AgentEnd(messages=(bad,))),
            (2, AutoRetryEnd(success=False, attempt=2, final_error="overloaded")),
            (3, AgentSettled()),
        ],
    )
    ends = _ends(ops)
    assert "llm" in ends and ends["llm"].error == "overloaded"
    assert ends["run"].error == "overloaded"
    assert ends["run"].attributes["pitrio.run.outcome"] == "error"


def test_compaction_inside_a_run_is_its_child_and_outside_a_root() -> None:
    result = CompactionResult(summary="s", first_kept_entry_id="e1", tokens_before=1234)
    ops = _feed(
        RunMapper("s1"),
        [
            (0, AgentStart()),
            (1, AgentEnd(messages=())),
            (2, CompactionStart(reason="threshold")),
            (
                3,
                SummarizationRetryScheduled(
                    attempt=1, max_attempts=3, delay_ms=10, error_message="429"
                ),
            ),
            (9, CompactionEnd(reason="threshold", result=result, aborted=False, will_retry=False)),
            (10, AgentSettled()),
            (20, CompactionStart(reason="manual")),
            (25, CompactionEnd(reason="manual", aborted=True, will_retry=False)),
        ],
    )
    assert [(k, p) for k, _, p in _spans(ops)] == [
        ("run", None),
        ("compaction", "run"),
        ("compaction", None),
    ]
    ends = [op for op in ops if isinstance(op, EndSpan) and op.key == "compaction"]
    assert ends[0].attributes["pitrio.compaction.tokens_before"] == 1234 and ends[0].error is None
    assert ends[1].error == "aborted"
    assert [m.attributes["outcome"] for m in _measures(ops, "pitrio.compactions")] == [
        "ok",
        "aborted",
    ]
    assert any(
        isinstance(op, AddEvent) and op.name == "summarization_retry_scheduled" for op in ops
    )


def test_close_ends_children_before_parents_and_names_the_reason() -> None:
    mapper = RunMapper("s1")
    reply = _assistant()
    _feed(
        mapper,
        [
            (0, AgentStart()),
            (0, TurnStart()),
            (1, MessageStart(message=reply)),
            (2, ToolExecutionStart(tool_call_id="a", tool_name="read", args={})),
        ],
    )
    assert mapper.current() == "llm"
    ops = mapper.close(5 * MS, "session closed")
    assert [(op.key, op.error) for op in ops if isinstance(op, EndSpan)] == [
        ("tool:a", "session closed"),
        ("llm", "session closed"),
        ("turn", "session closed"),
        ("run", "session closed"),
    ]
    assert mapper.open == {} and mapper.current() is None
    assert mapper.close(6 * MS) == []  # nothing left to end twice


def test_events_outside_a_run_open_nothing_and_a_settle_without_a_run_is_ignored() -> None:
    mapper = RunMapper("s1")
    assert mapper.feed(AgentSettled(), 0) == []
    assert mapper.feed(MessageEnd(message=_user()), 0) == []
    assert (
        mapper.feed(
            ToolExecutionEnd(
                tool_call_id="x", tool_name="t", result=AgentToolResult(content=()), is_error=False
            ),
            0,
        )
        == []
    )
