"""Trace record/replay (issue 10): the actor hook, the recorder, the format, the summary, and
recorded sessions replayed through a real session (actors, store, supervisor policies)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.model_router import FauxProvider, FauxReply, RouterConfig, start_model_router
from pitrio.actors.model_router.providers.faux import FauxToolCall
from pitrio.actors.session.bootstrap import SessionOptions, StartedSession, start_session
from pitrio.actors.tool_executor import AgentTool
from pitrio.actors.tool_executor.tool import UpdateFn, text_result
from pitrio.actors.trace.compare import first_divergence
from pitrio.actors.trace.graph import OUTSIDE, actor_graph, render_graph
from pitrio.actors.trace.recorder import Tracer
from pitrio.actors.trace.records import (
    TraceFormatError,
    decode_lines,
    decode_stream_events,
    diff,
    encode_stream_events,
    patch,
)
from pitrio.actors.trace.replay import ReplayError, load_trace, replay_records
from pitrio.actors.trace.summary import render_summary, render_timeline, summarise
from pitrio.actors.trace.tap import classify_input, record_to_file
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentToolResult
from tests.stray_cancel import no_stray_cancel

# -- the actor base's hook ---------------------------------------------------------------------


@attrs.frozen
class Add:
    amount: int
    reply: Reply[int]


class Counter(Actor[Add]):
    def __init__(self) -> None:
        super().__init__(name="counter", capacity=2)
        self.gate = trio.Event()
        self.total = 0

    async def handle(self, command: Add) -> None:
        await self.gate.wait()
        self.total += command.amount
        command.reply.set(self.total)


class CounterHandle(Handle[Add]):
    async def add(self, amount: int) -> int:
        return await self.ask(lambda reply: Add(amount, reply))


class ListTracer:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int, int]] = []
        self.handled: list[int] = []

    def on_send(self, actor: str, command: object, depth: int) -> None:
        assert isinstance(command, Add)
        self.seen.append(("send", actor, command.amount, depth))

    def on_receive(self, actor: str, command: object, depth: int) -> None:
        assert isinstance(command, Add)
        self.seen.append(("recv", actor, command.amount, depth))

    def on_handled(self, actor: str, command: object) -> None:
        assert isinstance(command, Add)
        self.handled.append(command.amount)


async def test_hook_reports_sends_before_they_block_and_receives_with_depth() -> None:
    tracer = ListTracer()
    async with trio.open_nursery() as nursery:
        actor = Counter()
        handle = CounterHandle(await nursery.start(actor.run))
        handle.trace(tracer)
        for amount in (1, 2, 3, 4):
            nursery.start_soon(handle.add, amount)
            await trio.testing.wait_all_tasks_blocked()
        # The actor holds 1; 2 and 3 fill the inbox (capacity 2); 4 is offered to a full one.
        assert tracer.seen == [
            ("send", "counter", 1, 0),
            ("recv", "counter", 1, 0),
            ("send", "counter", 2, 0),
            ("send", "counter", 3, 1),
            ("send", "counter", 4, 2),
        ]
        assert tracer.handled == []  # 1 is still being handled
        actor.gate.set()
        await trio.testing.wait_all_tasks_blocked()
        assert tracer.seen[5:] == [
            ("recv", "counter", 2, 2),  # 4 moved into the inbox as 2 left it
            ("recv", "counter", 3, 1),
            ("recv", "counter", 4, 0),
        ]
        assert tracer.handled == [1, 2, 3, 4]
        handle.trace(None)
        assert await handle.add(5) == 15
        assert len(tracer.seen) == 8  # off again: nothing more reported
        nursery.cancel_scope.cancel()


async def test_traced_sends_copy_leaves_the_shared_actor_untraced() -> None:
    tracer = ListTracer()
    async with trio.open_nursery() as nursery:
        actor = Counter()
        actor.gate.set()
        shared = CounterHandle(await nursery.start(actor.run))
        mine = CounterHandle(shared.traced_sends(tracer))
        await mine.add(1)
        await shared.add(2)  # another caller of the same actor: not this session's traffic
        assert tracer.seen == [("send", "counter", 1, 0)]
        nursery.cancel_scope.cancel()


# -- the recorder's overflow policy ---------------------------------------------------------------


async def test_a_full_tracer_drops_and_counts_then_the_file_says_so(tmp_path: Path) -> None:
    tracer = Tracer(capacity=2)
    for number in range(5):
        tracer.record({"k": "gap", "seq": number, "missing": 0})  # never blocks
    assert tracer.dropped == 3
    path = tmp_path / "t.jsonl"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tracer.write_to, path)
        await trio.testing.wait_all_tasks_blocked()
        tracer.close()
    tracer.record({"k": "gap", "seq": 9, "missing": 0})
    assert tracer.late == 1
    records = load_trace(path)
    assert [r["k"] for r in records] == ["gap", "gap", "dropped"]
    assert records[-1]["count"] == 3


async def test_a_cancelled_writer_keeps_records_made_long_after_its_cancellation(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    # The session's event task may make its last records well after the writer was cancelled
    # (a loaded machine); the writer waits for the close, not for a timer.
    tracer = Tracer()
    path = tmp_path / "t.jsonl"
    may_close = trio.Event()

    async def last_record_then_close() -> None:
        with trio.CancelScope(shield=True):
            await may_close.wait()
        tracer.record({"k": "gap", "seq": 2, "missing": 0})
        tracer.close()

    async def session_tasks(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
        async with trio.open_nursery() as session:
            session.start_soon(tracer.write_to, path)
            session.start_soon(last_record_then_close)
            task_status.started(session.cancel_scope)

    async with trio.open_nursery() as nursery:
        scope = await nursery.start(session_tasks)
        tracer.record({"k": "gap", "seq": 1, "missing": 0})
        while not path.exists() or not path.read_bytes():  # the writer is past its first write
            await trio.testing.wait_all_tasks_blocked()  # (its thread finishes meanwhile)
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(10)  # a long stall before the event task runs again
        await trio.testing.wait_all_tasks_blocked()
        may_close.set()
    assert tracer.late == 0
    assert [r["seq"] for r in load_trace(path)] == [1, 2]


async def test_a_batch_taken_as_the_writer_is_cancelled_is_still_written(tmp_path: Path) -> None:
    # A record handed to the waiting writer, then the cancellation before the writer runs:
    # it takes the record and meets the cancellation as its write starts (a trace lost its
    # last two events that way). The batch must reach the file all the same.
    tracer = Tracer()
    path = tmp_path / "t.jsonl"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(tracer.write_to, path)
        while tracer._receive.statistics().tasks_waiting_receive == 0:  # waits for records
            await trio.testing.wait_all_tasks_blocked()
        tracer.record({"k": "gap", "seq": 1, "missing": 0})  # straight to the waiting writer
        nursery.cancel_scope.cancel()
        tracer.record({"k": "gap", "seq": 2, "missing": 0})
        tracer.close()
    assert tracer.late == 0 and tracer.dropped == 0
    assert [r["seq"] for r in load_trace(path)] == [1, 2]


# -- the format ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_a_difference_patches_back_to_the_value(previous: Any, current: Any) -> None:
    change = orjson.loads(orjson.dumps(diff(previous, current)))  # survives JSON
    assert patch(previous, change) == current


def test_growing_text_is_stored_as_its_new_tail() -> None:
    events = [
        {"type": "text_delta", "delta": "b", "partial": {"content": [{"text": "ab" * 500}]}},
        {"type": "text_delta", "delta": "c", "partial": {"content": [{"text": "ab" * 500 + "c"}]}},
    ]
    items = encode_stream_events(events)
    assert len(orjson.dumps(items[1])) < 200  # the 1,001-character text is not stored again
    assert decode_stream_events(items) == events


def test_a_torn_last_line_is_skipped_but_a_bad_middle_line_is_an_error() -> None:
    good = b'{"k":"gap","t":1,"seq":2,"missing":1}\n'
    assert len(list(decode_lines([good, b'{"k":"ga']))) == 1
    with pytest.raises(TraceFormatError, match="trace:2: not JSON"):
        list(decode_lines([good, b'{"k":\n', good]))
    with pytest.raises(TraceFormatError, match="trace format 99"):
        list(decode_lines([b'{"k":"header","v":99}\n']))


def test_normalisation_renames_fresh_ids_consistently_and_drops_timestamps() -> None:
    def entry(entry_id: str, parent: str | None, stamp: str) -> dict[str, Any]:
        return {
            "type": "entry_appended",
            "entry": {"id": entry_id, "parentId": parent, "timestamp": stamp},
        }

    recorded = [entry("aa", None, "2020"), entry("bb", "aa", "2020")]
    same_shape = [entry("x1", None, "2031"), entry("x2", "x1", "2031")]
    assert first_divergence(recorded, same_shape) is None
    other_parent = [entry("x1", None, "2031"), entry("x2", "x2", "2031")]
    divergence = first_divergence(recorded, other_parent)
    assert divergence is not None
    assert (divergence.index, divergence.path) == (1, "entry.parentId")


def test_normalisation_reads_each_sessions_own_cwd_in_its_system_message() -> None:
    """pi 1.6.0's system message names the cwd; a replay runs in a directory of its own."""

    def system(cwd: str, context: str = "") -> dict[str, Any]:
        sections = {"preamble": "p", "cwd": f"<cwd>\n{cwd}\n</cwd>"}
        if context:
            sections["project_context"] = context
        return {"type": "message_end", "message": {"role": "system", "sections": sections}}

    recorded = [system("/home/u/project")]
    replayed = [system("/tmp/pitrio-replay-1/cwd")]
    assert first_divergence(recorded, replayed) is not None  # without the cwds: differ
    same = {"recorded_cwd": "/home/u/project", "replayed_cwd": "/tmp/pitrio-replay-1/cwd"}
    assert first_divergence(recorded, replayed, **same) is None
    # Only the session's own directory is normalised: another one, or another section, differs.
    elsewhere = [system("/tmp/elsewhere")]
    divergence = first_divergence(recorded, elsewhere, **same)
    assert divergence is not None and divergence.path == "message.sections.cwd"
    with_context = [system("/tmp/pitrio-replay-1/cwd", "AGENTS.md says hi")]
    divergence = first_divergence(recorded, with_context, **same)
    assert divergence is not None and divergence.path == "message.sections.project_context"

    # The compaction estimate counts the system message's characters, the cwd's too.
    def compacted(estimate: int, summary: str = "s") -> dict[str, Any]:
        result = {"summary": summary, "tokensBefore": 9, "estimatedTokensAfter": estimate}
        return {"type": "compaction_end", "result": result}

    assert first_divergence([compacted(1264)], [compacted(1255)]) is not None
    assert first_divergence([compacted(1264)], [compacted(1255)], **same) is None
    divergence = first_divergence([compacted(1264)], [compacted(1255, "t")], **same)
    assert divergence is not None and divergence.path == "result.summary"


def test_summary_pairs_sends_with_receives_and_ranks_waits() -> None:
    records = [
        {"k": "header", "v": 1, "t": 0.0},
        {"k": "msg", "t": 0.0, "actor": "a", "dir": "send", "type": "X", "depth": 0, "n": 1},
        {"k": "msg", "t": 0.1, "actor": "a", "dir": "send", "type": "Y", "depth": 1, "n": 2},
        {"k": "msg", "t": 0.2, "actor": "a", "dir": "recv", "type": "X", "depth": 1, "n": 1},
        {"k": "msg", "t": 1.0, "actor": "a", "dir": "recv", "type": "Y", "depth": 0, "n": 2},
        {"k": "input", "t": 0.0, "op": "prompt", "args": {"text": "hi"}, "seq": 0, "tick": 1},
        {"k": "event", "t": 0.5, "seq": 1, "type": "agent_start", "event": {}},
        {"k": "dropped", "t": 1.0, "count": 2},
    ]
    summary = summarise(records)
    (actor,) = summary.actors
    assert (actor.sent, actor.received, actor.peak_depth) == (2, 2, 1)
    assert [(w.type, round(w.seconds, 3)) for w in summary.longest_waits] == [
        ("Y", 0.9),
        ("X", 0.2),
    ]
    assert actor.depth_over_time[:3] == (0, 1, 1) and actor.depth_over_time[-1] == 0
    text = render_summary(summary)
    assert "INCOMPLETE: 2 record(s) dropped" in text
    assert "prompt(text='hi') after event 0" in text


# -- recorded sessions, replayed -----------------------------------------------------------------


@asynccontextmanager
async def traced_session(
    tmp_path: Path, faux: FauxProvider, tools: tuple[AgentTool, ...] = ()
) -> AsyncIterator[StartedSession]:
    agent = tmp_path / "agent"
    agent.mkdir()
    agent_settings = {
        "retry": {"maxRetries": 2, "baseDelayMs": 20},
        "compaction": {"keepRecentTokens": 1},
    }
    (agent / "settings.json").write_bytes(orjson.dumps(agent_settings))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("hello notes\n")
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux, config=RouterConfig(agent_dir=None))
        options = SessionOptions(
            cwd=str(work),
            model="faux/faux-1",
            agent_dir=agent,
            session_dir=str(tmp_path / "sessions"),
            tools=tools,
            trace=record_to_file(tmp_path / "trace.jsonl"),
        )
        started = await start_session(nursery, router, options)
        with no_stray_cancel():
            yield started
        await started.session.abort()
        await started.store.flush()
        nursery.cancel_scope.cancel()


async def record_tool_retry_compaction(tmp_path: Path) -> list[dict[str, Any]]:
    faux = FauxProvider()
    faux.push(
        FauxReply(tool_calls=[FauxToolCall("read", {"path": "notes.txt"})]),
        FauxReply(error="503 Service Unavailable"),
        FauxReply(text="done reading"),
        FauxReply(text="## Goal\nread the notes"),
        FauxReply(text="after compaction"),
    )
    async with traced_session(tmp_path, faux) as started:
        session = started.session
        await session.prompt("read the notes")
        await session.compact()
        await session.set_thinking_level("off")
        await session.prompt("again")
    return load_trace(tmp_path / "trace.jsonl")


async def test_tool_retry_and_compaction_replay_identically(tmp_path: Path) -> None:
    records = await record_tool_retry_compaction(tmp_path)
    kinds = [r["k"] for r in records]
    assert kinds[0] == "header"
    events = [r["type"] for r in records if r["k"] == "event"]
    for wanted in ("tool_execution_end", "auto_retry_start", "auto_retry_end", "compaction_end"):
        assert wanted in events
    (tool,) = [r for r in records if r["k"] == "tool"]
    assert tool["name"] == "read" and "hello notes" in orjson.dumps(tool["result"]).decode()
    assert [r["end"] for r in records if r["k"] == "model"] == ["done"] * 5
    ops = [r["op"] for r in records if r["k"] == "input"]
    assert ops[:4] == ["prompt", "compact", "set_thinking_level", "prompt"]
    (thinking,) = [r for r in records if r["k"] == "input" and r["op"] == "set_thinking_level"]
    assert thinking["args"] == {"level": "off"}
    # Every actor that received a message. The tool executor and the model router receive
    # none here: the active tools and the stream functions are read from what those actors
    # publish, and tool calls and model requests run in the agent loop's tasks. The
    # supervisor (issue 22) receives the retry and the compactions.
    assert {r["actor"] for r in records if r["k"] == "msg"} == {
        "session",
        "agent-loop",
        "session-store",
        "supervisor",
    }

    result = await replay_records(records)
    assert result.identical, result.describe()
    assert result.replayed_events == result.recorded_events == len(events)


async def test_the_summary_lists_the_supervisor_with_its_messages_and_waits(
    tmp_path: Path,
) -> None:
    """Issue 22: a run with a tool call, a retry and a compaction shows the supervisor in
    ``pitrio trace summary``: the retry and the compactions it carried out, each received
    command paired with its send (a wait)."""
    records = await record_tool_retry_compaction(tmp_path)
    summary = summarise(records)
    (supervisor,) = [a for a in summary.actors if a.name == "supervisor"]
    by_type = dict(supervisor.by_type)
    assert by_type["CarryOut"] == 1  # the retry
    assert by_type["ManualCompact"] == 1
    assert supervisor.sent == supervisor.received >= 3
    # Its waits: every command it received is paired with its send.
    own = [r for r in records if r["k"] == "header" or r.get("actor") == "supervisor"]
    waits = summarise(own).longest_waits
    assert len(waits) == min(supervisor.received, 10)
    assert {"CarryOut", "ManualCompact"} <= {w.type for w in waits}
    text = render_summary(summary)
    assert "supervisor" in text and "CarryOut" in text


async def test_the_graph_draws_who_sent_what_to_whom(tmp_path: Path) -> None:
    """Issue 22: ``pitrio trace graph`` of a run with a tool call, a retry and a compaction
    draws the supervisor, the agent loop, the store, the tool executor and the model router,
    each edge from the actor whose task sent (or called) to the one that took it."""
    records = await record_tool_retry_compaction(tmp_path)
    graph = actor_graph(records)
    assert set(graph.actors) == {
        OUTSIDE,
        "session",
        "agent-loop",
        "session-store",
        "supervisor",
        "tool-executor",
        "model-router",
    }

    def kinds(source: str, target: str) -> dict[str, int]:
        edge = graph.edge(source, target)
        assert edge is not None, f"no edge {source} -> {target}"
        return dict(edge.kinds)

    # From outside (the test calling the handle): the inputs only, all to the session.
    outside = kinds(OUTSIDE, "session")
    assert outside["Prompt"] == 2 and outside["Compact"] == 1 and outside["Invoke"] == 1
    assert graph.edge(OUTSIDE, "agent-loop") is None and graph.edge(OUTSIDE, "supervisor") is None
    # The session starts the runs and hands the retry and the manual compaction over.
    assert kinds("session", "agent-loop")["Prompt"] == 2
    to_supervisor = kinds("session", "supervisor")
    assert to_supervisor["CarryOut"] == 1 and to_supervisor["ManualCompact"] == 1
    # The supervisor reads the branch, writes the compaction, resets the loop's messages and
    # asks the model for the summary in its own task.
    supervisor_store = kinds("supervisor", "session-store")
    assert supervisor_store["Query"] >= 1 and supervisor_store["Append"] >= 1
    assert kinds("supervisor", "agent-loop")["SetMessages"] >= 1
    assert kinds("supervisor", "model-router") == {"model request": 1}
    # The agent loop makes the other four requests (tool call, 503, retried, after the
    # compaction) and runs the tool body; both are calls in its task, not inbox messages.
    assert kinds("agent-loop", "model-router") == {"model request": 4}
    assert kinds("agent-loop", "tool-executor") == {"tool read": 1}
    calls = {(e.source, e.target) for e in graph.edges if e.call}
    assert calls == {
        ("agent-loop", "model-router"),
        ("agent-loop", "tool-executor"),
        ("supervisor", "model-router"),
    }

    mermaid = render_graph(graph)
    assert mermaid.startswith("flowchart LR\n")
    assert '    supervisor -.->|"model request 1"| model_router\n' in mermaid
    assert '    agent_loop -.->|"tool read 1"| tool_executor\n' in mermaid
    dot = render_graph(graph, "dot")
    assert '"agent-loop" -> "tool-executor" [label="tool read 1", style=dashed];' in dot
    with pytest.raises(ValueError, match="unknown graph format"):
        render_graph(graph, "svg")


class GatedFaux(FauxProvider):
    """The faux provider, with one request (by number) held until :attr:`release` is set."""

    def __init__(self, gated: int) -> None:
        super().__init__()
        self.gated = gated
        self.calls = 0
        self.entered = trio.Event()
        self.release = trio.Event()

    async def stream(self, model: Any, context: Any, options: Any, send: Any) -> None:
        self.calls += 1
        if self.calls == self.gated:
            self.entered.set()
            await self.release.wait()
        await super().stream(model, context, options, send)


async def record_prompt_during_compaction(tmp_path: Path) -> list[dict[str, Any]]:
    """A reply, then a manual compaction whose summary request is held while a prompt is
    sent (refused), then a prompt after the compaction. No timing: the request is gated."""
    faux = GatedFaux(gated=2)  # the second request is the compaction's summary
    faux.push(
        FauxReply(text="first answer"),
        FauxReply(text="## Goal\nsay hello"),
        FauxReply(text="after compaction"),
    )
    async with traced_session(tmp_path, faux) as started:
        session = started.session
        await session.prompt("hello")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.compact)
            await faux.entered.wait()
            with pytest.raises(
                PitrioError, match="Cannot submit a prompt while compaction is in progress"
            ):
                await session.prompt("during the compaction")
            faux.release.set()
        await session.prompt("again")
    return load_trace(tmp_path / "trace.jsonl")


async def test_a_prompt_during_a_compaction_is_refused_and_replays_so(tmp_path: Path) -> None:
    """The worked race of docs/research.md: a prompt that reaches the session while the
    supervisor compacts is refused. The trace shows it between ``compaction_start`` and
    ``compaction_end``, with nothing sent on its account, and the replay refuses it again."""
    records = await record_prompt_during_compaction(tmp_path)
    seq = {r["type"]: r["seq"] for r in records if r["k"] == "event"}  # last of each type
    (during,) = [
        r for r in records if r["k"] == "input" and r["args"].get("text") == "during the compaction"
    ]
    assert seq["compaction_start"] <= during["seq"] < seq["compaction_end"]
    # Between its receipt and compaction_end the session sends nothing: the messages that
    # cross are the supervisor's (summary written, loop's messages reset).
    index = records.index(during)
    end = next(
        i for i, r in enumerate(records) if r["k"] == "event" and r["type"] == "compaction_end"
    )
    between = [r for r in records[index:end] if r["k"] == "msg" and r["dir"] == "send"]
    assert between and {r.get("from") for r in between} == {"supervisor"}
    # The summary request was made by the supervisor; no run took the refused text.
    assert [r.get("from") for r in records if r["k"] == "model"] == [
        "agent-loop",
        "supervisor",
        "agent-loop",
    ]
    users = [
        orjson.dumps(r["event"]).decode()
        for r in records
        if r["k"] == "event" and r["type"] == "message_start"
    ]
    assert not any("during the compaction" in text for text in users)
    assert any('"again"' in text for text in users)
    starts = [
        i
        for i, r in enumerate(records)
        if r["k"] == "msg"
        and r["dir"] == "send"
        and r["actor"] == "agent-loop"
        and r["type"] == "Prompt"
    ]
    assert len(starts) == 2 and starts[1] > end  # the second run is "again", after the end
    # The timeline tells the same story, one line per record.
    timeline = [line[11:] for line in render_timeline(records).splitlines()]  # no times
    start, end_seq = seq["compaction_start"], seq["compaction_end"]
    refused = timeline.index(f"input prompt(text='during the compaction') after event {start}")
    assert timeline.index(f"event {start} compaction_start") < refused
    assert refused < timeline.index("model request 2 by supervisor: done")
    assert refused < timeline.index(f"event {end_seq} compaction_end")

    result = await replay_records(records)
    assert result.identical, result.describe()


async def test_an_altered_tool_output_reports_the_first_divergence(tmp_path: Path) -> None:
    records = await record_tool_retry_compaction(tmp_path)
    (tool,) = [r for r in records if r["k"] == "tool"]
    original = orjson.dumps(tool["result"]).decode()
    tool["result"] = orjson.loads(original.replace("hello notes", "HELLO NOTES"))
    first = next(
        index
        for index, event in enumerate(r for r in records if r["k"] == "event")
        if "hello notes" in orjson.dumps(event["event"]).decode()
    )

    result = await replay_records(records)
    assert not result.identical
    divergence = result.divergence
    assert divergence is not None
    assert divergence.index == first
    assert divergence.recorded["type"] == "tool_execution_end"
    assert divergence.path.startswith("result.content[0].text")
    assert "hello notes" in orjson.dumps(divergence.recorded).decode()
    assert "HELLO NOTES" in orjson.dumps(divergence.replayed).decode()
    assert "first divergence at event" in result.describe()


async def test_a_trace_with_dropped_records_is_not_replayed(tmp_path: Path) -> None:
    records = await record_tool_retry_compaction(tmp_path)
    records.append({"k": "dropped", "t": 0.0, "count": 4})
    with pytest.raises(ReplayError, match="lost 4 record"):
        await replay_records(records)


async def record_steer_during_tool(
    tmp_path: Path, after_steer: Callable[[], None] = lambda: None
) -> list[dict[str, Any]]:
    """Record a prompt whose tool is still running when a steer comes (``after_steer`` is
    called once the steer was handled, before the tool returns)."""
    release = trio.Event()
    started_tool = trio.Event()

    async def slow(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        await on_update(text_result("working"))
        started_tool.set()
        await release.wait()
        return text_result("slow done")

    tool = AgentTool(name="slow", description="waits", execute=slow)
    faux = FauxProvider()
    faux.push(
        FauxReply(tool_calls=[FauxToolCall("slow", {})]),
        FauxReply(text="saw the steer"),
        FauxReply(text="finished"),
    )
    async with traced_session(tmp_path, faux, tools=(tool,)) as started:
        session = started.session
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "go")
            await started_tool.wait()
            await session.steer("change of plan")
            after_steer()
            release.set()
    return load_trace(tmp_path / "trace.jsonl")


async def test_a_steer_during_a_tool_batch_keeps_its_place_on_replay(tmp_path: Path) -> None:
    """The race the replay is for: a steer that arrived while a tool ran is delivered before
    the tool's result again, because the result was recorded after the steer."""
    records = await record_steer_during_tool(tmp_path)
    ticks = {r["k"] if r["k"] != "input" else r["op"]: r["tick"] for r in records if "tick" in r}
    assert ticks["steer"] < ticks["tool"]  # recorded: the steer came first

    result = await replay_records(records)
    assert result.identical, result.describe()


async def test_queries_are_not_inputs() -> None:
    reply: Reply[Any] = Reply()
    from pitrio.actors.session.commands import GetState, Invoke

    assert classify_input(GetState(reply)) is None
    assert classify_input(Invoke(lambda actor: actor.emitted_seq(), reply)) is None


def test_a_command_applied_for_a_client_id_is_the_same_input() -> None:
    # Exactly-once commands: the daemon sends a command with a client id wrapped as Stamped;
    # a trace records the command inside, so a replay applies it.
    from pitrio.actors.session.commands import Abort, GetState, Stamped
    from pitrio.actors.session_store.command_stamp import CommandStamp

    reply: Reply[Any] = Reply()
    stamp = CommandStamp("req-1", "abort", "f")
    assert classify_input(Stamped(Abort(reply), stamp)) == ("abort", {})
    assert classify_input(Stamped(GetState(reply), stamp)) is None


async def test_a_steer_taken_while_the_pump_waits_for_the_store_keeps_its_place_on_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flaky replay, forced: the store holds its confirmation of the prompt's entry, so
    the session's pump is still at the prompt when the loop already runs the tool and the
    steer comes (the steer's ``queue_update`` goes out before the prompt's
    ``entry_appended``). On replay the store confirms at once and the steer comes only
    after that (a loaded machine's timing); the replay still puts the steer's event where
    it was, because the pump waits at that place for it."""
    from pitrio.actors.session.handle import SessionHandle
    from pitrio.actors.session_store.handle import SessionStoreHandle
    from pitrio.messages.agent import AgentMessage, UserMessage
    from pitrio.messages.content import text_of

    hold_prompt_entry = trio.Event()  # recording: set once the steer has been handled
    prompt_entry_confirmed = trio.Event()  # replaced before the replay, which waits for it
    original_append = SessionStoreHandle.append_message

    async def append_message(self: SessionStoreHandle, message: AgentMessage) -> Any:
        entry = await original_append(self, message)
        if isinstance(message, UserMessage) and text_of(message.content) == "go":
            await hold_prompt_entry.wait()
            prompt_entry_confirmed.set()
        return entry

    monkeypatch.setattr(SessionStoreHandle, "append_message", append_message)
    records = await record_steer_during_tool(tmp_path, hold_prompt_entry.set)
    events = [r["event"] for r in records if r["k"] == "event"]
    kinds = [event["type"] for event in events]
    prompt_entry = next(
        index
        for index, event in enumerate(events)
        if event["type"] == "entry_appended"
        and event["entry"].get("message", {}).get("role") == "user"
    )
    # Recorded: the loop was in the tool, the pump still at the prompt's entry.
    assert kinds.index("queue_update") < prompt_entry < kinds.index("tool_execution_start")

    prompt_entry_confirmed = trio.Event()
    original_steer = SessionHandle.steer

    async def late_steer(self: SessionHandle, *args: Any, **kwargs: Any) -> str | None:
        await prompt_entry_confirmed.wait()  # the store was quicker than the steer this time
        return await original_steer(self, *args, **kwargs)

    monkeypatch.setattr(SessionHandle, "steer", late_steer)
    result = await replay_records(records)
    assert result.identical, result.describe()


async def test_the_replay_sequencer_holds_the_pump_before_an_inputs_own_event() -> None:
    """An input recorded with its own event at seq 8 and the loop 13 items in: it is sent
    only once the loop got that far, and the pump may not emit event 8 before it."""
    from pitrio.actors.trace.sequencer import Sequencer

    sequencer = Sequencer([2], [1], own=[(8, 0)])
    seq, loop = 7, 12
    sequencer.session_seq = lambda: seq
    sequencer.loop_events = lambda: loop
    sequencer.output_done(1)
    sequencer.events = 7
    passed: list[str] = []

    async def pump() -> None:
        await sequencer.gate()
        passed.append("pump")

    async def send() -> None:
        await sequencer.before_input(2, 7, 13)
        passed.append("input")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(pump)
        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        assert passed == []  # the loop is one item short; the pump waits for the steer
        loop = 13
        sequencer.changed()
        await trio.testing.wait_all_tasks_blocked()
        assert passed == ["input"]
        sequencer.own_emitted(8)  # the input's queue_update: the pump goes on after it
        await trio.testing.wait_all_tasks_blocked()
        assert passed == ["input", "pump"]
    # Handled without its own event (the replay went another way): nothing waits for it.
    other = Sequencer([1], [], own=[(3, 0)])
    other.session_seq = lambda: 2
    assert not other._may_emit()
    other.handled()
    assert other._may_emit()
