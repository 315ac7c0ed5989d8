"""A run's transcript as the agent loop holds it: the shared start and what the run added.

Kept apart from :mod:`.run` (the loop itself) so each reads in one sitting; the actor makes a
:class:`RunContext` for every run and edits finished messages with :func:`replace_last`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

from pitrio.messages.agent import AgentMessage
from pitrio.messages.snapshot import Snapshot

__all__ = ["RunContext", "replace_last"]


class RunContext:
    """A run's transcript: a :class:`Snapshot` (its start, shared with the requests and the
    agent) and the messages added since, in a list of the run's own.

    Starting a run, taking a request's snapshot and ending the run then cost the messages
    added, not the whole transcript (issue 10: a long session's turn). Replacing a message of
    the snapshot part makes a new, unlinked snapshot (a rare path: a context edit).
    """

    __slots__ = ("base", "tail")

    def __init__(
        self, base: Snapshot[AgentMessage] | None = None, tail: Iterable[AgentMessage] = ()
    ) -> None:
        self.base: Snapshot[AgentMessage] = base if base is not None else Snapshot()
        self.tail: list[AgentMessage] = list(tail)

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)

    def __iter__(self) -> Iterator[AgentMessage]:
        return chain(self.base, self.tail)

    def last(self) -> AgentMessage:
        """The last message (IndexError when there is none)."""
        return self.tail[-1] if self.tail else self.base[-1]

    def append(self, message: AgentMessage) -> None:
        """Add a message at the end."""
        self.tail.append(message)

    def extend(self, messages: Iterable[AgentMessage]) -> None:
        """Add messages at the end."""
        self.tail.extend(messages)

    def view(self) -> Snapshot[AgentMessage]:
        """Everything so far, for a reader that may not look (a hook): the snapshot part as
        it is, not read and not extended (the requests' line of snapshots is left as it was),
        and the messages added since, copied."""
        return Snapshot.over(self.base, self.tail)

    def snapshot(self) -> Snapshot[AgentMessage]:
        """Everything so far as a snapshot made from the previous one (which it becomes)."""
        self.base, self.tail = self.base.extended(self.tail), []
        return self.base

    def set_last(self, message: AgentMessage) -> None:
        """Replace the last message (the one being streamed)."""
        if self.tail:
            self.tail[-1] = message
        else:
            self.base, self.tail = Snapshot(self.base[:-1]), [message]

    def replace_last(self, old: AgentMessage, new: AgentMessage) -> bool:
        """Put ``new`` where ``old`` (the same object) last is; whether it was there."""
        if replace_last(self.tail, old, new) >= 0:
            return True
        items = list(self.base)
        if replace_last(items, old, new) < 0:
            return False
        self.base = Snapshot(items)  # an edit inside: the snapshots after it start afresh
        return True


def replace_last(messages: list[AgentMessage], old: AgentMessage, new: AgentMessage) -> int:
    """Put ``new`` where ``old`` (the same object) last is; its index, or -1 if it was not
    there. Searched from the end: the message just finished is almost always the last one."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index] is old:
            messages[index] = new
            return index
    return -1
