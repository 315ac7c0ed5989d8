"""Transcript snapshots that share their items with the snapshots they extend (issue 10).

At every model request a session's transcript goes from the agent loop to the converter to
the provider, and each of them resumes from what it did for the previous request when the
transcript still starts with that request's messages. With plain tuples, making the snapshot
and finding out that it extends the last one both cost passes over the whole transcript: at
10,000 turns, 24,000 objects no longer in any CPU cache, 0.3-0.6 ms a pass.

A :class:`Snapshot` is an immutable sequence kept as a few tuples (*chunks*). Extending one
shares its chunks and adds the new items as a chunk, merging the smallest chunks so there
are O(log n) of them (an item is copied O(log n) times over its life). A snapshot made by
extending another records that one's :attr:`~Snapshot.token` and length, so "does this start
with the previous request's messages?" takes constant time; the earlier snapshot itself is
not kept, so a chain keeps nothing alive but the shared chunks.

Snapshots made one from the other, each extending one not extended before, form a *line*:
each of them starts with the items of every earlier one, so :meth:`~Snapshot.starts_with` can
answer for any earlier snapshot of the line, not only the one it was made from (a reader that
skipped some of the agent's state snapshots still resumes without comparing: issue 38).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar, overload

T = TypeVar("T")


class FrozenView(Sequence[T]):
    """An immutable sequence that may build its items when they are read (a resumed
    session's stored transcript and the views made from it: issue 38). :func:`immutable`
    keeps one as it is: copying it would build every item."""

    __slots__ = ()


class Snapshot(Sequence[T]):
    """An immutable sequence in shared chunks that may say which snapshot it extends."""

    __slots__ = ("_chunks", "_ends", "_extended", "_line", "base", "base_len", "token")

    def __init__(self, items: Iterable[T] = ()) -> None:
        chunk = tuple(items)
        self._chunks: tuple[tuple[T, ...], ...] = (chunk,) if chunk else ()
        self._ends: tuple[int, ...] = (len(chunk),) if chunk else ()
        self.token = object()
        """Identifies this snapshot to the snapshots made from it."""
        self.base: object | None = None
        """The :attr:`token` of the snapshot this one extends, if any."""
        self.base_len = 0
        """That snapshot's length: this one's first ``base_len`` items are its items."""
        self._line = object()  # shared along a line of first extensions (see starts_with)
        self._extended = False  # whether a snapshot was made from this one yet

    def extended(self, items: Iterable[T]) -> Snapshot[T]:
        """This snapshot's items followed by ``items``, as a snapshot that records it extends
        this one (``self`` if ``items`` is empty: nothing to record)."""
        chunk = tuple(items)
        if not chunk:
            return self
        chunks = [*self._chunks, chunk]
        # Merge while a chunk is no longer than the one after it: sizes then halve (at least)
        # from left to right, so there are O(log n) chunks.
        while len(chunks) > 1 and len(chunks[-2]) <= len(chunks[-1]):
            last = chunks.pop()
            chunks[-1] = _as_tuple(chunks[-1]) + last
        twin = Snapshot.__new__(Snapshot)
        twin._chunks = tuple(chunks)
        ends: list[int] = []
        total = 0
        for part in chunks:
            total += len(part)
            ends.append(total)
        twin._ends = tuple(ends)
        twin.token = object()
        twin.base = self.token
        twin.base_len = len(self)
        # Only the first extension continues the line: a second one of the same snapshot
        # is a branch (its items after ``self`` may differ), so it starts a line of its own.
        twin._line = object() if self._extended else self._line
        twin._extended = False
        self._extended = True  # bookkeeping only: the items never change
        return twin

    @classmethod
    def over(cls, head: Sequence[T], items: Iterable[T] = ()) -> Snapshot[T]:
        """A snapshot whose first chunk is ``head`` as it is, not copied, followed by
        ``items``: ``head`` must be immutable, and may build its items when read (a resumed
        session's stored transcript, decoded message by message: issue 38). Reading an item
        or a slice reads only the chunks it touches, so such a head is decoded only where it
        is read; it is copied into a tuple only if a merge reaches it (once the items after
        it are as many)."""
        snapshot: Snapshot[T] = cls()
        if len(head):
            snapshot._chunks = (head,)  # type: ignore[assignment]
            snapshot._ends = (len(head),)
        return snapshot.extended(items)

    def head(self) -> Sequence[T] | None:
        """The first chunk when it is not a tuple (see :meth:`over`), else ``None``."""
        chunks = self._chunks
        return chunks[0] if chunks and not isinstance(chunks[0], tuple) else None

    def chunks_from(self, start: int) -> Iterator[tuple[int, Sequence[T]]]:
        """``(offset, chunk)`` of each chunk holding an item at ``start`` or after, in order:
        for a reader that treats a head (see :meth:`over`) apart."""
        first = bisect_right(self._ends, start)
        offset = self._ends[first - 1] if first else 0
        for chunk in self._chunks[first:]:
            yield offset, chunk
            offset += len(chunk)

    def follows(self, previous: object) -> bool:
        """Whether this snapshot was made by extending ``previous`` (constant time)."""
        return (
            self.base is not None
            and isinstance(previous, Snapshot)
            and self.base is previous.token
            and self.base_len == len(previous)
        )

    def starts_with(self, previous: object) -> bool:
        """Whether this snapshot starts with ``previous``'s items because it was made from it
        by one extension or several along one line (constant time). ``False`` says nothing:
        the items may still be the same."""
        if not isinstance(previous, Snapshot):
            return False
        if previous is self or self.follows(previous):
            return True
        return self._line is previous._line and len(previous) <= len(self)

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __iter__(self) -> Iterator[T]:
        return chain.from_iterable(self._chunks)

    def __reversed__(self) -> Iterator[T]:
        # Chunk by chunk: a search from the end (the last assistant message) reads only there.
        return chain.from_iterable(map(reversed, reversed(self._chunks)))

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return tuple(self)[index]
            if stop <= start:
                return ()
            # Only the chunks the range touches are read (a tail is cheap), each sliced on its
            # own: a head that builds its items (see ``over``) builds only those asked for.
            first = bisect_right(self._ends, start)
            offset = self._ends[first - 1] if first else 0
            parts: list[Any] = []
            for chunk in self._chunks[first:]:
                if offset >= stop:
                    break
                parts.append(chunk[max(start - offset, 0) : stop - offset])
                offset += len(chunk)
            return (
                parts[0]
                if len(parts) == 1 and isinstance(parts[0], tuple)
                else tuple(chain.from_iterable(parts))
            )
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("snapshot index out of range")
        at = bisect_right(self._ends, index)
        offset = self._ends[at - 1] if at else 0
        return self._chunks[at][index - offset]

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, Snapshot):
            return len(self) == len(other) and tuple(self) == tuple(other)
        if isinstance(other, tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Snapshot({list(self)!r})"


def _as_tuple(items: Sequence[T]) -> tuple[T, ...]:
    return items if isinstance(items, tuple) else tuple(items)


def immutable(items: Sequence[T]) -> Sequence[T]:
    """``items`` as an immutable sequence to keep: a tuple, a :class:`Snapshot` or a
    :class:`FrozenView` as it is (copying a snapshot would undo its sharing, a view would
    build its items), anything else as a tuple."""
    return items if isinstance(items, tuple | Snapshot | FrozenView) else tuple(items)
