"""Transcript snapshots: a sequence in shared chunks that knows what it extends (issue 10)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pitrio.messages.snapshot import Snapshot


@given(st.lists(st.lists(st.integers(), max_size=5), max_size=40), st.data())
def test_behaves_as_the_tuple_of_its_items(appends: list[list[int]], data: st.DataObject) -> None:
    snapshot: Snapshot[int] = Snapshot()
    model: list[int] = []
    for items in appends:
        snapshot = snapshot.extended(items)
        model += items
    expected = tuple(model)
    assert len(snapshot) == len(expected)
    assert tuple(snapshot) == expected and list(iter(snapshot)) == model
    assert snapshot == expected and snapshot == model
    if expected:
        index = data.draw(st.integers(-len(expected), len(expected) - 1))
        assert snapshot[index] == expected[index]
    start = data.draw(st.integers(-len(expected) - 2, len(expected) + 2))
    stop = data.draw(st.integers(-len(expected) - 2, len(expected) + 2))
    step = data.draw(st.sampled_from([1, 1, 2, -1]))
    assert snapshot[start:stop:step] == expected[start:stop:step]
    assert snapshot[start:] == expected[start:]
    with pytest.raises(IndexError):
        snapshot[len(expected)]


def test_extending_shares_the_items_and_records_what_it_extends() -> None:
    first = Snapshot([object(), object()])
    second = first.extended([object()])
    assert second.follows(first) and not first.follows(second)
    assert all(a is b for a, b in zip(second, first, strict=False))
    third = second.extended([object()])
    assert third.follows(second) and not third.follows(first)  # only the one it was made from
    assert second.extended([]) is second  # nothing added: nothing to record
    assert not Snapshot(first).follows(first)  # a copy is not known to extend anything
    assert not second.follows(tuple(first))  # nor does anything follow a plain tuple


def test_chunks_stay_logarithmic_while_it_grows_by_small_steps() -> None:
    # A session grows by a message or two a turn: a snapshot of n items keeps O(log n)
    # chunks, so an extension copies little on the whole (merges halve in size leftwards).
    snapshot: Snapshot[int] = Snapshot()
    copied = 0
    for turn in range(10_000):
        before = snapshot
        snapshot = snapshot.extended([turn, turn])
        merged = len(snapshot._chunks[-1]) - 2
        copied += merged + 2 if merged else 2
        assert snapshot.follows(before)
    assert len(snapshot._chunks) <= math.log2(len(snapshot)) + 2
    assert copied <= len(snapshot) * (math.log2(len(snapshot)) + 2)
    assert snapshot[-1] == 9_999 and snapshot[0] == 0 and snapshot[12_345] == 6_172


def test_a_line_of_first_extensions_starts_with_every_earlier_snapshot_of_it() -> None:
    # Issue 38: a reader that skipped some snapshots (the driver, between which other state
    # reads were made) still learns in constant time that the latest starts with its own.
    first = Snapshot([object()])
    second = first.extended([object()])
    third = second.extended([object()])
    assert third.starts_with(first) and third.starts_with(second) and third.starts_with(third)
    assert not first.starts_with(third)  # a later one is longer
    branch = second.extended([object()])  # second extended again: a branch, a new line
    assert branch.starts_with(second)  # the one it was made from
    assert not branch.starts_with(first)  # true, but not known without comparing
    after = branch.extended([object()])
    assert after.starts_with(branch) and not after.starts_with(second)  # its own line
    assert not after.starts_with(third) and not third.starts_with(branch)  # other branches
    assert not Snapshot(third).starts_with(third) and not third.starts_with(tuple(third))


@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 3)), max_size=40))
def test_starts_with_never_claims_falsely(steps: list[tuple[int, int]]) -> None:
    """Snapshots extended from any earlier one (branches included): whenever one says it
    starts with another, it holds the other's items first."""
    made: list[Snapshot[int]] = [Snapshot()]
    for counter, (pick, count) in enumerate(steps):
        parent = made[pick % len(made)]
        made.append(parent.extended(range(counter * 10, counter * 10 + count)))
    for later in made:
        for earlier in made:
            if later.starts_with(earlier):
                assert tuple(later)[: len(earlier)] == tuple(earlier)


def test_reversed_reads_from_the_end() -> None:
    snapshot = Snapshot([1, 2]).extended([3]).extended([4, 5])
    assert list(reversed(snapshot)) == [5, 4, 3, 2, 1]
