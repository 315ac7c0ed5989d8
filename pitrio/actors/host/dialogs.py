"""The extension dialogs a hosted session is waiting on, so a client that attaches later (a page
reloaded while a question waits) is shown them too.

Pure bookkeeping, no I/O: :class:`OpenDialogs` records each dialog request relayed to clients
(``select``, ``confirm``, ``input``, ``editor``), forgets it when a client answers it, when its
time limit has passed, or when the session's actors stop (their dialogs died with them), and
lists the ones still open with the time they have left.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from pitrio.messages.events import ExtensionUiRequest

DIALOG_METHODS = frozenset({"select", "confirm", "input", "editor"})
"""The ``extension_ui_request`` methods that wait for an answer."""


@attrs.define
class _Open:
    frame: bytes
    deadline: float | None


@attrs.define
class OpenDialogs:
    """Dialog requests not yet answered or expired, by id, in the order they were asked."""

    _open: dict[str, _Open] = attrs.field(factory=dict)

    def asked(self, event: ExtensionUiRequest, frame: bytes, now: float) -> None:
        """A request was relayed to clients as ``frame`` at ``now`` (seconds)."""
        if event.method not in DIALOG_METHODS:
            return
        deadline = None if event.timeout is None else now + event.timeout / 1000
        self._open[event.id] = _Open(frame, deadline)

    def answered(self, dialog_id: str) -> None:
        """A client answered (or cancelled) the dialog; unknown ids change nothing."""
        self._open.pop(dialog_id, None)

    def clear(self) -> None:
        """The session's actors stopped: no dialog of theirs waits any more."""
        self._open.clear()

    def still_open(self, now: float) -> list[dict[str, Any]]:
        """The open requests as frames, ``timeout`` cut to the milliseconds left; expired
        ones are forgotten."""
        frames: list[dict[str, Any]] = []
        for dialog_id, entry in list(self._open.items()):
            payload: dict[str, Any] = orjson.loads(entry.frame)
            if entry.deadline is not None:
                left = int((entry.deadline - now) * 1000)
                if left <= 0:
                    del self._open[dialog_id]
                    continue
                payload["timeout"] = left
            frames.append(payload)
        return frames

    def __len__(self) -> int:
        return len(self._open)
