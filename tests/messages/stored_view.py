"""A stand-in for a resumed session's stored transcript (the store's ``ContextMessages``):
an immutable view that records which items were built, with the methods the views over it
ask (roles, JSON texts, lines and system messages, each answered without building)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import orjson

from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.snapshot import FrozenView

_STORED = {
    UserMessage: "user",
    AssistantMessage: "assistant",
    ToolResultMessage: "toolResult",
    SystemMessage: "system",
}


class StoredView(FrozenView[AgentMessage]):
    """``messages`` as a stored view: those of the four stored roles count as stored lines
    (line ``index + 2``), the others as built ones; :attr:`reads` lists each item built."""

    def __init__(self, messages: Sequence[AgentMessage]) -> None:
        self._messages = tuple(messages)
        self.reads: list[int] = []

    def __len__(self) -> int:
        return len(self._messages)

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[AgentMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | tuple[AgentMessage, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(len(self))))
        if index < 0:
            index += len(self)
        message = self._messages[index]
        self.reads.append(index)
        return message

    def _role(self, message: AgentMessage) -> str | None:
        return _STORED.get(type(message))

    def stored_roles(self) -> list[str | None]:
        """Roles of the stored ones (read from the tuple, not recorded as built)."""
        return [self._role(m) for m in self._messages]

    def stored_texts(self, start: int, stop: int) -> list[Any]:
        """JSON texts of the stored ones."""
        return [
            orjson.dumps(to_json(m)) if self._role(m) else None for m in self._messages[start:stop]
        ]

    def stored_lines(self) -> list[int]:
        """Lines of the stored ones."""
        return [i + 2 if self._role(m) else 0 for i, m in enumerate(self._messages)]

    def system_messages(self, start: int = 0) -> list[SystemMessage]:
        """The system messages from ``start`` (built: recorded)."""
        found = [i for i in range(start, len(self)) if isinstance(self._messages[i], SystemMessage)]
        self.reads.extend(found)
        return [self._messages[i] for i in found]  # type: ignore[misc]
