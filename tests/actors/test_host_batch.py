"""The host relay's merge of deltas queued together (issue 27)."""

from __future__ import annotations

import trio
import trio.testing

from pitrio.actors.host.batch import merge_queued, relay_in_batches
from pitrio.actors.session.fanout import Sequenced
from pitrio.messages.agent import AgentToolResult, AssistantMessage, Usage
from pitrio.messages.content import TextContent
from pitrio.messages.events import AgentSessionEvent, AgentStart, MessageUpdate, ToolExecutionUpdate
from pitrio.messages.stream import TextDelta, ThinkingDelta, ToolCallDelta, ToolCallStart


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


def text(so_far: str, delta: str, index: int = 0) -> MessageUpdate:
    message = partial(so_far)
    return MessageUpdate(
        assistant_message_event=TextDelta(content_index=index, delta=delta, partial=message),
        message=message,
    )


def thinking(so_far: str, delta: str, index: int = 0) -> MessageUpdate:
    message = partial(so_far)
    return MessageUpdate(
        assistant_message_event=ThinkingDelta(content_index=index, delta=delta, partial=message),
        message=message,
    )


def toolcall(so_far: str, delta: str, index: int = 0) -> MessageUpdate:
    message = partial(so_far)
    return MessageUpdate(
        assistant_message_event=ToolCallDelta(content_index=index, delta=delta, partial=message),
        message=message,
    )


def numbered(*events: AgentSessionEvent) -> list[Sequenced]:
    return [Sequenced(seq, event) for seq, event in enumerate(events, start=1)]


def deltas(items: list[Sequenced]) -> list[tuple[int, str, str]]:
    out = []
    for item in items:
        assert isinstance(item.event, MessageUpdate)
        update = item.event.assistant_message_event
        out.append((item.seq, update.type, getattr(update, "delta", "")))
    return out


def test_a_lone_delta_and_an_empty_batch_pass_unchanged() -> None:
    assert merge_queued([]) == []
    one = numbered(text("a", "a"))
    assert merge_queued(one) == one


def test_adjacent_deltas_of_one_block_merge_into_the_later_partial_and_seq() -> None:
    items = numbered(text("a", "a"), text("ab", "b"), text("abc", "c"))
    [merged] = merge_queued(items)
    assert merged.seq == 3
    assert isinstance(merged.event, MessageUpdate)
    update = merged.event.assistant_message_event
    assert isinstance(update, TextDelta)
    assert update.delta == "abc"
    assert update.partial == partial("abc")
    assert merged.event.message == partial("abc")


def test_thinking_and_toolcall_deltas_merge_by_kind() -> None:
    items = numbered(thinking("x", "x"), thinking("xy", "y"), toolcall("{", "{", 1))
    assert deltas(merge_queued(items)) == [(2, "thinking_delta", "xy"), (3, "toolcall_delta", "{")]
    items = numbered(toolcall("{", "{"), toolcall('{"a', '"a'))
    assert deltas(merge_queued(items)) == [(2, "toolcall_delta", '{"a')]


def test_different_blocks_or_kinds_never_merge() -> None:
    items = numbered(text("a", "a", 0), text("b", "b", 1), thinking("c", "c", 1), text("d", "d", 1))
    assert merge_queued(items) == items


def test_an_event_between_deltas_keeps_them_apart() -> None:
    start = MessageUpdate(
        assistant_message_event=ToolCallStart(content_index=0, partial=partial("")),
        message=partial(""),
    )
    items = numbered(toolcall("{", "{"), start, toolcall('{"', '"'))
    assert merge_queued(items) == items
    update = ToolExecutionUpdate(
        tool_call_id="c",
        tool_name="bash",
        args={},
        partial_result=AgentToolResult(content=(TextContent(text="t"),)),
    )
    items = numbered(text("a", "a"), update, text("ab", "b"))
    assert merge_queued(items) == items


def test_tool_execution_updates_are_not_merged_here() -> None:
    def update(text_so_far: str) -> ToolExecutionUpdate:
        return ToolExecutionUpdate(
            tool_call_id="c",
            tool_name="bash",
            args={},
            partial_result=AgentToolResult(content=(TextContent(text=text_so_far),)),
        )

    items = numbered(update("a"), update("ab"))
    assert merge_queued(items) == items


def test_runs_merge_separately_around_other_events() -> None:
    items = numbered(text("a", "a"), text("ab", "b"), text("x", "x", 1), text("xy", "y", 1))
    assert deltas(merge_queued(items)) == [(2, "text_delta", "ab"), (4, "text_delta", "xy")]


class Relayed:
    """What ``relay_in_batches`` handed on, batch by batch."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[Sequenced], int]] = []

    def __call__(self, items: list[Sequenced], merged: int) -> None:
        self.batches.append((items, merged))


async def test_the_stage_merges_what_is_queued_in_one_wake_up() -> None:
    send, receive = trio.open_memory_channel[Sequenced](16)
    items = numbered(text("a", "a"), text("ab", "b"), text("abc", "c"), AgentStart())
    for item in items:
        send.send_nowait(item)
    send.close()
    relayed = Relayed()
    await relay_in_batches(receive, relayed)
    [(batch, merged)] = relayed.batches
    assert merged == 2
    assert [item.seq for item in batch] == [3, 4]
    assert deltas(batch[:1]) == [(3, "text_delta", "abc")]
    assert batch[1] is items[3]


async def test_the_stage_passes_a_lone_delta_at_once_and_unchanged() -> None:
    send, receive = trio.open_memory_channel[Sequenced](16)
    relayed = Relayed()
    first, second = numbered(text("a", "a"), text("ab", "b"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay_in_batches, receive, relayed)
        await trio.testing.wait_all_tasks_blocked()
        send.send_nowait(first)
        await trio.testing.wait_all_tasks_blocked()
        assert relayed.batches == [([first], 0)]
        assert relayed.batches[0][0][0] is first
        send.send_nowait(second)
        await trio.testing.wait_all_tasks_blocked()
        assert relayed.batches == [([first], 0), ([second], 0)]
        send.close()
