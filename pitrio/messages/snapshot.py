"""Transcript snapshots that know which earlier snapshot they extend (issue 10).

At every model request a session's transcript goes from the agent loop to the converter to
the provider, and each of them resumes from what it did for the previous request when the
transcript still starts with that request's messages. Finding that out by comparison costs a
copy and a pass over the whole transcript at each step: at 10,000 turns, passes over 24,000
objects that are no longer in any CPU cache. A :class:`Snapshot` made by the one who knows
(the loop appends to its own list; the converter appends to its own output) records the
snapshot it extends, so the check takes constant time; anything else still gets compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


class Snapshot(tuple[T, ...]):
    """An immutable transcript, a tuple, that may say which earlier snapshot it extends.

    ``base`` is that snapshot's :attr:`token` and ``base_len`` its length: this snapshot's
    first ``base_len`` items are that snapshot's items, the same objects. The earlier tuple
    itself is not kept, so a chain of snapshots does not keep old transcripts alive.
    """

    token: object
    """Identifies this snapshot to the snapshots made from it."""
    base: object | None
    base_len: int

    def __new__(cls, items: Iterable[T] = (), *, extends: Snapshot[T] | None = None) -> Snapshot[T]:
        """``items`` as a snapshot; with ``extends``, the caller guarantees that ``items``
        starts with exactly the items of ``extends`` (by construction, not by checking)."""
        snapshot = super().__new__(cls, items)
        snapshot.token = object()
        snapshot.base = None if extends is None else extends.token
        snapshot.base_len = 0 if extends is None else len(extends)
        return snapshot

    def follows(self, previous: Sequence[object]) -> bool:
        """Whether this snapshot was made from ``previous`` (a check in constant time)."""
        return (
            self.base is not None
            and self.base is getattr(previous, "token", None)
            and (self.base_len == len(previous))
        )
