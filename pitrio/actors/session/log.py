"""What the session actor needs from its session store, as a small protocol.

:class:`SessionLog` is the narrow interface the :class:`~pitrio.actors.session.actor.SessionActor`
persists through: append entries, read the projection. :class:`MemoryLog` implements it over the
minimal lazy :class:`~pitrio.actors.session_store.writer.SessionWriter` (in memory, or a file),
with the projection rules the session layer relies on: message entries in order, ``context_edit``
omissions and replacements applied (latest edit wins).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import attrs
import trio

from pitrio.actors.session_store.writer import SessionWriter
from pitrio.messages.agent import AgentMessage
from pitrio.messages.entries import (
    ContentReplacement,
    ContextEditEntry,
    MessageEntry,
    SessionEntry,
    SessionHeader,
    iso_now,
)


class SessionLog(Protocol):
    """The persistence the session actor uses."""

    @property
    def header(self) -> SessionHeader:
        """The session's header line."""
        ...

    @property
    def path(self) -> Path | None:
        """The session file, if persisted."""
        ...

    async def append_message(self, message: AgentMessage) -> SessionEntry:
        """Persist a transcript message; returns its entry."""
        ...

    async def append_context_edit(
        self, target_id: str, replacement: ContentReplacement | None
    ) -> SessionEntry:
        """Persist an omission (``None``) or content replacement of ``target_id``."""
        ...

    async def context_messages(self) -> tuple[AgentMessage, ...]:
        """The projected transcript at the leaf (what the model is sent)."""
        ...


class MemoryLog:
    """A :class:`SessionLog` over :class:`SessionWriter`, projecting messages and context edits."""

    def __init__(self, writer: SessionWriter) -> None:
        self._writer = writer

    @property
    def header(self) -> SessionHeader:
        return self._writer.header

    @property
    def path(self) -> Path | None:
        return self._writer.path

    @property
    def entries(self) -> list[SessionEntry]:
        """Every entry appended so far."""
        return self._writer.entries

    async def _io(self, work: Callable[[], SessionEntry]) -> SessionEntry:
        # Only file writes go to a thread: in memory there is nothing to wait for, and a thread
        # would let a test's MockClock jump ahead while it runs.
        if self._writer.path is None:
            await trio.lowlevel.checkpoint()
            return work()
        return await trio.to_thread.run_sync(work)

    async def append_message(self, message: AgentMessage) -> SessionEntry:
        return await self._io(lambda: self._writer.append_message(message))

    async def append_context_edit(
        self, target_id: str, replacement: ContentReplacement | None
    ) -> SessionEntry:
        def append() -> SessionEntry:
            writer = self._writer
            entry = ContextEditEntry(
                id=writer._next_id(),
                parent_id=writer.leaf,
                timestamp=iso_now(),
                target_id=target_id,
                replacement=replacement,
            )
            writer.append_entry(entry)
            return entry

        return await self._io(append)

    async def context_messages(self) -> tuple[AgentMessage, ...]:
        edits: dict[str, ContentReplacement | None] = {}
        for entry in self._writer.entries:
            if isinstance(entry, ContextEditEntry):
                edits[entry.target_id] = entry.replacement
        messages: list[AgentMessage] = []
        for entry in self._writer.entries:
            if not isinstance(entry, MessageEntry):
                continue
            if entry.id in edits:
                replacement = edits[entry.id]
                if replacement is None:
                    continue
                messages.append(attrs.evolve(entry.message, content=replacement.content))  # type: ignore[arg-type]
            else:
                messages.append(entry.message)
        return tuple(messages)
