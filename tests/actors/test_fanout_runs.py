"""Merged deltas kept as a run until taken (issue 38): a subscriber buffer gives out exactly
what one building a merged update at every merge gave, in the same order, with the same
weights, and never holds back a delta a reader could take."""

from __future__ import annotations

from collections import deque
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.session.fanout import (
    Offer,
    Sequenced,
    SubscriberBuffer,
    event_weight,
    merge,
)
from pitrio.messages.events import AgentSessionEvent, MessageUpdate, TurnStart
from pitrio.messages.stream import TextDelta
from tests.actors.test_session_fanout import text_delta, tool_update


class EagerBuffer:
    """The reference: the buffer as it was before runs, a merged update built per merge."""

    def __init__(self, capacity: int, max_bytes: int) -> None:
        self.capacity, self.max_bytes = capacity, max_bytes
        self.items: deque[Sequenced] = deque()
        self.closed = False

    def weight(self) -> int:
        return sum(event_weight(item.event) for item in self.items)

    def offer(self, item: Sequenced) -> Offer:
        if self.closed:
            return Offer.OVERFLOW
        weight = event_weight(item.event)
        if len(self.items) < self.capacity and self.weight() + weight <= self.max_bytes:
            self.items.append(item)
            return Offer.QUEUED
        if self.items:
            merged = merge(self.items[-1].event, item.event)
            if merged is not None:
                self.items[-1] = Sequenced(item.seq, merged)
                return Offer.COALESCED
        compacted: deque[Sequenced] = deque()
        for queued in self.items:
            both = merge(compacted[-1].event, queued.event) if compacted else None
            if both is None:
                compacted.append(queued)
            else:
                compacted[-1] = Sequenced(queued.seq, both)
        made_room = len(compacted) < len(self.items)
        self.items = compacted
        if made_room or len(self.items) < self.capacity:
            self.items.append(item)
            return Offer.COALESCED
        self.items.clear()
        self.closed = True
        return Offer.OVERFLOW

    def take(self) -> Sequenced | None:
        return self.items.popleft() if self.items else None


def shown(item: Sequenced | None) -> Any:
    """What a reader of ``item`` sees: its seq, type, delta, and which partial it holds."""
    if item is None:
        return None
    event = item.event
    if isinstance(event, MessageUpdate):
        inner = event.assistant_message_event
        return (item.seq, inner.type, getattr(inner, "delta", None), id(event.message))
    return (item.seq, event.type, id(event))


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.integers(0, 1), st.text("ab", min_size=1, max_size=3)),
        st.tuples(st.just("tool"), st.sampled_from(["c1", "c2"]), st.text("xy", max_size=3)),
        st.tuples(st.just("other"), st.just(0), st.just("")),
        st.tuples(st.just("take"), st.integers(1, 3), st.just("")),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, capacity=st.integers(1, 6), max_bytes=st.integers(300, 3000))
def test_runs_give_out_what_eager_merges_gave(
    steps: list[tuple[str, Any, str]], capacity: int, max_bytes: int
) -> None:
    """Any mix of deltas of two blocks, tool updates, other events and takes: every offer's
    outcome, every taken event (nothing lost, nothing reordered, the same merged texts and
    partials), the recorded weights and the total are the reference buffer's."""
    buffer = SubscriberBuffer(capacity, max_bytes)
    reference = EagerBuffer(capacity, max_bytes)
    text = ["", ""]
    for seq, (kind, arg, piece) in enumerate(steps, start=1):
        if kind == "take":
            for _ in range(arg):
                assert shown(buffer.take()) == shown(reference.take())
            continue
        event: AgentSessionEvent
        if kind == "text":
            text[arg] += piece
            event = text_delta(text[arg], piece, arg)
        elif kind == "tool":
            event = tool_update(arg, piece)
        else:
            event = TurnStart()
        item = Sequenced(seq, event)
        assert buffer.offer(item) is reference.offer(item)
        assert len(buffer) == len(reference.items)
        assert buffer.queued_bytes == reference.weight()
    while (taken := reference.take()) is not None:
        assert shown(buffer.take()) == shown(taken)
    assert buffer.take() is None and buffer.queued_bytes == 0


def test_a_lone_delta_is_taken_at_once_and_a_run_whole_when_taken() -> None:
    """Nothing waits for a later event: a delta offered to an empty buffer is the next
    take; deltas merged into the last event come out as one update, with every text, the
    moment it is taken, and the next delta starts a new event."""
    buffer = SubscriberBuffer(capacity=1)
    assert buffer.offer(Sequenced(1, text_delta("a", "a"))) is Offer.QUEUED
    first = buffer.take()
    assert first is not None and first.seq == 1
    assert buffer.take() is None
    for seq, so_far in enumerate(("b", "bc", "bcd"), start=2):
        buffer.offer(Sequenced(seq, text_delta(so_far, so_far[-1])))
    assert buffer.coalesced == 2 and len(buffer) == 1
    run = buffer.take()
    assert run is not None and run.seq == 4
    assert isinstance(run.event, MessageUpdate)
    delta = run.event.assistant_message_event
    assert isinstance(delta, TextDelta) and delta.delta == "bcd"
    buffer.offer(Sequenced(5, text_delta("bcde", "e")))
    after = buffer.take()
    assert after is not None and after.seq == 5
    assert isinstance(after.event, MessageUpdate)
    assert after.event.assistant_message_event.delta == "e"  # type: ignore[union-attr]
