"""Steering and follow-up queues (spec §2.4): pure FIFO queues with a drain mode."""

from __future__ import annotations

from typing import Literal

from pitrio.messages.agent import AgentMessage

QueueMode = Literal["all", "one-at-a-time"]


class MessageQueue:
    """A FIFO of queued messages; :meth:`drain` takes one or all of them, by ``mode``."""

    def __init__(self, mode: QueueMode = "one-at-a-time") -> None:
        self.mode: QueueMode = mode
        # A list, not a deque: a queue holds a few messages a user typed ahead, and an empty
        # deque costs 760 bytes (its first block) in each of a daemon's idle sessions.
        self._items: list[AgentMessage] = []

    def push(self, message: AgentMessage) -> None:
        """Queue a message at the end."""
        self._items.append(message)

    def drain(self) -> list[AgentMessage]:
        """Remove and return the first message (``one-at-a-time``) or every message (``all``)."""
        if not self._items:
            return []
        if self.mode == "one-at-a-time":
            return [self._items.pop(0)]
        items = list(self._items)
        self._items.clear()
        return items

    def clear(self) -> None:
        """Drop every queued message."""
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def snapshot(self) -> tuple[AgentMessage, ...]:
        """The queued messages, oldest first."""
        return tuple(self._items)
