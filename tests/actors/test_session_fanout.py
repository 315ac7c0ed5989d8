"""Per-subscriber buffers: coalesce deltas when full, then disconnect (DESIGN §2)."""

from __future__ import annotations

import attrs

from pitrio.actors.session.fanout import Offer, Sequenced, SubscriberBuffer, merge
from pitrio.messages.agent import AgentToolResult, AssistantMessage, Usage
from pitrio.messages.content import TextContent
from pitrio.messages.events import (
    AgentStart,
    MessageUpdate,
    ToolExecutionUpdate,
    TurnStart,
)
from pitrio.messages.stream import TextDelta, TextEnd, ThinkingDelta, ToolCallDelta


def partial(text: str) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="a",
        provider="p",
        model="m",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1,
    )


def text_delta(so_far: str, delta: str, index: int = 0) -> MessageUpdate:
    message = partial(so_far)
    return MessageUpdate(
        assistant_message_event=TextDelta(content_index=index, delta=delta, partial=message),
        message=message,
    )


def tool_update(call_id: str, text: str) -> ToolExecutionUpdate:
    return ToolExecutionUpdate(
        tool_call_id=call_id,
        tool_name="bash",
        args={},
        partial_result=AgentToolResult(content=(TextContent(text=text),)),
    )


def test_merge_text_deltas_of_one_block() -> None:
    merged = merge(text_delta("a", "a"), text_delta("ab", "b"))
    assert isinstance(merged, MessageUpdate)
    assert isinstance(merged.assistant_message_event, TextDelta)
    assert merged.assistant_message_event.delta == "ab"
    assert merged.message == partial("ab")


def test_a_merged_delta_is_the_newer_one_with_both_texts_whatever_its_kind() -> None:
    # The merge builds the event itself (issue 38: evolve was slow): every field but the delta
    # is the newer event's, the provider's extra fields included.
    for kind in (TextDelta, ThinkingDelta, ToolCallDelta):
        older = kind(content_index=2, delta="x", partial=partial("x"))
        newer = kind(content_index=2, delta="y", partial=partial("xy"), extra={"k": 1})
        merged = merge(
            MessageUpdate(assistant_message_event=older, message=older.partial),
            MessageUpdate(assistant_message_event=newer, message=newer.partial),
        )
        assert isinstance(merged, MessageUpdate)
        assert merged.assistant_message_event == attrs.evolve(newer, delta="xy")
        assert merged.message is newer.partial


def test_no_merge_across_blocks_kinds_or_calls() -> None:
    assert merge(text_delta("a", "a", 0), text_delta("b", "b", 1)) is None
    thinking = MessageUpdate(
        assistant_message_event=ThinkingDelta(content_index=0, delta="x", partial=partial("")),
        message=partial(""),
    )
    assert merge(text_delta("a", "a"), thinking) is None
    end = MessageUpdate(
        assistant_message_event=TextEnd(content_index=0, content="a", partial=partial("a")),
        message=partial("a"),
    )
    assert merge(text_delta("a", "a"), end) is None
    assert merge(tool_update("c1", "x"), tool_update("c2", "y")) is None
    assert merge(tool_update("c1", "x"), tool_update("c1", "xy")) == tool_update("c1", "xy")
    assert merge(AgentStart(), TurnStart()) is None


def test_queue_until_full_then_coalesce_then_disconnect() -> None:
    buffer = SubscriberBuffer(3)
    assert buffer.offer(Sequenced(1, AgentStart())) is Offer.QUEUED
    assert buffer.offer(Sequenced(2, text_delta("a", "a"))) is Offer.QUEUED
    assert buffer.offer(Sequenced(3, text_delta("ab", "b"))) is Offer.QUEUED
    # Full: the next delta merges into the last one and takes its seq.
    assert buffer.offer(Sequenced(4, text_delta("abc", "c"))) is Offer.COALESCED
    assert len(buffer) == 3
    # A non-mergeable event: neighbours inside the queue merge to make room.
    assert buffer.offer(Sequenced(5, TurnStart())) is Offer.COALESCED
    items = [buffer.take() for _ in range(3)]
    assert [i.seq for i in items if i] == [1, 4, 5]
    update = items[1].event if items[1] else None
    assert isinstance(update, MessageUpdate)
    assert update.assistant_message_event.delta == "abc"  # type: ignore[union-attr]
    assert buffer.take() is None
    assert buffer.coalesced == 2


def test_overflow_disconnects_with_a_reason() -> None:
    buffer = SubscriberBuffer(2)
    buffer.offer(Sequenced(1, AgentStart()))
    buffer.offer(Sequenced(2, TurnStart()))
    assert buffer.offer(Sequenced(3, AgentStart())) is Offer.OVERFLOW
    assert buffer.closed
    assert "event 3 (agent_start)" in (buffer.closed_reason or "")
    assert len(buffer) == 0
    assert buffer.offer(Sequenced(4, TurnStart())) is Offer.OVERFLOW


def test_a_buffer_is_bounded_by_bytes_as_well_as_by_count() -> None:
    # issue 21: each update holds its whole partial message; 4,096 of a long reply are GBs.
    from pitrio.actors.session.fanout import EVENT_OVERHEAD, event_weight

    assert event_weight(AgentStart()) == EVENT_OVERHEAD
    assert event_weight(text_delta("x" * 1000, "x")) == EVENT_OVERHEAD + 1001
    assert event_weight(tool_update("c", "y" * 500)) == EVENT_OVERHEAD + 500
    buffer = SubscriberBuffer(4096, max_bytes=100_000)
    buffer.offer(Sequenced(1, AgentStart()))
    text = ""
    for seq in range(2, 2002):
        text += "0123456789"
        assert buffer.offer(Sequenced(seq, text_delta(text, "0123456789"))) is not Offer.OVERFLOW
        # Past the bound new updates merge into the last one: its partial and joined deltas.
        assert buffer.queued_bytes <= 100_000 + 2 * event_weight(text_delta(text, ""))
    # Far fewer than 2,000 updates are queued; together they still say the whole text.
    assert len(buffer) < 200
    taken = [buffer.take() for _ in range(len(buffer))]
    assert buffer.queued_bytes == 0
    updates = [item.event for item in taken if item is not None]
    assert isinstance(updates[0], AgentStart)
    deltas = "".join(u.assistant_message_event.delta for u in updates[1:])  # type: ignore[union-attr]
    assert deltas == text
    assert taken[-1] is not None and taken[-1].seq == 2001


def test_heavy_events_that_merge_with_nothing_are_kept_within_the_count() -> None:
    buffer = SubscriberBuffer(3, max_bytes=10)
    for seq in range(1, 4):
        assert buffer.offer(Sequenced(seq, tool_update(f"c{seq}", "x" * 100))) is Offer.COALESCED
    assert len(buffer) == 3
    assert buffer.offer(Sequenced(4, tool_update("c4", "x"))) is Offer.OVERFLOW


def test_the_weight_counts_the_text_of_every_kind_of_block() -> None:
    # The common blocks are weighed by their type, the others by the fields they hold: each
    # kind counts its own text (thinking, text, a tool call's string arguments, image data).
    from pitrio.actors.session.fanout import EVENT_OVERHEAD, event_weight
    from pitrio.messages.content import ImageContent, ThinkingContent, ToolCall

    blocks = (
        ThinkingContent(thinking="ab", thinking_signature="not counted"),
        TextContent(text="cde"),
        ToolCall(id="c", name="bash", arguments={"command": "wxyz", "timeout": 5}),
        ImageContent(data="0123456", mime_type="image/png"),
    )
    message = attrs.evolve(partial(""), content=blocks)
    update = MessageUpdate(
        assistant_message_event=TextDelta(content_index=1, delta="e", partial=message),
        message=message,
    )
    assert event_weight(update) == EVENT_OVERHEAD + 1 + 2 + 3 + 4 + 7
    result = AgentToolResult(content=(TextContent(text="out"), blocks[3]))
    tool = ToolExecutionUpdate(tool_call_id="c", tool_name="bash", args={}, partial_result=result)
    assert event_weight(tool) == EVENT_OVERHEAD + 3 + 7
