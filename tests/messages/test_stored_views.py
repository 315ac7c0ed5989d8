"""Views over a resumed session's stored transcript (issue 38): a snapshot headed by one
(``Snapshot.over``), its conversion (``ConvertedView``, ``PrefixConverter``) and the replay
of its system messages read only what they are asked for."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.convert import (
    IMAGES_BLOCKED,
    ConvertedView,
    PrefixConverter,
    convert_to_llm,
    extends,
    without_images,
)
from pitrio.messages.snapshot import Snapshot, immutable
from pitrio.messages.transcript import SystemReplay, replay, system_messages_from
from tests.messages.stored_view import StoredView

IMAGE = ImageContent(data="aGVsbG8=", mime_type="image/png")


def user(text: str, *, image: bool = False) -> UserMessage:
    content = (TextContent(text=text), IMAGE) if image else text
    return UserMessage(content=content, timestamp=1)


def answer(text: str) -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),), api="a", provider="p", model="m", usage=Usage(),
        stop_reason="stop", timestamp=2,
    )  # fmt: skip


def system(text: str) -> SystemMessage:
    return SystemMessage(content=text, timestamp=3)


def transcript() -> list[AgentMessage]:
    """Stored roles, a system message, a custom message, an excluded bash run and an image."""
    return [
        system("be brief"),
        user("a"),
        answer("b"),
        CustomMessage(custom_type="note", content="hint", display=True, timestamp=4),
        BashExecutionMessage(
            command="ls",
            output="x",
            exit_code=0,
            cancelled=False,
            truncated=False,
            timestamp=5,
            exclude_from_context=True,
        ),
        user("c", image=True),
        ToolResultMessage(
            tool_call_id="t",
            tool_name="read",
            content=(TextContent(text="r"),),
            is_error=False,
            timestamp=6,
        ),
        system("be kind"),
        answer("d"),
    ]


# -- Snapshot.over ---------------------------------------------------------------------------


@given(
    st.integers(0, 12),
    st.lists(st.lists(st.integers(), max_size=4), max_size=8),
    st.integers(-15, 40),
    st.integers(-15, 40),
)
def test_a_snapshot_over_a_head_behaves_as_the_tuple_and_reads_only_what_is_asked(
    size: int, appends: list[list[int]], start: int, stop: int
) -> None:
    head = StoredView([user(str(i)) for i in range(size)])
    snapshot = Snapshot.over(head)
    model: list[object] = list(head._messages)
    for items in appends:
        extra = [user(f"x{v}") for v in items]
        snapshot = snapshot.extended(extra)
        model += extra
    assert len(snapshot) == len(model)
    head.reads.clear()
    sliced = snapshot[start:stop]
    assert sliced == tuple(model[start:stop])
    begin, end, _ = slice(start, stop).indices(len(model))
    # Until a merge copies it, the head is read only where asked (after one, not at all).
    shared = snapshot.head() is head
    assert sorted(set(head.reads)) == [i for i in range(begin, end) if i < size and shared]
    head.reads.clear()
    if model:
        assert snapshot[-1] is model[-1]
        assert head.reads == ([size - 1] if shared and len(model) == size else [])
    assert tuple(snapshot) == tuple(model)  # iterating reads it all, as it must


def test_the_head_is_shared_until_a_merge_reaches_it() -> None:
    head = StoredView([user("a"), user("b"), user("c")])
    snapshot = Snapshot.over(head, [user("d")])
    assert snapshot.head() is head and Snapshot([1]).head() is None
    grown = snapshot.extended([user("e")])
    assert grown.head() is head and grown.starts_with(snapshot)
    assert grown.extended([user("f")]).head() is head
    # Once the items after it are as many, a merge copies it into a tuple.
    more = [user("f"), user("g"), user("h")]
    merged = grown.extended(more)
    assert merged.head() is None and list(merged) == [*head._messages, *grown[3:], *more]
    assert list(Snapshot.over(StoredView([]), [user("z")])) == [Snapshot([user("z")])[0]]
    assert [offset for offset, _ in grown.chunks_from(3)] == [3]
    assert immutable(head) is head


# -- ConvertedView and the converter -----------------------------------------------------------


def test_the_converted_view_is_the_conversion_building_only_what_is_read() -> None:
    messages = transcript()
    head = StoredView(messages)
    view = ConvertedView(head)
    assert list(view) == convert_to_llm(messages)
    head.reads.clear()
    view2 = ConvertedView(head)
    made = sorted(set(head.reads))
    # Only the custom message and the bash run are built (converted at once); the stored
    # ones wait to be read, the system messages are left out unread.
    assert made == [3, 4]
    head.reads.clear()
    assert view2[3] is messages[5] and head.reads == [5]
    assert view2[3] is view2[3] and head.reads == [5]  # kept: the same object, built once
    assert view2[-1] is messages[8]
    assert view2[1:4] == tuple(convert_to_llm(messages)[1:4]) and head.reads == [5, 8, 2]
    texts = view2.json_texts()
    assert [orjson.loads(t) if t is not None else None for t in texts] == [
        to_json(m) for m in convert_to_llm(messages)
    ]
    assert view2.stored_lines() == [3, 4, 0, 7, 8, 10]
    assert view2.built_texts() == {2: orjson.dumps(to_json(view2[2]))}


def test_a_blocking_view_replaces_images_and_keeps_the_result() -> None:
    messages = transcript()
    view = ConvertedView(StoredView(messages), block_images=True)
    assert view.block_images
    converted = view[3]
    assert converted == without_images(messages[5]) and converted is view[3]  # type: ignore[arg-type]
    assert IMAGES_BLOCKED in str(converted.content)


def test_the_converter_takes_a_stored_head_as_a_view_and_extends_it() -> None:
    messages = transcript()
    head = StoredView(messages)
    converter = PrefixConverter()
    first = converter.convert(Snapshot.over(head, [user("new")]))
    assert isinstance(first.head(), ConvertedView)
    assert set(head.reads) == {3, 4}  # nothing stored read: only the two converted at once
    assert list(first) == convert_to_llm([*messages, first[-1]])
    # The next request's transcript extends the last: only the new message is converted.
    added = answer("more")
    later = converter.convert(converter._source.extended([added]))  # type: ignore[attr-defined]
    assert later.follows(first) and later[-1] is added and later.head() is first.head()
    # A transcript that does not extend the last one starts over with a new view.
    again = converter.convert(Snapshot.over(StoredView(messages)))
    assert isinstance(again.head(), ConvertedView) and list(again) == convert_to_llm(messages)


# -- system messages --------------------------------------------------------------------------


def test_system_messages_are_found_without_reading_the_others() -> None:
    messages = transcript()
    head = StoredView(messages)
    added: list[AgentMessage] = [system("tail"), user("x")]
    snapshot = Snapshot.over(head, added)
    found = system_messages_from(snapshot)
    assert [m.content for m in found] == ["be brief", "be kind", "tail"]
    assert set(head.reads) == {0, 7}
    assert [m.content for m in system_messages_from(snapshot, 8)] == ["tail"]
    assert system_messages_from([user("a"), system("s")], 1)[0].content == "s"
    head.reads.clear()
    replayed = SystemReplay()
    assert replayed.current(snapshot) == replay([*messages, system("tail")])
    assert set(head.reads) == {0, 7}
    assert extends(snapshot, snapshot.extended([user("y")]))
