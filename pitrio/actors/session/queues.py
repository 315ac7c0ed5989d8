"""The session's display queues: the steering and follow-up texts a client sees as queued.

Owned by the session actor (its inbox adds and clears, its event pump takes a delivered text
out); each text keeps the queue id it was answered with. The agent loop holds the messages
themselves: these lists only say what is shown as waiting.
"""

from __future__ import annotations

from collections.abc import Callable

from pitrio.messages.events import AgentSessionEvent, QueueUpdate


class DisplayQueues:
    """The queued texts by kind, with their queue ids; changes are announced as
    ``queue_update`` through ``emit``."""

    def __init__(self, emit: Callable[[AgentSessionEvent], None]) -> None:
        self._emit = emit
        self._steering: list[str] = []
        self._follow_up: list[str] = []
        self._steering_ids: list[str] = []
        self._follow_up_ids: list[str] = []

    @property
    def steering(self) -> tuple[str, ...]:
        """The steering texts, oldest first."""
        return tuple(self._steering)

    @property
    def follow_up(self) -> tuple[str, ...]:
        """The follow-up texts, oldest first."""
        return tuple(self._follow_up)

    def queued(self) -> bool:
        """Whether any text is shown as waiting."""
        return bool(self._steering or self._follow_up)

    def add(self, follow_up: bool, text: str, queue_id: str) -> None:
        """Show ``text`` as queued (the loop already holds its message) and announce it."""
        if follow_up:
            self._follow_up.append(text)
            self._follow_up_ids.append(queue_id)
        else:
            self._steering.append(text)
            self._steering_ids.append(queue_id)
        self._announce()

    def take(self, text: str) -> str | None:
        """Remove a delivered text; its queue id, if it was queued (announced then)."""
        for queue, ids in (
            (self._steering, self._steering_ids),
            (self._follow_up, self._follow_up_ids),
        ):
            if text in queue:
                index = queue.index(text)
                del queue[index]
                queue_id = ids.pop(index)
                self._announce()
                return queue_id
        return None

    def clear(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Empty both queues (announced by the caller once the loop's are empty too); what
        they held, steering first."""
        removed = (tuple(self._steering), tuple(self._follow_up))
        self._steering.clear()
        self._follow_up.clear()
        self._steering_ids.clear()
        self._follow_up_ids.clear()
        return removed

    def _announce(self) -> None:
        self._emit(QueueUpdate(steering=tuple(self._steering), follow_up=tuple(self._follow_up)))
