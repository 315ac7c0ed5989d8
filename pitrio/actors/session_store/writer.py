"""A minimal pi JSONL v3 session writer: header, entry chain, lazy file creation (spec §4.6).

Entries are built here (ids, parent ids, timestamps) and written one line each. Until the first
assistant message exists nothing touches the disk; then the header and every buffered entry are
written at once, as pi does.
"""

from __future__ import annotations

import os
from pathlib import Path

from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.codec import dumps, to_json
from pitrio.messages.entries import (
    CURRENT_SESSION_VERSION,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionHeader,
    ThinkingLevelChangeEntry,
    iso_now,
    new_entry_id,
    new_session_id,
)


def new_header(cwd: str, *, parent_session: str | None = None) -> SessionHeader:
    """A fresh version-3 header for a session in ``cwd``."""
    return SessionHeader(
        version=CURRENT_SESSION_VERSION,
        id=new_session_id(),
        timestamp=iso_now(),
        cwd=cwd,
        parent_session=parent_session,
    )


class SessionWriter:
    """Appends entries to one session file (``path=None``: in memory only, never written)."""

    def __init__(self, header: SessionHeader, path: Path | None) -> None:
        self.header = header
        self.path = path
        self.entries: list[SessionEntry] = []
        self._ids: set[str] = set()
        self._leaf: str | None = None
        self._flushed = False

    def append_message(self, message: AgentMessage) -> MessageEntry:
        """Append a ``message`` entry as a child of the leaf."""
        entry = MessageEntry(
            id=self._next_id(), parent_id=self._leaf, timestamp=iso_now(), message=message
        )
        self._append(entry)
        return entry

    def append_model_change(self, provider: str, model_id: str) -> ModelChangeEntry:
        """Append a ``model_change`` entry."""
        entry = ModelChangeEntry(
            id=self._next_id(),
            parent_id=self._leaf,
            timestamp=iso_now(),
            provider=provider,
            model_id=model_id,
        )
        self._append(entry)
        return entry

    def append_thinking_level_change(self, level: str) -> ThinkingLevelChangeEntry:
        """Append a ``thinking_level_change`` entry."""
        entry = ThinkingLevelChangeEntry(
            id=self._next_id(), parent_id=self._leaf, timestamp=iso_now(), thinking_level=level
        )
        self._append(entry)
        return entry

    @property
    def leaf(self) -> str | None:
        """The id of the last appended entry (the parent of the next one)."""
        return self._leaf

    def append_entry(self, entry: SessionEntry) -> None:
        """Append an entry built by the caller (id from :meth:`_next_id`, parent :attr:`leaf`)."""
        self._append(entry)

    def _next_id(self) -> str:
        entry_id = new_entry_id(self._ids)
        self._ids.add(entry_id)
        return entry_id

    def _append(self, entry: SessionEntry) -> None:
        self.entries.append(entry)
        self._leaf = entry.id
        if self.path is None:
            return
        if self._flushed:
            self._write([entry], mode="ab")
        elif isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            self._write([self.header, *self.entries], mode="wb")
            self._flushed = True

    def _write(self, lines: list[SessionHeader | SessionEntry], *, mode: str) -> None:
        assert self.path is not None
        data = b"".join(dumps(to_json(line)) + b"\n" for line in lines)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, mode) as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
