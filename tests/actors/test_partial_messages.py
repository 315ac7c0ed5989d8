"""Lazy partial snapshots (issue 38): every event of a stream, read at any time and in any
order, shows what an eager snapshot made at that event showed, and every encoding of the
stream (RPC full and delta forms, websocket frames, the JSON of whole events) is the same bytes.

The reference is a deliberately plain model of the stream: whole strings per block, a fresh
``AssistantMessage`` per event (what the builder made before issue 38).
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import attrs
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.model_router.stream_builder import StreamBuilder, parse_arguments
from pitrio.actors.session.fanout import Offer, Sequenced, SubscriberBuffer, event_weight
from pitrio.messages import TextContent, ThinkingContent, ToolCall, Usage, to_json
from pitrio.messages.agent import EMPTY_USAGE, AssistantMessage, Diagnostic
from pitrio.messages.codec import encode_reusing
from pitrio.messages.events import MessageStart, MessageUpdate
from pitrio.messages.partial import PartialMessage, content_chars
from pitrio.messages.stream import PartialUpdate, StreamDone, StreamError, StreamStart
from pitrio.transports.daemon.frames import event_frame
from pitrio.transports.rpc.events import encode_event, full_update

HEADER: dict[str, Any] = {"api": "faux-api", "provider": "faux", "model": "faux-1"}


class Reference:
    """The eager model: each block's whole text, and a new message for every snapshot."""

    def __init__(self) -> None:
        self.blocks: list[Any] = []
        self.raw: dict[int, list[str]] = {}  # a tool call's JSON pieces
        self.usage: Usage = EMPTY_USAGE
        self.response_id: str | None = None
        self.diagnostics: list[Diagnostic] = []

    def snapshot(self, stop: Any = "pending", error: str | None = None) -> AssistantMessage:
        return AssistantMessage(
            content=tuple(self.blocks),
            usage=self.usage,
            stop_reason=stop,
            timestamp=7,
            response_id=self.response_id,
            error_message=error,
            diagnostics=tuple(self.diagnostics) or None,
            **HEADER,
        )

    def delta(self, index: int, text: str) -> None:
        block = self.blocks[index]
        if isinstance(block, TextContent):
            self.blocks[index] = TextContent(text=block.text + text)
        elif isinstance(block, ThinkingContent):
            self.blocks[index] = ThinkingContent(thinking=block.thinking + text)
        else:
            self.raw[index].append(text)
            if text.rstrip().endswith("}"):
                parsed = parse_arguments("".join(self.raw[index]))
                if parsed is not None:
                    self.blocks[index] = attrs.evolve(block, arguments=parsed)

    def end(self, index: int) -> None:
        block = self.blocks[index]
        if isinstance(block, ToolCall):
            raw = "".join(self.raw[index])
            arguments = parse_arguments(raw) if raw.strip() else {}
            self.blocks[index] = attrs.evolve(block, arguments=arguments or {})
        elif isinstance(block, TextContent):
            self.blocks[index] = TextContent(text=block.text, text_signature="sig")


# One step of a stream: open a block, add to an open one (by position among the open ones),
# end one, or change a header field. Several blocks may be open at once (as in Chat
# Completions, whose text and calls interleave).
_pieces = st.text(alphabet='ab{}":,é\u2028 ', max_size=6)
_step = st.one_of(
    st.tuples(st.just("open"), st.sampled_from(["text", "thinking", "thinking+", "call"])),
    st.tuples(st.just("delta"), st.integers(0, 3), _pieces),
    st.tuples(st.just("delta"), st.integers(0, 3), _pieces),
    st.tuples(st.just("end"), st.integers(0, 3)),
    st.tuples(st.just("usage"), st.integers(0, 1000)),
    st.tuples(st.just("response"), st.text(max_size=4)),
    st.tuples(st.just("diagnostic"), st.text(max_size=4)),
)


def run(steps: list[Any], finish: str) -> tuple[list[Any], list[AssistantMessage]]:
    """The builder's events and, for each, the reference snapshot it stands for."""
    b = StreamBuilder(timestamp=7, **HEADER)
    ref = Reference()
    events: list[Any] = [b.start()]
    expected = [ref.snapshot()]
    open_blocks: list[int] = []
    calls = 0
    for step in steps:
        kind = step[0]
        if kind == "open":
            index = len(ref.blocks)
            if step[1] == "text":
                events.append(b.text_start())
                ref.blocks.append(TextContent(text=""))
            elif step[1].startswith("thinking"):
                start = "[redacted]" if step[1].endswith("+") else ""
                events.append(b.thinking_start(start))
                ref.blocks.append(ThinkingContent(thinking=start))
            else:
                calls += 1
                events.append(b.toolcall_start(f"call_{calls}", "read"))
                ref.blocks.append(ToolCall(id=f"call_{calls}", name="read", arguments={}))
                ref.raw[index] = []
            open_blocks.append(index)
        elif kind in ("delta", "end"):
            if not open_blocks:
                continue
            index = open_blocks[step[1] % len(open_blocks)]
            block = ref.blocks[index]
            if kind == "delta":
                if isinstance(block, TextContent):
                    events.append(b.text_delta(step[2], index))
                elif isinstance(block, ThinkingContent):
                    events.append(b.thinking_delta(step[2], index))
                else:
                    events.append(b.toolcall_delta(step[2], index))
                ref.delta(index, step[2])
            else:
                if isinstance(block, TextContent):
                    events.append(b.text_end(index, signature="sig"))
                elif isinstance(block, ThinkingContent):
                    events.append(b.thinking_end(index))
                else:
                    events.append(b.toolcall_end(index))
                ref.end(index)
                open_blocks.remove(index)
        elif kind == "usage":
            usage = Usage(
                input=step[1], output=1, cache_read=0, cache_write=0, total_tokens=step[1]
            )
            b.set_usage(usage)
            ref.usage = usage
            continue  # no event: the next snapshot shows it
        elif kind == "response":
            b.set_response_id(step[1])
            ref.response_id = step[1]
            continue
        else:
            diagnostic = Diagnostic(type="note", timestamp=len(step[1]), details=step[1])
            b.add_diagnostic(diagnostic)
            ref.diagnostics.append(diagnostic)
            continue
        expected.append(ref.snapshot())
    if finish == "done" and not open_blocks:
        done = b.done()
        events.append(done)
        expected.append(ref.snapshot(done.reason))
    else:
        events.append(b.error("error", "boom"))
        expected.append(ref.snapshot("error", "boom"))
    return events, expected


def partial_of(event: Any) -> AssistantMessage:
    if isinstance(event, StreamDone):
        return event.message
    if isinstance(event, StreamError):
        return event.error
    return event.partial


def eager(event: Any, snapshot: AssistantMessage) -> Any:
    """The event as the eager builder made it."""
    if isinstance(event, StreamDone | StreamError):
        return event
    return attrs.evolve(event, partial=snapshot)


@settings(max_examples=300, deadline=None)
@given(
    steps=st.lists(_step, max_size=60),
    finish=st.sampled_from(["done", "error"]),
    order=st.randoms(use_true_random=False),
    early=st.sets(st.integers(0, 80)),
)
def test_every_snapshot_reads_as_the_eager_one_in_any_order(
    steps: list[Any], finish: str, order: Any, early: set[int]
) -> None:
    events, expected = run(steps, finish)
    # Some snapshots are read while the stream goes on (as get_state may), the rest after it
    # ended, in a random order: older after newer, newer after older.
    for position in sorted(early):
        if position < len(events) - 1:
            assert partial_of(events[position]) == expected[position]
    positions = list(range(len(events)))
    order.shuffle(positions)
    for position in positions:
        got, want = partial_of(events[position]), expected[position]
        assert got == want and want == got
        assert to_json(got) == to_json(want)
        assert type(got) is (AssistantMessage if position == len(events) - 1 else PartialMessage)
        if isinstance(got, PartialMessage):
            assert got.text_chars == content_chars(want.content)
            assert got.materialize() == want and type(got.materialize()) is AssistantMessage


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(_step, max_size=40))
def test_a_snapshot_behaves_as_an_assistant_message(steps: list[Any]) -> None:
    events, expected = run(steps, "error")
    for event, want in zip(events[:-1], expected[:-1], strict=True):
        got = event.partial
        assert isinstance(got, AssistantMessage)
        assert hash(got) == hash(want) if not got.tool_calls else True  # dict arguments
        assert repr(got).replace("PartialMessage", "AssistantMessage", 1) == repr(want)
        changed = attrs.evolve(got, stop_reason="aborted")
        assert type(changed) is AssistantMessage
        assert changed == attrs.evolve(want, stop_reason="aborted")
        assert copy.copy(got) == want and type(copy.deepcopy(got)) is AssistantMessage
        assert pickle.loads(pickle.dumps(got)) == want
        assert got.tool_calls == want.tool_calls and got.usage == want.usage
        match got:
            case AssistantMessage(content=content, stop_reason="pending"):
                assert content == want.content
            case _:
                raise AssertionError("a snapshot matches AssistantMessage's pattern")


def long_stream() -> tuple[list[Any], list[AssistantMessage]]:
    """A long reply: thinking, text and a tool call's arguments, each in thousands of deltas,
    with the usage changing while it streams."""
    steps: list[Any] = [("open", "thinking")]
    steps += [("delta", 0, f"t{i} ") for i in range(2000)]
    steps += [("end", 0), ("open", "text"), ("usage", 5)]
    steps += [("delta", 0, "wörd\u2028"[i % 5 :]) for i in range(4000)]
    steps += [("usage", 9), ("end", 0), ("open", "call"), ("delta", 0, '{"path": "')]
    steps += [("delta", 0, "x/") for _ in range(2000)]
    steps += [("delta", 0, '"}'), ("end", 0)]
    return run(steps, "done")


def test_a_long_streamed_reply_encodes_to_the_same_bytes_in_every_form() -> None:
    events, expected = long_stream()
    assert len(events) > 8000
    for seq, (event, want) in enumerate(zip(events, expected, strict=True)):
        reference = eager(event, want)
        if isinstance(event, StreamStart):
            pairs = [(MessageStart(message=event.partial), MessageStart(message=want))]
        elif isinstance(event, StreamDone | StreamError):
            continue  # ordinary messages on both sides
        else:
            update: PartialUpdate = event
            pairs = [
                (
                    MessageUpdate(assistant_message_event=update, message=update.partial),
                    MessageUpdate(assistant_message_event=reference, message=want),
                )
            ]
        for lazy, plain in pairs:
            # The full form's line is encoded in parts: checked against its plain dict too.
            if isinstance(plain, MessageUpdate):
                assert encode_event(lazy, "full") == orjson.dumps(full_update(plain)) + b"\n"
            else:
                assert encode_event(lazy, "full") == orjson.dumps(to_json(plain)) + b"\n"
            for form in ("full", "delta"):
                assert encode_event(lazy, form) == encode_event(plain, form)  # RPC, JSON mode
                assert event_frame(seq, lazy, form) == event_frame(seq, plain, form)  # daemon
            assert event_weight(lazy) == event_weight(plain)  # the same merges for a slow client
    # The whole event with its snapshots (the SDK's and the trace's source), at a few points:
    # encoding thousands of whole snapshots is the quadratic cost the lazy form avoids.
    for position in (0, 1, 2, 1000, 2001, 2003, 5000, len(events) - 3, len(events) - 2):
        event, want = events[position], expected[position]
        lazy = MessageUpdate(assistant_message_event=event, message=event.partial)
        plain = MessageUpdate(assistant_message_event=eager(event, want), message=want)
        assert encode_reusing(lazy) == encode_reusing(plain)
        assert to_json(lazy) == to_json(plain)


def test_deltas_neither_copy_the_text_nor_materialize_it() -> None:
    """What makes a delta O(1): the pieces are shared and nothing joins them until read."""
    b = StreamBuilder(timestamp=7, **HEADER)
    b.start()
    b.text_start()
    events = []
    for _ in range(1000):
        b.set_response_id("chatcmpl-1")  # as Chat Completions says it with every chunk
        events.append(b.text_delta("abcd"))
    first, last = events[0].partial, events[-1].partial
    assert isinstance(first, PartialMessage) and isinstance(last, PartialMessage)
    assert first._layout is last._layout  # one layout for the whole block
    assert first._header is last._header  # and one header while nothing in it changes
    assert last.response_id == "chatcmpl-1"
    assert first._message is None and last._message is None
    assert (first.text_chars, last.text_chars) == (4, 4000)
    assert event_weight(MessageUpdate(assistant_message_event=events[-1], message=last)) > 4000
    assert last._message is None  # weighing did not materialize it
    assert last.content == (TextContent(text="abcd" * 1000),)
    assert first.content == (TextContent(text="abcd"),)  # read after a later one


@settings(max_examples=100, deadline=None)
@given(
    deltas=st.lists(st.tuples(st.integers(0, 1), _pieces), min_size=1, max_size=200),
    capacity=st.integers(1, 8),
    max_bytes=st.integers(300, 5000),
    takes=st.sets(st.integers(0, 200)),
)
def test_merged_updates_keep_their_weights(
    deltas: list[tuple[int, str]], capacity: int, max_bytes: int, takes: set[int]
) -> None:
    """A merge's weight is reckoned from the newer event's (not weighed again): every queued
    event's recorded weight stays its event_weight, and the total their sum."""
    b = StreamBuilder(timestamp=7, **HEADER)
    b.start()
    b.text_start()
    b.thinking_start()
    buffer = SubscriberBuffer(capacity, max_bytes)
    for seq, (index, delta) in enumerate(deltas, start=1):
        event = b.text_delta(delta, 0) if index == 0 else b.thinking_delta(delta, 1)
        update = MessageUpdate(assistant_message_event=event, message=event.partial)
        if buffer.offer(Sequenced(seq, update)) is Offer.OVERFLOW:
            break
        if seq in takes:
            buffer.take()
        queued = list(buffer._items)
        assert list(buffer._weights) == [event_weight(item.event) for item in queued]
        assert buffer.queued_bytes == sum(buffer._weights)
