"""Values held once for every session: the bounded table and JSON kept as shared pieces."""

from __future__ import annotations

from pitrio.messages import shared as module
from pitrio.messages.agent import SystemMessage, ToolDeclaration, user_message
from pitrio.messages.codec import encode_reusing
from pitrio.messages.entries import MessageEntry
from pitrio.messages.events import AgentEnd, EntryAppended, MessageEnd, MessageStart
from pitrio.messages.shared import (
    joined,
    joined_length,
    shared,
    shared_system_json,
    split_shared,
    system_messages,
)


def system(timestamp: int) -> SystemMessage:
    """A first system message as a daemon's sessions each build one (equal but for the time)."""
    tools = tuple(
        ToolDeclaration(
            name=f"tool{index}",
            description="Does one thing well. " * 8,
            parameters={"type": "object", "properties": {"path": {"type": "string"}}},
        )
        for index in range(3)
    )
    sections = {"preamble": "You are a careful assistant. " * 12, "cwd": "<cwd>\n/w\n</cwd>"}
    return SystemMessage(sections=sections, timestamp=timestamp, tools_added=tools)


def test_split_shared_joins_back_to_the_same_bytes() -> None:
    data = b'{"a":"xx","big":"' + b"y" * 300 + b'","z":1}'
    part = b'"' + b"y" * 300 + b'"'
    pieces = split_shared(data, [part, b"not there"])
    assert isinstance(pieces, tuple)
    assert joined(pieces) == data
    assert joined_length(pieces) == len(data)
    assert split_shared(data, [b"absent"]) is data
    assert joined(data) is data


def test_two_sessions_frames_hold_one_copy_of_the_sections_and_tools() -> None:
    first, second = system(1_000), system(2_000)
    frames = [encode_reusing(MessageEnd(message=message)) for message in (first, second)]
    pairs = zip(frames, (first, second), strict=True)
    held = [shared_system_json(frame, (message,)) for frame, message in pairs]
    assert [joined(pieces) for pieces in held] == frames
    assert all(isinstance(pieces, tuple) for pieces in held)
    big = [[piece for piece in pieces if len(piece) >= module.MIN_SHARED] for pieces in held]
    assert len(big[0]) == 2  # the sections and the tool declarations
    assert all(
        a is b for a, b in zip(big[0], big[1], strict=True)
    )  # the same objects in both sessions
    own = sum(len(piece) for piece in held[1] if len(piece) < module.MIN_SHARED)
    assert own < len(frames[1]) // 5


def test_the_events_that_carry_a_system_message() -> None:
    message, user = system(1), user_message("hi", timestamp=2)
    entry = MessageEntry(id="a", parent_id=None, timestamp="t", message=message)
    assert system_messages(MessageStart(message=message)) == (message,)
    assert system_messages(MessageEnd(message=user)) == ()
    assert system_messages(AgentEnd(messages=(message, user))) == (message,)
    assert system_messages(EntryAppended(entry=entry)) == (message,)


def test_the_shared_table_is_bounded() -> None:
    for index in range(module.SHARED_VALUES + 50):
        shared(f"value {index} " * 3)
    assert len(module._SHARED) <= module.SHARED_VALUES
    held = shared(b"kept " * 3)
    assert shared(b"".join([b"kept "] * 3)) is held
