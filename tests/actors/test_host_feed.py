"""A client's outgoing order: events, responses after their events, the prompt gate, replay."""

from __future__ import annotations

from pitrio.actors.host.feed import ClientFeed, Outgoing
from pitrio.actors.session.fanout import Offer, Sequenced
from pitrio.messages.events import AgentSettled, AgentStart, TurnStart


def drain(feed: ClientFeed) -> list[str]:
    out: list[str] = []
    while (item := feed.take()) is not None:
        if isinstance(item, Sequenced):
            out.append(f"{item.seq}:{item.event.type}")
        elif isinstance(item, Outgoing):
            out.append(str(item.payload["id"]))
        else:
            out.append(item.decode())
    return out


def test_response_waits_for_its_events() -> None:
    feed = ClientFeed(16)
    feed.offer(Sequenced(1, TurnStart()))
    feed.push(Outgoing(payload={"id": "r"}, after_seq=2))
    feed.offer(Sequenced(2, TurnStart()))
    feed.offer(Sequenced(3, TurnStart()))
    assert drain(feed) == ["1:turn_start", "2:turn_start", "r", "3:turn_start"]


def test_response_goes_at_once_when_its_events_were_sent() -> None:
    feed = ClientFeed(16)
    feed.push(Outgoing(payload={"id": "r"}, after_seq=0))
    feed.offer(Sequenced(1, TurnStart()))
    assert drain(feed) == ["r", "1:turn_start"]


def test_prompt_gate_answers_before_agent_start() -> None:
    feed = ClientFeed(16)
    feed.offer(Sequenced(1, TurnStart()))
    feed.open_gate(1)  # the prompt was sent after event 1
    feed.offer(Sequenced(2, AgentStart()))
    feed.offer(Sequenced(3, TurnStart()))
    assert drain(feed) == ["1:turn_start"]  # then held at the prompt's agent_start
    feed.push(Outgoing(payload={"id": "p"}, after_seq=3, before_start_after=1))
    feed.close_gate(1)
    assert drain(feed) == ["p", "2:agent_start", "3:turn_start"]


def test_gate_holds_only_later_agent_starts() -> None:
    feed = ClientFeed(16)
    feed.offer(Sequenced(1, AgentStart()))
    feed.open_gate(1)
    assert drain(feed) == ["1:agent_start"]


def test_other_responses_pass_a_held_prompt() -> None:
    feed = ClientFeed(16)
    feed.open_gate(0)
    feed.offer(Sequenced(1, AgentStart()))
    feed.push(Outgoing(payload={"id": "state"}, after_seq=0))
    assert drain(feed) == ["state"]
    feed.push(Outgoing(payload={"id": "p"}, after_seq=1, before_start_after=0))
    feed.close_gate(0)
    assert drain(feed) == ["p", "1:agent_start"]


def test_resume_replays_first_and_drops_queued_events() -> None:
    feed = ClientFeed(16)
    feed.push(Outgoing(payload={"id": "hello"}, after_seq=2))
    feed.offer(Sequenced(3, TurnStart()))
    feed.offer(Sequenced(4, TurnStart()))
    feed.resume([b"r3", b"r4"], last_seq=4)
    feed.push(Outgoing(payload={"id": "resumed"}, after_seq=4))
    feed.offer(Sequenced(5, AgentSettled()))
    assert drain(feed) == ["hello", "r3", "r4", "resumed", "5:agent_settled"]


def test_overflow_closes_the_feed() -> None:
    feed = ClientFeed(2)
    assert feed.offer(Sequenced(1, TurnStart())) is Offer.QUEUED
    feed.offer(Sequenced(2, TurnStart()))
    assert feed.offer(Sequenced(3, TurnStart())) is Offer.OVERFLOW
    assert feed.closed_reason is not None and "too slow" in feed.closed_reason
    assert feed.take() is None
    assert not feed.push(Outgoing(payload={"id": "x"}, after_seq=0))


def test_too_many_responses_close_the_feed() -> None:
    feed = ClientFeed(4, max_outgoing=2)
    assert feed.push(Outgoing(payload={"id": 1}, after_seq=0))
    assert feed.push(Outgoing(payload={"id": 2}, after_seq=0))
    assert not feed.push(Outgoing(payload={"id": 3}, after_seq=0))
    assert feed.closed_reason is not None
    assert feed.pending() == 0


def test_resume_skips_what_this_connection_already_got() -> None:
    feed = ClientFeed(16)
    feed.attached_seq = feed.sent_seq = 5
    feed.offer(Sequenced(6, TurnStart()))
    feed.offer(Sequenced(7, TurnStart()))
    assert drain(feed) == ["6:turn_start", "7:turn_start"]
    feed.offer(Sequenced(8, TurnStart()))
    # The client saw up to 3 before it reconnected: 4 and 5 are missing, 6 and 7 came live.
    queued = feed.resume([b"r4", b"r5", b"r6", b"r7", b"r8"], last_seq=8)
    assert queued == 3
    assert drain(feed) == ["r4", "r5", "r8"]


def test_idle_only_when_nothing_is_queued_held_or_cut_off() -> None:
    """The relay writes an event straight to the socket only past an idle feed: anything
    queued, a response waiting, a replay or a prompt gate would otherwise be overtaken."""
    feed = ClientFeed(16)
    assert feed.idle()
    feed.offer(Sequenced(1, TurnStart()))
    assert not feed.idle()
    drain(feed)
    assert feed.idle()
    feed.push(Outgoing(payload={"id": "r"}, after_seq=5))
    assert not feed.idle()
    drain(feed)
    feed.open_gate(1)
    assert not feed.idle()
    feed.close_gate(1)
    feed.resume([b"{}", b"{}"], 11)
    assert not feed.idle()
    drain(feed)
    assert feed.idle()
    feed.close("gone")
    assert not feed.idle()


def test_a_resume_leaves_the_buffer_as_empty_as_a_new_one() -> None:
    # The resume drops the queued events: their weights go with them, so the buffer takes
    # as much afterwards as a new one (stale weights once left it "heavy", merging or cutting
    # off a resumed client early, and misaligned each later take's weight).
    feed = ClientFeed(4)
    for seq in range(1, 5):
        feed.offer(Sequenced(seq, TurnStart()))
    feed.resume([b"x"], last_seq=4)
    assert feed.events.queued_bytes == 0
    assert drain(feed) == ["x"]
    offers = [feed.offer(Sequenced(seq, TurnStart())) for seq in range(5, 9)]
    assert offers == [Offer.QUEUED] * 4
    assert feed.events.queued_bytes == sum(feed.events._weights)
    assert drain(feed) == [f"{seq}:turn_start" for seq in range(5, 9)]
    assert feed.events.queued_bytes == 0
