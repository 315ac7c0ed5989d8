"""Planted bugs shared by the explorer's tests (a deliberately broken session)."""

from __future__ import annotations

import pytest


def sticky_follow_ups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state a client reads shows every follow-up ever queued: delivered ones are never
    taken off the display list, though the run itself gets them."""
    from pitrio.actors.session.queues import DisplayQueues

    shown: list[str] = []
    add = DisplayQueues.add

    def remembering(self: DisplayQueues, follow_up: bool, text: str, queue_id: str) -> None:
        shown.append(text)
        add(self, follow_up, text, queue_id)

    monkeypatch.setattr(DisplayQueues, "add", remembering)
    monkeypatch.setattr(DisplayQueues, "follow_up", property(lambda self: tuple(shown)))
