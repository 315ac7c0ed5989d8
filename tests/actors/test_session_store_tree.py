"""The entry tree (pitrio/actors/session_store/tree.py).

Scenarios of pi-scenarios.md §17-§18 (S149-S156, S160-S185) on the pure core; spec §4.7, §4.8.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.tree import SessionTree, TreeNode
from pitrio.errors import EntryNotFoundError
from pitrio.messages.agent import AssistantMessage, Usage, user_message
from pitrio.messages.content import TextContent
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
)

HEADER = SessionHeader(version=3, id="s", timestamp="2026-01-01T00:00:00.000Z", cwd="/p")


def counter_ids() -> Callable[[Callable[[str], bool]], str]:
    numbers = itertools.count(1)
    return lambda taken: str(next(numbers))


class Builder:
    """Appends entries the way the store does: parent = leaf, fresh id, rising timestamps."""

    def __init__(self) -> None:
        self.tree = SessionTree(HEADER, new_id=counter_ids())
        self._seconds = itertools.count(1)

    def add(self, make: Callable[..., SessionEntry], **fields: Any) -> str:
        stamp = f"2026-01-01T00:00:{next(self._seconds):02d}.000Z"
        entry = make(id=self.tree.next_id(), parent_id=self.tree.leaf_id, timestamp=stamp, **fields)
        self.tree.add(StoredEntry.from_entry(entry))
        return entry.id

    def user(self, text: str = "u") -> str:
        return self.add(MessageEntry, message=user_message(text, timestamp=1))

    def assistant(self, text: str = "a") -> str:
        message = AssistantMessage(
            content=(TextContent(text=text),),
            api="faux-api",
            provider="faux",
            model="faux-1",
            usage=Usage(),
            stop_reason="stop",
            timestamp=2,
        )
        return self.add(MessageEntry, message=message)

    def label(self, target: str, label: str | None) -> str:
        return self.add(LabelEntry, target_id=target, label=label)


def ids(entries: list[StoredEntry]) -> list[str]:
    return [stored.id for stored in entries]


def shape(nodes: list[TreeNode]) -> list[Any]:
    return [(node.entry.id, shape(node.children)) for node in nodes]


def test_appends_chain_through_parent_ids() -> None:  # S160, S165
    b = Builder()
    assert b.tree.leaf_id is None and b.tree.leaf is None
    one, two, three = b.user(), b.assistant(), b.user()
    assert [(s.id, s.parent_id, s.type) for s in b.tree.entries] == [
        (one, None, "message"),
        (two, one, "message"),
        (three, two, "message"),
    ]
    assert b.tree.leaf_id == three


def test_every_entry_kind_chains_the_same_way() -> None:  # S161-S164
    b = Builder()
    m1 = b.user()
    level = b.add(ThinkingLevelChangeEntry, thinking_level="high")
    model = b.add(ModelChangeEntry, provider="openai", model_id="gpt-4o")
    compaction = b.add(CompactionEntry, summary="s", first_kept_entry_id=m1, tokens_before=10)
    custom = b.add(CustomEntry, custom_type="my_data", data={"foo": "bar"})
    m2 = b.user()
    parents = {s.id: s.parent_id for s in b.tree.entries}
    assert parents == {
        m1: None,
        level: m1,
        model: level,
        compaction: model,
        custom: compaction,
        m2: custom,
    }
    assert b.tree.leaf_id == m2


def test_path_from_root() -> None:  # S166-S169
    b = Builder()
    assert b.tree.path() == []
    one = b.user()
    assert ids(b.tree.path()) == [one]
    two, three, four = b.assistant(), b.user(), b.assistant()
    assert ids(b.tree.path()) == [one, two, three, four]
    assert ids(b.tree.path(two)) == [one, two]
    assert b.tree.path("unknown") == []


def test_tree_shapes() -> None:  # S170-S174
    b = Builder()
    assert b.tree.tree() == []
    one, two, three = b.user(), b.assistant(), b.user()
    assert shape(b.tree.tree()) == [(one, [(two, [(three, [])])])]
    b.tree.branch(two)
    four = b.user()
    b.tree.branch(two)
    five = b.user()
    b.tree.branch(four)
    six = b.assistant()
    assert shape(b.tree.tree()) == [(one, [(two, [(three, []), (four, [(six, [])]), (five, [])])])]
    assert ids(b.tree.children(two)) == [three, four, five]
    assert ids(b.tree.children(six)) == []


def test_children_in_tree_are_sorted_by_timestamp_but_file_order_in_children() -> None:
    tree = SessionTree(HEADER)

    def message(entry_id: str, parent: str | None, stamp: str) -> StoredEntry:
        entry = MessageEntry(
            id=entry_id, parent_id=parent, timestamp=stamp, message=user_message("x", timestamp=1)
        )
        return StoredEntry.from_entry(entry)

    tree.add(message("r", None, "2026-01-01T00:00:00.000Z"))
    tree.add(message("late", "r", "2026-01-01T00:00:09.000Z"))
    tree.add(message("early", "r", "2026-01-01T00:00:01.000Z"))
    assert ids(tree.children("r")) == ["late", "early"]
    assert shape(tree.tree()) == [("r", [("early", []), ("late", [])])]


def test_roots_include_orphans_and_self_parents() -> None:
    tree = SessionTree(HEADER)
    for entry_id, parent in [("a", None), ("b", "missing"), ("c", "c"), ("d", "a")]:
        entry = MessageEntry(
            id=entry_id, parent_id=parent, timestamp="t", message=user_message("x", timestamp=1)
        )
        tree.add(StoredEntry.from_entry(entry))
    assert ids(tree.roots()) == ["a", "b", "c"]
    assert shape(tree.tree()) == [("a", [("d", [])]), ("b", []), ("c", [])]
    assert ids(tree.path("b")) == ["b"]  # S126: a broken chain is tolerated
    assert ids(tree.path("c")) == ["c"]


def test_branch_moves_the_leaf_and_the_next_append_is_a_sibling() -> None:  # S175-S177
    b = Builder()
    one, two = b.user(), b.assistant()
    b.tree.branch(one)
    assert b.tree.leaf_id == one
    three = b.user()
    assert b.tree.get(three) is not None and b.tree.require(three).parent_id == one
    assert ids(b.tree.children(one)) == [two, three]
    with pytest.raises(EntryNotFoundError, match=r"^Entry nonexistent not found$"):
        b.tree.branch("nonexistent")


def test_reset_leaf_makes_a_new_root() -> None:
    b = Builder()
    b.user()
    b.tree.reset_leaf()
    assert b.tree.leaf_id is None and b.tree.path() == []
    second_root = b.user()
    assert b.tree.require(second_root).parent_id is None
    assert len(b.tree.roots()) == 2


def test_get_entry() -> None:  # S180, S181
    b = Builder()
    one = b.user()
    assert b.tree.get("nope") is None
    assert b.tree.get(one) is b.tree.leaf


def test_labels() -> None:  # S149-S152
    b = Builder()
    one = b.user()
    assert b.tree.label(one) is None
    label_id = b.label(one, "checkpoint")
    assert b.tree.label(one) == "checkpoint"
    assert b.tree.require(label_id).type == "label"
    assert b.tree.leaf_id == label_id  # a label is a child of the leaf and moves it
    b.label(one, "second")
    b.label(one, "third")
    assert b.tree.label(one) == "third"
    b.label(one, None)
    assert b.tree.label(one) is None and b.tree.labels == {}
    b.label(one, "back")
    b.label(one, "")
    assert b.tree.label(one) is None
    final = b.label(one, "final")
    node = b.tree.tree()[0]
    assert node.label == "final"
    assert node.label_timestamp == b.tree.require(final).timestamp


def test_labels_and_name_are_global_whatever_the_branch() -> None:
    b = Builder()
    one, two = b.user(), b.assistant()
    b.add(SessionInfoEntry, name="  First name  ")
    assert b.tree.session_name == "First name"
    b.tree.branch(one)
    b.label(two, "on the other branch")
    b.add(SessionInfoEntry, name="Second")
    assert b.tree.label(two) == "on the other branch"
    assert b.tree.session_name == "Second"
    b.add(SessionInfoEntry, name="   ")
    assert b.tree.session_name is None


def test_user_messages_for_forking() -> None:
    b = Builder()
    one = b.user("first")
    b.assistant()
    b.user("")
    b.tree.branch(one)
    other = b.user("other branch")
    assert [(m.entry_id, m.text) for m in b.tree.user_messages_for_forking()] == [
        (one, "first"),
        (other, "other branch"),
    ]


def test_branched_entries_keep_the_path_and_re_create_its_labels() -> None:  # S153, S154
    b = Builder()
    one, two = b.user(), b.assistant()
    first_label = b.label(one, "start")
    three = b.user()
    b.label(two, "answer")
    b.tree.branch(one)
    off_path = b.user()
    b.label(off_path, "elsewhere")
    b.tree.branch(three)
    out = b.tree.branched_entries(three)
    assert ids(out[:3]) == [one, two, three]
    assert out[0] is b.tree.require(one) and out[1] is b.tree.require(two)  # the same bytes
    # three hung below the dropped label entry: re-parented so the chain stays whole.
    assert b.tree.require(three).parent_id == first_label and out[2].parent_id == two
    assert out[2].raw == b.tree.require(three).raw.replace(first_label.encode(), two.encode())
    assert out[2].entry().parent_id == two
    labels = out[3:]
    assert [(s.type, s.entry().target_id, s.entry().label) for s in labels] == [  # type: ignore[union-attr]
        ("label", one, "start"),
        ("label", two, "answer"),
    ]
    assert labels[0].parent_id == three and labels[1].parent_id == labels[0].id
    assert labels[0].timestamp == b.tree.require(first_label).timestamp
    assert {s.id for s in labels}.isdisjoint(s.id for s in b.tree.entries)


def test_branched_entries_unknown_leaf() -> None:  # S183
    with pytest.raises(EntryNotFoundError, match=r"^Entry nonexistent not found$"):
        Builder().tree.branched_entries("nonexistent")


def test_branched_entries_of_a_branch() -> None:  # S184, S185
    b = Builder()
    one, two, three = b.user(), b.assistant(), b.user()
    b.tree.branch(two)
    four = b.user()
    five = b.assistant()
    assert ids(b.tree.branched_entries(two)) == [one, two]
    assert ids(b.tree.branched_entries(five)) == [one, two, four, five]
    assert three not in ids(b.tree.branched_entries(five))


def test_branch_summary_chains_like_any_entry() -> None:  # S178
    b = Builder()
    one = b.user()
    b.assistant()
    b.user()
    b.tree.branch(one)
    summary = b.add(BranchSummaryEntry, from_id=one, summary="explored")
    assert b.tree.require(summary).parent_id == one and b.tree.leaf_id == summary


def test_random_ids_avoid_collisions() -> None:
    tree = SessionTree(HEADER)
    seen = set()
    for _ in range(200):
        entry_id = tree.next_id()
        assert len(entry_id) == 8 and int(entry_id, 16) >= 0
        entry = CustomEntry(custom_type="x", id=entry_id, parent_id=tree.leaf_id, timestamp="t")
        tree.add(StoredEntry.from_entry(entry))
        seen.add(entry_id)
    assert len(seen) == 200


def test_path_survives_a_parent_cycle() -> None:
    tree = SessionTree(HEADER)
    for entry_id, parent in [("a", "b"), ("b", "a")]:
        entry = CustomEntry(custom_type="x", id=entry_id, parent_id=parent, timestamp="t")
        tree.add(StoredEntry.from_entry(entry))
    assert len(tree.path("a")) <= 3


def test_a_tree_built_from_entries_matches_one_built_by_appends() -> None:
    b = Builder()
    one = b.user("one")
    b.assistant()
    b.label(one, "first")
    b.add(SessionInfoEntry, name="  named  ")
    b.label(one, "second")
    b.tree.branch(one)
    b.user("side")
    b.add(SessionInfoEntry, name="")
    b.add(SessionInfoEntry, name="last")
    built = SessionTree(HEADER, b.tree.entries, new_id=counter_ids())
    assert ids(built.entries) == ids(b.tree.entries)
    assert built.leaf_id == b.tree.entries[-1].id
    assert built.labels == b.tree.labels == {one: "second"}
    assert built.session_name == b.tree.session_name == "last"
    assert all(built.get(stored.id) is stored for stored in b.tree.entries)
    assert shape(built.tree()) == shape(b.tree.tree())
    assert ids(built.children(one)) == ids(b.tree.children(one))
    empty = SessionTree(HEADER, [], new_id=counter_ids())
    assert empty.leaf_id is None and len(empty) == 0


def _walked(tree: SessionTree) -> list[str]:
    """The path to the leaf by walking up parents (what path() gives, by definition)."""
    return [stored.id for stored in tree.ancestors(tree.leaf_id)][::-1]


def test_the_path_of_a_chain_is_every_entry_until_a_branch_or_a_repeated_id() -> None:
    # One chain in file order answers path() from the list (issue 38); anything else walks.
    b = Builder()
    one, two, three = b.user(), b.assistant(), b.user()
    chain = SessionTree(HEADER, b.tree.entries)
    assert ids(chain.path()) == ids(b.tree.path()) == [one, two, three] == _walked(chain)
    b.tree.branch(one)
    four = b.user()
    for tree in (b.tree, SessionTree(HEADER, b.tree.entries)):
        assert ids(tree.path()) == [one, four] == _walked(tree)
    again = CustomEntry(custom_type="x", id=three, parent_id=three, timestamp="t")
    twice = SessionTree(HEADER, [*b.tree.entries[:3], StoredEntry.from_entry(again)])
    assert ids(twice.path()) == _walked(twice) == [three]
    root = b.tree.entries[0]
    orphan = StoredEntry.from_entry(
        CustomEntry(custom_type="x", id="o", parent_id=None, timestamp="t")
    )
    for tree in (SessionTree(HEADER, [root]), SessionTree(HEADER)):
        tree.add(orphan)
        assert ids(tree.path()) == ["o"] == _walked(tree)
