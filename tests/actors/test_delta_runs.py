"""A run of streamed deltas carried as one item (issue 38, the stream ratio): expanded at any
hop, it gives the events the per-delta path gives, in order, each with the partial as of it;
the RPC lines are the same bytes; a run never spans a change of block or usage; the loop,
the outlet and a behind subscriber's buffer take it whole."""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio
import trio.testing

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.agent_loop.commands import LoopItem, RunEndFacts, UpdateBatch
from pitrio.actors.model_router.providers.openai_completions import OpenAICompletionsParser
from pitrio.actors.model_router.stream_builder import StreamBuilder
from pitrio.actors.model_router.usage import make_usage
from pitrio.actors.session.emitter import EventOutlet, Sink
from pitrio.actors.session.fanout import (
    Offer,
    Sequenced,
    SequencedRun,
    SubscriberBuffer,
)
from pitrio.messages import to_json
from pitrio.messages.content import text_of
from pitrio.messages.delta_run import DeltaRun, expand_events, takes_runs
from pitrio.messages.events import AgentEvent, MessageEnd, MessageUpdate
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.partial import content_chars
from pitrio.messages.stream import AssistantMessageEvent, PartialUpdate, TextDelta
from pitrio.transports.rpc.events import encode_event, encode_run
from tests.actors.test_agent_loop_batches import taken

from .conftest import FAUX_1

MODEL = attrs.evolve(FAUX_1, api="openai-completions", provider="openai", id="gpt-test")


def started(builder: StreamBuilder) -> StreamBuilder:
    builder.start()
    builder.text_start()
    return builder


def run_of(items: list[Any]) -> DeltaRun:
    (run,) = [item for item in items if isinstance(item, DeltaRun)]
    return run


def test_a_run_expands_into_the_events_of_one_delta_at_a_time() -> None:
    """Order, content index and the partial as of each delta (read after later deltas and
    a later run appended to the block), the same as the builder's per-delta events."""
    deltas = ["Hel", "lo", ", ", "wor", "ld"]
    more = ["!", "?"]
    one = started(StreamBuilder.for_model(MODEL, timestamp=1))
    eager = [one.text_delta(delta) for delta in deltas + more]
    other = started(StreamBuilder.for_model(MODEL, timestamp=1))
    first = run_of(other.text_run(deltas))
    second = run_of(other.text_run(more))
    assert len(first) == 5 and first.content_index == 0
    events = first.events() + second.events()
    assert [to_json(event) for event in events] == [to_json(event) for event in eager]
    assert [text_of(event.partial.content) for event in events][:3] == ["Hel", "Hello", "Hello, "]
    assert first.last_partial == eager[4].partial
    assert [u.message for u in first.updates()] == [e.partial for e in eager[:5]]
    # A run of one is just a delta.
    (lone,) = other.text_run(["x"])
    assert type(lone) is TextDelta and text_of(lone.partial.content).endswith("!?x")


def test_a_run_beside_another_streaming_block_keeps_that_blocks_text_as_it_was() -> None:
    """An OpenAI reply keeps its thinking block open while its text streams: a run of text
    (and one of thinking) shows the other block at its pieces of the run's start."""
    eager = started(StreamBuilder.for_model(MODEL, timestamp=1))
    eager.thinking_start()
    eager.thinking_delta("hm")
    lazy = started(StreamBuilder.for_model(MODEL, timestamp=1))
    lazy.thinking_start()
    lazy.thinking_delta("hm")
    expected = [eager.text_delta(d, 0) for d in ["a", "b", "c"]]
    expected += [eager.thinking_delta(d, 1) for d in ["x", "y"]]
    expected += [eager.text_delta(d, 0) for d in ["d", "e"]]
    items = lazy.text_run(["a", "b", "c"], 0) + lazy.thinking_run(["x", "y"], 1)
    items += lazy.text_run(["d", "e"], 0)
    assert [type(item) for item in items] == [DeltaRun] * 3
    assert [run.slot for run in items] == [0, 1, 0]  # type: ignore[union-attr]
    events = expand_events(items)
    assert [to_json(e) for e in events] == [to_json(e) for e in expected]
    assert [to_json(c) for c in events[4].partial.content] == [
        {"type": "text", "text": "abc"},
        {"type": "thinking", "thinking": "hmxy"},
    ]
    assert items[0].last_partial == expected[2].partial  # type: ignore[union-attr]
    sizes = [(p.text_chars, content_chars(p.content)) for p in items[2].partials()]  # type: ignore[union-attr]
    assert sizes == [(8, 8), (9, 9)]  # "abcd" + "hmxy", then "abcde" + "hmxy"


def chunk(**delta: Any) -> str:
    return json.dumps(
        {"id": "c1", "model": "gpt-test", "choices": [{"index": 0, "delta": delta}]},
        separators=(",", ":"),
    )


def usage_chunk(completion: int) -> str:
    return json.dumps(
        {
            "id": "c1",
            "choices": [{"index": 0, "delta": {"content": "u"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": completion},
        },
        separators=(",", ":"),
    )


def the_stream() -> list[str]:
    """Content in runs, a usage change mid-stream, text JSON escapes, a reasoning block
    opening (two blocks streaming), and the end. (A lone surrogate in a chunk is a malformed
    stream for this provider: the slow path is tested on its own below.)"""
    out = [chunk(role="assistant", content="")]
    out += [chunk(content=f"t{n} ") for n in range(8)]
    out.append(usage_chunk(3))
    out += [chunk(content=f"u{n} ") for n in range(6)]
    out.append(usage_chunk(9))
    out += [chunk(content=f"v{n}") for n in range(4)]
    out.append(chunk(content='quote " and \\ and é'))
    out += [chunk(content=f"w{n}") for n in range(3)]
    out += [chunk(reasoning_content=f"think{n} ") for n in range(5)]
    out += [chunk(content=f"x{n}") for n in range(4)]
    out.append(
        json.dumps({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )
    out.append("[DONE]")
    return out


def per_delta_lines(chunks: list[str], form: str) -> bytes:
    """The RPC lines of the per-delta path: one feed per chunk, each update encoded."""
    parser = OpenAICompletionsParser(MODEL)
    parser.builder = StreamBuilder.for_model(MODEL, timestamp=7)
    lines = []
    for data in chunks:
        for event in parser.feed("message", data):
            if hasattr(event, "content_index"):
                update = MessageUpdate(assistant_message_event=event, message=event.partial)
                lines.append(encode_event(update, form))  # type: ignore[arg-type]
    return b"".join(lines)


def run_lines(chunks: list[str], form: str, cut: int) -> tuple[bytes, list[DeltaRun]]:
    """The RPC lines of runs: reads of ``cut`` chunks through ``feed_all``, a run encoded
    whole, every other update on its own."""
    parser = OpenAICompletionsParser(MODEL)
    parser.builder = StreamBuilder.for_model(MODEL, timestamp=7)
    decoded = [("message", data) for data in chunks]
    lines, runs = [], []
    for start in range(0, len(decoded), cut):
        read, last, _ = parser.feed_all(decoded[start : start + cut])
        for item in read + last:
            if isinstance(item, DeltaRun):
                runs.append(item)
                lines.append(encode_run(item, form))  # type: ignore[arg-type]
            elif hasattr(item, "content_index"):
                update = MessageUpdate(assistant_message_event=item, message=item.partial)
                lines.append(encode_event(update, form))  # type: ignore[arg-type]
    return b"".join(lines), runs


def test_rpc_lines_of_runs_are_the_bytes_of_the_per_delta_path() -> None:
    """Both update formats, reads cut anywhere: the same lines, byte for byte (the usage of
    each full-form line the one at its delta, a lone surrogate escaped as pi does), and no
    run spans a usage change or a second streaming block."""
    chunks = the_stream()
    for form in ("full", "delta"):
        expected = per_delta_lines(chunks, form)
        assert expected.count(b"\n") > 30
        for cut in (1, 3, 7, 64):
            got, runs = run_lines(chunks, form, cut)
            assert got == expected, (form, cut)
            if cut >= 7:
                assert runs and max(len(run) for run in runs) >= 5
    _, runs = run_lines(chunks, "full", 64)
    assert {run.kind for run in runs} == {"text_delta", "thinking_delta"}
    outputs = {run.header.usage.output for run in runs}
    assert outputs == {0, 3, 9}  # one usage per run, each run within one usage
    for run in runs:  # each partial's block ends with its delta
        blocks = [partial.content[run.content_index] for partial in run.partials()]
        texts = [getattr(block, "text", None) or block.thinking for block in blocks]  # type: ignore[union-attr]
        assert all(text.endswith(delta) for text, delta in zip(texts, run.deltas, strict=True))
    full = run_lines(chunks, "full", 64)[0].decode()
    usages = [
        json.loads(line)["usage"]["output"] for line in full.splitlines() if "text_delta" in line
    ]
    assert usages == sorted(usages) and set(usages) == {0, 3, 9}


def test_a_lone_surrogate_in_a_run_takes_the_slow_path() -> None:
    builder = started(StreamBuilder.for_model(MODEL, timestamp=1))
    builder.set_usage(make_usage(input=1, output=2, model=MODEL))
    run = run_of(builder.text_run(["a", "\ud800", "b"]))
    for form in ("full", "delta"):
        expected = b"".join(encode_event(update, form) for update in run.updates())  # type: ignore[arg-type]
        assert encode_run(run, form) == expected  # type: ignore[arg-type]
        assert b"\\ud800" in expected


def a_run(deltas: list[str]) -> DeltaRun:
    return run_of(started(StreamBuilder.for_model(MODEL, timestamp=1)).text_run(deltas))


def update_texts(items: list[Sequenced]) -> list[str]:
    out = []
    for item in items:
        event = item.event
        assert isinstance(event, MessageUpdate)
        out.append(event.assistant_message_event.delta)  # type: ignore[union-attr]
    return out


async def test_the_outlet_hands_a_run_whole_to_who_takes_runs_and_expands_it_for_others() -> None:
    outlet = EventOutlet()
    sunk: list[Sequenced] = []
    outlet.add_sink(Sink(sunk.append, lambda: None))
    run = a_run(["a", "b", "c"])
    lone = a_run(["d", "e"]).updates()[1]
    async with trio.open_nursery() as nursery:
        whole_send, whole = trio.open_memory_channel[Sequenced](100)
        each_send, each = trio.open_memory_channel[Sequenced](100)
        outlet.add(10, whole_send, nursery, runs=True)
        outlet.add(10, each_send, nursery)
        outlet.emit_all([lone, run, lone])
        assert outlet.seq == 5
        got = [whole.receive_nowait() for _ in range(3)]
        assert [item.seq for item in got] == [1, 4, 5]
        assert isinstance(got[1], SequencedRun) and got[1].run is run and got[1].first_seq == 2
        flat = [each.receive_nowait() for _ in range(5)]
        for items in (flat, sunk):
            assert [item.seq for item in items] == [1, 2, 3, 4, 5]
            assert update_texts(items) == ["e", "a", "b", "c", "e"]
            assert [text_of(item.event.message.content) for item in items][1:4] == [  # type: ignore[union-attr]
                "a",
                "ab",
                "abc",
            ]
        nursery.cancel_scope.cancel()


def test_a_behind_clients_buffer_queues_a_run_whole_and_merges_it_when_full() -> None:
    """A run is one queued item, weighed as its merged update; when the buffer is full it
    is merged with the deltas around it (the coalescing a behind client already had)."""
    run = a_run(["a", "b", "c"])
    buffer = SubscriberBuffer(capacity=2)
    assert buffer.offer(SequencedRun(3, run.merged_update(), run)) is Offer.QUEUED
    taken = buffer.take()
    assert isinstance(taken, SequencedRun) and taken.run is run
    builder = started(StreamBuilder.for_model(MODEL, timestamp=1))
    first = builder.text_delta("x")
    buffer.offer(Sequenced(1, MessageUpdate(assistant_message_event=first, message=first.partial)))
    buffer.offer(Sequenced(2, MessageUpdate(assistant_message_event=first, message=first.partial)))
    run = run_of(builder.text_run(["y", "z"]))
    assert buffer.offer(SequencedRun(4, run.merged_update(), run)) is Offer.COALESCED
    buffer.take()
    merged = buffer.take()
    assert merged is not None and type(merged) is Sequenced and merged.seq == 4
    event = merged.event
    assert isinstance(event, MessageUpdate)
    assert event.assistant_message_event.delta == "xyz"  # type: ignore[union-attr]
    assert text_of(event.message.content) == "xyz"


class RunProvider:
    """Sends the response's deltas as runs (what a read of many chunks gives), then waits
    for the test before each next step; ``None`` ends it."""

    def __init__(self) -> None:
        self.steps, self._steps = trio.open_memory_channel[list[str] | None](100)
        self.took_runs: bool | None = None

    async def stream(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        send: Any,
    ) -> None:
        self.took_runs = takes_runs(send)
        builder = StreamBuilder.for_model(model)
        send.send_nowait(builder.start())
        send.send_nowait(builder.text_start())
        async for deltas in self._steps:
            if deltas is None:
                break
            for item in builder.text_run(deltas):
                send.send_nowait(item)
        send.send_nowait(builder.text_end())
        send.send_nowait(builder.done())


def flattened(items: list[LoopItem]) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    for item in items:
        if isinstance(item, UpdateBatch):
            for update in item.events:
                events += update.updates() if isinstance(update, DeltaRun) else [update]
        elif not isinstance(item, RunEndFacts):
            events.append(item)
    return events


async def test_the_loop_carries_a_run_whole_and_an_abort_after_it_keeps_all_of_it() -> None:
    """The batched subscriber (the pump) gets the run as one item, counted as its deltas; a
    plain subscriber gets each update with its partial; an abort while the provider waits
    after a run ends the message with every delta of the run, as the updates showed."""
    provider = RunProvider()
    async with trio.open_nursery() as nursery:
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=provider.stream, model=FAUX_1).run)
        )
        feed = await loop.subscribe_batched(capacity=1000)
        plain = await loop.subscribe(capacity=100_000)
        nursery.start_soon(loop.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        head = taken(feed.events)
        assert provider.took_runs is True

        await provider.steps.send(["a", "b", "c", "d"])
        await trio.testing.wait_all_tasks_blocked()
        (batch,) = taken(feed.events)  # taken in the provider's task, whole
        assert isinstance(batch, UpdateBatch)
        (run,) = batch.events
        assert isinstance(run, DeltaRun) and run.deltas == ("a", "b", "c", "d")
        assert feed.sent.value == len(flattened(head)) + 4

        await provider.steps.send(["e", "f"])
        await provider.steps.send(["g"])
        await trio.testing.wait_all_tasks_blocked()
        both = taken(feed.events)
        # The run whole, the lone delta behind it (in one batch or two: both were queued).
        shapes = [
            [
                u.deltas if isinstance(u, DeltaRun) else u.assistant_message_event.delta
                for u in b.events
            ]
            for b in both
        ]
        assert [shape for batch_shapes in shapes for shape in batch_shapes] == [("e", "f"), "g"]

        await loop.abort()
        await trio.testing.wait_all_tasks_blocked()
        tail = taken(feed.events)
        ends = [item for item in tail if isinstance(item, MessageEnd)]
        assert [text_of(end.message.content) for end in ends] == ["abcdefg"]
        assert ends[0].message.stop_reason == "aborted"
        events = flattened([*head, batch, *both, *tail])
        assert [to_json(e) for e in events] == [to_json(e) for e in taken(plain)]
        deltas = [
            e.assistant_message_event
            for e in events
            if isinstance(e, MessageUpdate) and isinstance(e.assistant_message_event, TextDelta)
        ]
        assert [d.delta for d in deltas] == list("abcdefg")
        assert [text_of(d.partial.content) for d in deltas] == [
            "abcdefg"[: n + 1] for n in range(7)
        ]
        nursery.cancel_scope.cancel()


def test_a_sender_that_does_not_take_runs_gets_them_expanded() -> None:
    items: list[AssistantMessageEvent | DeltaRun] = [a_run(["p", "q"])]
    events: list[PartialUpdate] = expand_events(items)  # type: ignore[assignment]
    assert [e.delta for e in events] == ["p", "q"]  # type: ignore[union-attr]
    assert not takes_runs(trio.open_memory_channel[Any](1)[0])


async def test_the_outlet_makes_no_per_delta_items_when_nobody_wants_them(
    monkeypatch: Any,
) -> None:
    """With only subscribers that take runs (the RPC process), a run is never expanded in
    the outlet: per-delta items there cost a quarter of the stream's time."""
    from pitrio.actors.session import emitter

    def refuse(items: Any) -> Any:
        raise AssertionError("expanded")

    monkeypatch.setattr(emitter, "_expanded", refuse)
    outlet = EventOutlet()
    async with trio.open_nursery() as nursery:
        send, receive = trio.open_memory_channel[Sequenced](100)
        outlet.add(10, send, nursery, runs=True)
        run = a_run(["a", "b"])
        outlet.emit_all([run])
        assert receive.receive_nowait().seq == 2
        nursery.cancel_scope.cancel()
