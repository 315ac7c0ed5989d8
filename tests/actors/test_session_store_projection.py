"""The projection (pitrio/actors/session_store/projection.py): pi's buildSessionContext + edits.

Scenarios S113-S126 and S155, S157, S182 of pi-scenarios.md; spec §4.9 and §4.5.1. A property
test drives random appends, branch switches and edits and checks that the incrementally kept
context always equals a naive re-implementation of the rules run from scratch.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from pitrio.actors.agent_loop.state import JsonTranscript, TranscriptView
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.projection import (
    ContextMessages,
    ModelRef,
    Projection,
    edited_message,
)
from pitrio.actors.session_store.stored import StoredEntry, TailMessageEntry, iso_to_ms
from pitrio.actors.session_store.tree import SessionTree
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    ToolDeclaration,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent, ToolCall, text_of
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    ThinkingLevelChangeEntry,
)
from pitrio.messages.transcript import checkpoint_of, replay

HEADER = SessionHeader(version=3, id="s", timestamp="2026-01-01T00:00:00.000Z", cwd="/p")


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=1)


def assistant(text: str, model: str = "faux-1") -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux-api",
        provider="faux",
        model=model,
        usage=Usage(),
        stop_reason="stop",
        timestamp=2,
    )


class Session:
    """A tree plus an incrementally kept projection, fed the way the store feeds them."""

    def __init__(self) -> None:
        numbers = itertools.count(1)
        self.tree = SessionTree(HEADER, new_id=lambda taken: str(next(numbers)))
        self.projection = Projection()
        self._seconds = itertools.count(1)

    def add(self, make: Callable[..., SessionEntry], **fields: Any) -> str:
        stamp = f"2026-01-01T00:{next(self._seconds) // 60:02d}:{next(self._seconds) % 60:02d}.000Z"
        entry = make(id=self.tree.next_id(), parent_id=self.tree.leaf_id, timestamp=stamp, **fields)
        stored = StoredEntry.from_entry(entry)
        self.tree.add(stored)
        self.projection.append(stored)
        return entry.id

    def message(self, message: AgentMessage) -> str:
        return self.add(MessageEntry, message=message)

    def branch(self, entry_id: str | None) -> None:
        if entry_id is None:
            self.tree.reset_leaf()
        else:
            self.tree.branch(entry_id)
        self.projection.reset(self.tree.path())

    def texts(self) -> list[str]:
        return [describe(message) for message in self.projection.context().messages]


def describe(message: AgentMessage) -> str:
    if isinstance(message, CompactionSummaryMessage | BranchSummaryMessage):
        return f"{message.role}:{message.summary}"
    if isinstance(message, BashExecutionMessage):
        return f"bash:{message.output}"
    return text_of(message.content)


def test_no_entries() -> None:  # S113
    context = Projection().context()
    assert list(context.messages) == [] and context.thinking_level == "off"
    assert context.model is None and context.leaf_id is None


def test_chains_and_settings() -> None:  # S114-S118
    s = Session()
    s.message(user("u1"))
    assert s.texts() == ["u1"]
    s.add(ThinkingLevelChangeEntry, thinking_level="high")
    s.message(assistant("a1"))
    s.add(ModelChangeEntry, provider="openai", model_id="gpt-4o")
    assert s.projection.model == ModelRef("openai", "gpt-4o")
    s.message(user("u2"))
    s.message(assistant("a2", model="faux-2"))
    context = s.projection.context()
    assert [m.role for m in context.messages] == ["user", "assistant", "user", "assistant"]
    assert context.thinking_level == "high"
    assert context.model == ModelRef("faux", "faux-2")  # the assistant's model wins


def test_compaction_keeps_from_the_first_kept_entry() -> None:  # S119, S120, S121
    s = Session()
    one = s.message(user("1"))
    s.message(assistant("2"))
    three = s.message(user("3"))
    s.message(assistant("4"))
    s.add(CompactionEntry, summary="sum", first_kept_entry_id=three, tokens_before=100)
    s.message(user("6"))
    s.message(assistant("7"))
    assert s.texts() == ["compactionSummary:sum", "3", "4", "6", "7"]
    s.add(CompactionEntry, summary="again", first_kept_entry_id=one, tokens_before=1)
    # first kept id is before the previous compaction: still on the path, so it is kept
    assert s.texts() == ["compactionSummary:again", "1", "2", "3", "4", "6", "7"]
    s.add(CompactionEntry, summary="last", first_kept_entry_id="nowhere", tokens_before=1)
    assert s.texts() == ["compactionSummary:last"]
    summary = s.projection.context().messages[0]
    assert isinstance(summary, CompactionSummaryMessage) and summary.tokens_before == 1
    assert summary.timestamp == iso_to_ms(s.tree.leaf.timestamp)  # type: ignore[union-attr]


def test_siblings_each_get_their_own_path() -> None:  # S122, S182
    s = Session()
    s.message(user("1"))
    two = s.message(assistant("2"))
    three = s.message(user("3"))
    s.branch(two)
    four = s.message(user("4"))
    assert s.texts() == ["1", "2", "4"]
    assert [describe(m) for m in Projection(s.tree.path(three)).context().messages] == [
        "1",
        "2",
        "3",
    ]
    assert [describe(m) for m in Projection(s.tree.path(four)).context().messages] == [
        "1",
        "2",
        "4",
    ]


def test_branch_summary_is_a_message_when_not_empty() -> None:  # S123
    s = Session()
    one = s.message(user("1"))
    s.message(assistant("2"))
    s.branch(one)
    s.add(BranchSummaryEntry, from_id=one, summary="what happened")
    s.message(user("3"))
    assert s.texts() == ["1", "branchSummary:what happened", "3"]
    s.add(BranchSummaryEntry, from_id=one, summary="")
    assert s.texts() == ["1", "branchSummary:what happened", "3"]


def test_main_and_side_branch_with_compaction_and_summary() -> None:  # S124
    s = Session()
    one = s.message(user("1"))
    two = s.message(assistant("2"))
    three = s.message(user("3"))
    s.message(assistant("4"))
    s.add(CompactionEntry, summary="c", first_kept_entry_id=three, tokens_before=9)
    main_leaf = s.message(user("5"))
    s.branch(two)
    s.add(BranchSummaryEntry, from_id=two, summary="side")
    s.message(user("6"))
    assert s.texts() == ["1", "2", "branchSummary:side", "6"]
    s.branch(main_leaf)
    assert s.texts() == ["compactionSummary:c", "3", "4", "5"]
    assert one in {entry.id for entry in s.tree.entries}


def test_labels_custom_entries_and_unknown_kinds_are_not_messages() -> None:  # S155, S157
    s = Session()
    one = s.message(user("1"))
    s.add(LabelEntry, target_id=one, label="x")
    s.add(CustomEntry, custom_type="my_data", data={"foo": "bar"})
    s.message(user("2"))
    assert s.texts() == ["1", "2"]


def test_custom_message_entries_project_as_custom_messages() -> None:
    s = Session()
    s.add(CustomMessageEntry, custom_type="info", content="hello", display=False, details={"a": 1})
    (message,) = s.projection.context().messages
    assert isinstance(message, CustomMessage)
    assert (message.custom_type, message.content, message.display) == ("info", "hello", False)
    assert message.details == {"a": 1}
    assert message.timestamp == iso_to_ms(s.tree.leaf.timestamp)  # type: ignore[union-attr]


def test_unknown_leaf_means_the_whole_path_of_that_entry_only() -> None:  # S125 lives in the store
    s = Session()
    s.message(user("1"))
    assert Projection(s.tree.path("unknown")).context().leaf_id is None


# -- context edits ------------------------------------------------------------------------------


def edit(s: Session, target: str, replacement: str | None) -> str:
    content = None if replacement is None else ContentReplacement(content=replacement)
    return s.add(ContextEditEntry, target_id=target, replacement=content)


def test_edit_omits_or_replaces_content_latest_wins() -> None:
    s = Session()
    s.message(user("1"))
    failed = s.message(assistant("failed attempt"))
    s.message(user("3"))
    edit(s, failed, None)
    assert s.texts() == ["1", "3"]
    edit(s, failed, "rewritten")
    assert s.texts() == ["1", "rewritten", "3"]
    edit(s, failed, "again")
    assert s.texts() == ["1", "again", "3"]
    edit(s, failed, None)
    assert s.texts() == ["1", "3"]


def test_edit_keeps_every_other_field_and_normalizes_strings() -> None:
    s = Session()
    target = s.message(assistant("original"))
    edit(s, target, "new text")
    (message,) = s.projection.context().messages
    assert isinstance(message, AssistantMessage)
    assert message.content == (TextContent(text="new text"),)
    assert attrs.evolve(message, content=assistant("original").content) == assistant("original")
    # the raw entry is untouched
    stored = s.tree.require(target)
    assert stored.message() == assistant("original")


def test_edited_message_for_every_role() -> None:
    image = ImageContent(data="AAAA", mime_type="image/png")
    blocks = ContentReplacement(content=(TextContent(text="t"), image))
    assert edited_message(user("x"), blocks) == UserMessage(
        content=(TextContent(text="t"), image), timestamp=1
    )
    result = ToolResultMessage(
        tool_call_id="c", tool_name="read", content=(), is_error=False, timestamp=3
    )
    assert edited_message(result, blocks).content == (TextContent(text="t"), image)  # type: ignore[union-attr]
    answer = AssistantMessage(
        content=(ToolCall(id="c", name="read", arguments={}),),
        api="a",
        provider="p",
        model="m",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=4,
    )
    assert edited_message(answer, blocks).content == (TextContent(text="t"),)  # type: ignore[union-attr]
    bash = BashExecutionMessage(
        command="ls", output="x", cancelled=False, truncated=False, timestamp=5
    )
    assert edited_message(bash, blocks).output == "t"  # type: ignore[union-attr]
    summary = BranchSummaryMessage(summary="s", from_id="root", timestamp=6)
    assert edited_message(summary, ContentReplacement(content="short")).summary == "short"  # type: ignore[union-attr]


def test_edits_of_compacted_entries_disappear_with_them() -> None:
    s = Session()
    early = s.message(user("early"))
    edit(s, early, "edited early")
    kept = s.message(user("kept"))
    edit(s, kept, "edited kept")
    s.add(CompactionEntry, summary="c", first_kept_entry_id=kept, tokens_before=1)
    assert s.texts() == ["compactionSummary:c", "edited kept"]
    edit(s, early, "too late")  # its target was summarized away: ignored
    assert s.texts() == ["compactionSummary:c", "edited kept"]


def test_edits_before_the_kept_range_are_dropped() -> None:
    s = Session()
    s.message(user("0"))
    kept = s.message(user("kept"))
    s.add(CompactionEntry, summary="c", first_kept_entry_id=kept, tokens_before=1)
    s.message(user("after"))
    # an edit sitting before the kept range would not survive: rebuild and compare
    assert s.texts() == ["compactionSummary:c", "kept", "after"]


def test_edits_of_other_branches_or_non_messages_are_ignored() -> None:
    s = Session()
    one = s.message(user("1"))
    other = s.message(user("other"))
    s.branch(one)
    custom = s.add(CustomEntry, custom_type="x")
    edit(s, other, None)
    edit(s, custom, None)
    assert s.texts() == ["1"]
    s.branch(other)
    assert s.texts() == ["1", "other"]  # the edit lives on the other branch


def test_views_are_snapshots() -> None:
    s = Session()
    first = s.message(user("1"))
    before = s.projection.context().messages
    s.message(user("2"))
    after_append = s.projection.context().messages
    edit(s, first, None)
    after_edit = s.projection.context().messages
    s.branch(first)
    assert [describe(m) for m in before] == ["1"]
    assert [describe(m) for m in after_append] == ["1", "2"]
    assert [describe(m) for m in after_edit] == ["2"]
    assert [describe(m) for m in s.projection.context().messages] == ["1"]


def test_view_sequence_protocol() -> None:
    s = Session()
    ids = [s.message(user(str(n))) for n in range(5)]
    view = s.projection.context().messages
    assert isinstance(view, ContextMessages) and len(view) == 5
    assert describe(view[-1]) == "4" and [describe(m) for m in view[1:3]] == ["1", "2"]
    assert view.source_id(0) == ids[0] and view.materialize() == tuple(view)
    try:
        view[5]
    except IndexError:
        pass
    else:
        raise AssertionError("no IndexError")


def test_context_is_not_rebuilt_per_request() -> None:
    # Asking for the context after each append touches nothing already projected: count
    # message decodes, which a path walk over lazily stored entries would trigger.
    s = Session()
    for n in range(2000):
        s.message(user(str(n)))
    context = s.projection.context()
    assert context.messages._items is s.projection.context().messages._items


# -- the property: incremental == from scratch == naive rules -------------------------------------


def reference(tree: SessionTree, leaf: str | None) -> dict[str, Any]:
    """The rules of spec §4.9 and §4.5.1 written plainly, for comparison."""
    path = tree.path(leaf) if leaf is not None else []
    level, model, compaction = "off", None, None
    for index, stored in enumerate(path):
        entry = stored.entry()
        if isinstance(entry, ThinkingLevelChangeEntry):
            level = entry.thinking_level
        elif isinstance(entry, ModelChangeEntry):
            model = (entry.provider, entry.model_id)
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            model = (entry.message.provider, entry.message.model)
        elif isinstance(entry, CompactionEntry):
            compaction = index
    out: list[tuple[str, AgentMessage]] = []
    if compaction is None:
        region = path
    else:
        comp = path[compaction].entry()
        assert isinstance(comp, CompactionEntry)
        out.append(
            (
                comp.id,
                CompactionSummaryMessage(
                    summary=comp.summary,
                    tokens_before=comp.tokens_before,
                    timestamp=iso_to_ms(comp.timestamp),
                ),
            )
        )
        ids = [s.id for s in path[:compaction]]
        kept = (
            path[ids.index(comp.first_kept_entry_id) : compaction]
            if comp.first_kept_entry_id in ids
            else []
        )
        region = kept + path[compaction + 1 :]
    edits = {}
    for stored in region:
        entry = stored.entry()
        if isinstance(entry, ContextEditEntry):
            edits[entry.target_id] = entry.replacement
    for stored in region:
        entry = stored.entry()
        message: AgentMessage | None = None
        if isinstance(entry, MessageEntry):
            message = entry.message
        elif isinstance(entry, CustomMessageEntry):
            message = CustomMessage(
                custom_type=entry.custom_type,
                content=entry.content,
                display=entry.display,
                details=entry.details,
                timestamp=iso_to_ms(entry.timestamp),
            )
        elif isinstance(entry, BranchSummaryEntry) and entry.summary:
            message = BranchSummaryMessage(
                summary=entry.summary, from_id=entry.from_id, timestamp=iso_to_ms(entry.timestamp)
            )
        if message is None:
            continue
        if stored.id in edits:
            replacement = edits[stored.id]
            if replacement is None:
                continue
            message = edited_message(message, replacement)
        out.append((stored.id, message))
    return {
        "level": level,
        "model": model,
        "messages": [(source, to_json(message)) for source, message in out],
    }


def observed(projection: Projection) -> dict[str, Any]:
    context = projection.context()
    model = context.model
    messages = context.messages
    return {
        "level": context.thinking_level,
        "model": None if model is None else (model.provider, model.model_id),
        "messages": [(messages.source_id(i), to_json(m)) for i, m in enumerate(messages)],
    }


Operation = tuple[str, int, int]
operations = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "user",
                "assistant",
                "custom",
                "summary",
                "empty-summary",
                "compaction",
                "edit-null",
                "edit-text",
                "level",
                "model",
                "label",
                "note",
                "branch",
                "reset",
            ]
        ),
        st.integers(0, 1000),
        st.integers(0, 1000),
    ),
    max_size=40,
)


@settings(max_examples=300)
@given(operations)
def test_incremental_projection_equals_the_rules(ops: list[Operation]) -> None:
    s = Session()
    views = []
    for kind, a, b in ops:
        all_ids = [stored.id for stored in s.tree.entries]
        pick = all_ids[a % len(all_ids)] if all_ids else None
        path_ids = [stored.id for stored in s.tree.path()]
        on_path = path_ids[b % len(path_ids)] if path_ids else "none"
        if kind == "user":
            s.message(user(f"u{a}"))
        elif kind == "assistant":
            s.message(assistant(f"a{a}", model=f"m{b % 3}"))
        elif kind == "custom":
            s.add(CustomMessageEntry, custom_type="t", content=f"c{a}", display=True)
        elif kind in ("summary", "empty-summary"):
            text = f"s{a}" if kind == "summary" else ""
            s.add(BranchSummaryEntry, from_id=pick or "root", summary=text)
        elif kind == "compaction":
            s.add(CompactionEntry, summary=f"c{a}", first_kept_entry_id=on_path, tokens_before=a)
        elif kind in ("edit-null", "edit-text") and pick is not None:
            # mostly recent entries of the path, so one target often gets several edits
            near = [i for i in path_ids[-4:] if s.tree.require(i).type != "context_edit"]
            target = near[b % len(near)] if near and a % 4 else pick
            edit(s, target, None if kind == "edit-null" else f"e{b}")
        elif kind == "level":
            s.add(ThinkingLevelChangeEntry, thinking_level=f"l{a % 4}")
        elif kind == "model":
            s.add(ModelChangeEntry, provider="p", model_id=f"m{a % 4}")
        elif kind == "label" and pick is not None:
            s.add(LabelEntry, target_id=pick, label=f"x{b}")
        elif kind == "note":
            s.add(CustomEntry, custom_type="note")
        elif kind == "branch" and pick is not None:
            s.branch(pick)
        elif kind == "reset":
            s.branch(None)
        expected = reference(s.tree, s.tree.leaf_id)
        assert observed(s.projection) == expected
        assert observed(Projection(s.tree.path())) == expected
        views.append(
            (s.projection.context().messages, [to_json(m) for m in s.projection.context().messages])
        )
    for view, frozen in views:
        assert [to_json(m) for m in view] == frozen  # every snapshot still reads the same


# -- system messages (pi 1.6.0) ------------------------------------------------------------------


def system(preamble: str, *tools: str) -> SystemMessage:
    added = tuple(ToolDeclaration(name=t, description=t, parameters={}) for t in tools)
    return SystemMessage(
        content="", sections={"preamble": preamble}, timestamp=5, tools_added=added or None
    )


def test_system_messages_project_as_themselves() -> None:
    s = Session()
    s.message(system("P", "read"))
    s.message(user("u1"))
    s.message(assistant("a1"))
    s.message(system("Q"))
    roles = [m.role for m in s.projection.context().messages]
    assert roles == ["system", "user", "assistant", "system"]
    # An edit's replacement leaves a system message as it is; an omission takes it out.
    first = s.tree.path()[0].id
    edit(s, first, "replaced")
    head = s.projection.context().messages[0]
    assert isinstance(head, SystemMessage) and head.sections == {"preamble": "P"}
    edit(s, first, None)
    assert [m.role for m in s.projection.context().messages] == ["user", "assistant", "system"]


def test_a_compaction_leads_with_its_checkpoint_and_folds_kept_system_messages() -> None:
    s = Session()
    s.message(system("P", "read"))
    s.message(user("1"))
    s.message(assistant("2"))
    three = s.message(user("3"))
    s.message(system("Q", "bash"))  # in the kept range: folded into the checkpoint
    s.message(assistant("4"))
    replayed = replay(s.projection.context().messages)
    assert replayed is not None
    checkpoint = checkpoint_of(replayed, 77)
    s.add(
        CompactionEntry,
        summary="sum",
        first_kept_entry_id=three,
        tokens_before=100,
        system_message=checkpoint,
    )
    s.message(system("R"))  # after the compaction: kept as it is
    messages = s.projection.context().messages
    assert [m.role for m in messages] == [
        "system",
        "compactionSummary",
        "user",
        "assistant",
        "system",
    ]
    head = messages[0]
    assert isinstance(head, SystemMessage)
    assert head.sections == {"preamble": "Q"} and head.timestamp == 77
    assert [t.name for t in head.tools_added or ()] == ["read", "bash"]
    compaction_id = s.tree.path()[-2].id
    assert messages.source_id(0) == messages.source_id(1) == compaction_id
    # The request's prompt after it: the checkpoint patched by what came later.
    after = replay(messages)
    assert after is not None and after.sections == {"preamble": "R"}
    # A compaction without a checkpoint (an older file): the summary leads, and the kept
    # range's system messages (R too, now before it) are still dropped (pi's
    # buildContextEntries).
    s.add(CompactionEntry, summary="old", first_kept_entry_id=three, tokens_before=1)
    assert [m.role for m in s.projection.context().messages] == [
        "compactionSummary",
        "user",
        "assistant",
    ]
    # Rebuilt from scratch (a resume), the same context.
    fresh = Projection(s.tree.path())
    assert [to_json(m) for m in fresh.context().messages] == [
        to_json(m) for m in s.projection.context().messages
    ]


def test_json_values_come_from_stored_lines_and_typed_forms() -> None:
    # get_messages (issue 38): a message entry read from a file is sent as its line holds it,
    # parsed but not decoded (its own key order and fields, as pi sends what it read); an
    # edited message or a compaction summary is encoded from its typed form.
    s = Session()
    s.message(user("kept"))
    edited = s.message(assistant("to be edited"))
    line = (
        b'{"type":"message","id":"read","parentId":"%s","timestamp":"2026-01-01T00:09:00.000Z",'
        b'"message":{"timestamp":3,"content":"from a file","role":"user","extra":[1]}}' % b"2"
    )
    read = StoredEntry.read(
        "message", "read", "2", "2026-01-01T00:09:00.000Z", line, "user", 7, "f.jsonl"
    )
    s.tree.add(read)
    s.projection.append(read)
    edit(s, edited, "rewritten")
    view = s.projection.context().messages
    values = [view.json_value(i) for i in range(len(view))]
    assert values[0] == to_json(user("kept"))
    assert values[1] == to_json(view[1]) and values[1]["content"] == [
        {"type": "text", "text": "rewritten"}
    ]
    assert values[2] == {"timestamp": 3, "content": "from a file", "role": "user", "extra": [1]}
    assert list(values[2]) == ["timestamp", "content", "role", "extra"]
    assert not read.decoded  # nothing was decoded to answer


def test_a_transcripts_json_view_joins_stored_and_added_messages() -> None:
    # AgentState.messages_json: the lazy base answers from its lines, the tail (messages of
    # this process's runs) and a decoded tuple are encoded from their typed forms.
    s = Session()
    s.message(user("one"))
    base = s.projection.context().messages
    line = (
        b'{"type":"message","id":"r","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"x","timestamp":1}}'
    )
    read = StoredEntry.read("message", "r", None, "t", line, "user", 1, "f.jsonl")
    lazy = ContextMessages([read], 1)
    joined = JsonTranscript(TranscriptView(lazy, (user("two"),)))
    assert len(joined) == 2
    assert joined[0] == {"role": "user", "content": "x", "timestamp": 1}
    assert joined[-1] == to_json(user("two")) and joined[0:2] == [joined[0], joined[1]]
    assert JsonTranscript(tuple(base))[:] == [to_json(user("one"))]
    try:
        joined[2]
    except IndexError:
        pass
    else:
        raise AssertionError("no IndexError")


def test_a_message_line_ending_with_its_message_gives_its_text_unparsed() -> None:
    # pi's own line (four envelope strings, then the message) is cut, not parsed; a line with
    # anything else in its envelope is parsed. Both give the message as the file holds it.
    header = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}'
    usual = (
        b'{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"x \\"message\\":{","timestamp":1}}'
    )
    extra = (
        b'{"type":"message","id":"b","parentId":"a","timestamp":"t",'
        b'"message":{"role":"user","content":"y","timestamp":2},"note":{"message":{}}}'
    )
    parsed = parse_session_bytes(b"\n".join([header, usual, extra, b""]), origin="f.jsonl")
    first, second = parsed.entries
    assert isinstance(first, TailMessageEntry) and not isinstance(second, TailMessageEntry)
    assert first.message_bytes() == b'{"role":"user","content":"x \\"message\\":{","timestamp":1}'
    assert second.message_bytes() is None
    view = ContextMessages(list(parsed.entries), 2)
    assert view.json_value(0) == first.message_bytes()
    assert view.json_value(1) == {"role": "user", "content": "y", "timestamp": 2}
    assert not first.decoded and not second.decoded


def test_json_values_of_a_range_are_each_messages_json_value() -> None:
    # get_messages asks for 256 at a time (issue 38): json_values(start, stop) must give what
    # json_value gives one by one, for a view mixing lines cut unparsed (TailMessageEntry),
    # lines parsed (another envelope), typed messages and an edited one.
    header = b'{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/p"}'
    lines = [
        b'{"type":"message","id":"a","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"x","timestamp":1}}',
        b'{"type":"message","id":"b","parentId":"a","timestamp":"t",'
        b'"message":{"role":"user","content":"y","timestamp":2},"note":1}',
    ]
    parsed = parse_session_bytes(b"\n".join([header, *lines, b""]), origin="f.jsonl")
    s = Session()
    for stored in parsed.entries:
        s.tree.add(stored)
        s.projection.append(stored)
    s.message(user("typed"))
    edited = s.message(assistant("to be edited"))
    s.message(user("last"))
    edit(s, edited, "rewritten")
    view = s.projection.context().messages
    one_by_one = [view.json_value(i) for i in range(len(view))]
    assert isinstance(one_by_one[0], bytes) and isinstance(one_by_one[1], dict)
    for start in range(len(view) + 1):
        for stop in range(start, len(view) + 1):
            assert view.json_values(start, stop) == one_by_one[start:stop]


def test_slices_of_a_transcripts_json_view_are_its_items() -> None:
    # JsonTranscript's slices take the lazy base's runs in one call; every slice (steps and
    # negative bounds too) is the list of the items read one by one.
    line = (
        b'{"type":"message","id":"r%d","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"x%d","timestamp":1}}'
    )
    read = [
        TailMessageEntry.read("message", f"r{i}", None, "t", line % (i, i), "user", i, "f")
        for i in range(4)
    ]
    joined = JsonTranscript(TranscriptView(ContextMessages(read, 3), (user("a"), user("b"))))
    items = [joined[i] for i in range(len(joined))]
    assert items[0] == b'{"role":"user","content":"x0","timestamp":1}' and len(items) == 5
    for start, stop, step in itertools.product(range(-6, 7), range(-6, 7), (None, 1, 2, -1)):
        assert joined[start:stop:step] == items[start:stop:step]


def test_entries_met_before_and_after_the_first_edit_are_found_by_later_ones() -> None:
    # The path's id -> index map is made when an edit or a compaction first asks (issue 38);
    # entries appended before and after that moment are all found, and after a reset too.
    s = Session()
    first = s.message(user("first"))
    edit(s, first, "first, edited")  # the map is made here
    second = s.message(user("second"))
    edit(s, second, "second, edited")  # appended after: kept in the map
    assert s.texts() == ["first, edited", "second, edited"]
    s.branch(second)  # reset: made again when asked
    third = s.message(user("third"))
    s.add(CompactionEntry, summary="sum", first_kept_entry_id=third, tokens_before=1)
    assert s.texts() == ["compactionSummary:sum", "third"]


def test_projecting_a_long_path_keeps_no_index_per_entry() -> None:
    # Opening a 48,000-entry session projected its path with an id -> index dict (3 MB and a
    # fifth of the projection's time) that only edits and compactions use (issue 38).
    import tracemalloc

    line = (
        b'{"type":"message","id":"r%d","parentId":null,"timestamp":"t",'
        b'"message":{"role":"user","content":"x","timestamp":1}}'
    )
    path = [
        TailMessageEntry.read("message", f"r{i}", None, "t", line % i, "user", i + 1000, "f")
        for i in range(2000)
    ]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        projection = Projection(path)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(projection.context().messages) == 2000
    assert held / len(path) < 40, held / len(path)  # its path and items lists: 16 an entry
