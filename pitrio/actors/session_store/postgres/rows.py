"""Entries and headers as database rows, and back (pure: no driver, no I/O).

An entry's row keeps the entry's JSON line exactly (``payload``) plus the envelope fields as
columns; a session row keeps the header line exactly. So what comes out is byte for byte what
went in: loading a session rebuilds pi's JSONL text and reads it with the file store's own
parser (:func:`session_bytes`), and an export is that text.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from pitrio.actors.session_store.catalog import (
    NO_MESSAGES,
    SessionInfo,
    content_text,
    parse_time,
    time_from_ms,
)
from pitrio.actors.session_store.jsonline import loads_line
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.messages.entries import SessionHeader


@attrs.frozen
class WatchedEntry:
    """One entry another daemon committed: its sequence number and its JSON line."""

    seq: int
    raw: bytes


def session_url_path(session_id: str) -> Path:
    """What stands for a session's file in listings of the PostgreSQL store."""
    return Path(f"postgresql:{session_id}")


@attrs.frozen(kw_only=True)
class HeaderRow:
    """The columns of a new session row."""

    id: str
    cwd: str
    version: int
    created_at: datetime.datetime | None
    parent_session: str | None
    header: str

    @classmethod
    def of(cls, header: SessionHeader, raw: bytes) -> HeaderRow:
        """The row of ``header``, whose JSON line is ``raw``."""
        return cls(
            id=header.id,
            cwd=header.cwd,
            version=header.version or 1,
            created_at=parse_time(header.timestamp),
            parent_session=header.parent_session,
            header=raw.decode("utf-8"),
        )

    def params(self) -> dict[str, Any]:
        """The named parameters of :data:`~.sql.INSERT_SESSION` (without the lease's)."""
        return attrs.asdict(self)


@attrs.frozen(kw_only=True)
class ListingDelta:
    """What a batch of entries changes in a session's listing fields."""

    messages: int = 0
    first_message: str | None = None
    name_set: bool = False
    name: str | None = None
    modified: datetime.datetime | None = None

    @classmethod
    def of(cls, entries: Iterable[StoredEntry]) -> ListingDelta:
        """The same rules as the file store's listing (``catalog.read_session_info``)."""
        messages = 0
        first: str | None = None
        name_set = False
        name: str | None = None
        modified: datetime.datetime | None = None
        for stored in entries:
            if stored.type == "session_info":
                value = loads_line(stored.raw).get("name")
                name_set = True
                name = value.strip() or None if isinstance(value, str) else None
            elif stored.type == "message":
                messages += 1
                if stored.role not in ("user", "assistant"):
                    continue
                message = loads_line(stored.raw).get("message") or {}
                text = content_text(message.get("content"))
                if stored.role == "user" and first is None and text:
                    first = text
                when = time_from_ms(message.get("timestamp")) or parse_time(stored.timestamp)
                if when is not None and (modified is None or when > modified):
                    modified = when
        return cls(
            messages=messages,
            first_message=_text_column(first),
            name_set=name_set,
            name=_text_column(name),
            modified=modified,
        )


_UNSTORABLE = re.compile("[\ud800-\udfff\x00]")


def _text_column(value: str | None) -> str | None:
    """A listing string fit for a PostgreSQL text column, which cannot hold the lone
    surrogate or the NUL a session line may carry (its raw line keeps them, escaped): U+FFFD
    instead (issue 36)."""
    return None if value is None else _UNSTORABLE.sub("\ufffd", value)


def append_params(
    session_id: str, fence: int, first_seq: int, entries: Sequence[StoredEntry]
) -> dict[str, Any]:
    """The named parameters of :data:`~.sql.APPEND` for ``entries`` numbered from
    ``first_seq``."""
    delta = ListingDelta.of(entries)
    last_seq = first_seq + len(entries) - 1
    return {
        "session_id": session_id,
        "fence": fence,
        "first_seq": first_seq,
        "last_seq": last_seq,
        "seqs": list(range(first_seq, last_seq + 1)),
        "entry_ids": [stored.id for stored in entries],
        "parent_ids": [stored.parent_id for stored in entries],
        "types": [stored.type for stored in entries],
        "created": [parse_time(stored.timestamp) for stored in entries],
        "payloads": [stored.raw.decode("utf-8") for stored in entries],
        "messages": delta.messages,
        "first_message": delta.first_message,
        "name_set": delta.name_set,
        "name": delta.name,
        "modified": delta.modified,
        "note": notification(session_id, last_seq),
    }


def notification(session_id: str, seq: int) -> str:
    """The payload of an append's notification: ``<session id> <last sequence number>``."""
    return f"{session_id} {seq}"


def parse_notification(payload: str) -> tuple[str, int] | None:
    """``(session id, sequence number)`` of a notification (``None`` if it is not one)."""
    session_id, _, seq = payload.rpartition(" ")
    if not session_id or not seq.isdigit():
        return None
    return session_id, int(seq)


def session_bytes(header: str, payloads: Iterable[str]) -> bytes:
    """The session as pi's JSONL text: the header line, then one line per entry."""
    parts = [header, *payloads]
    return ("\n".join(parts) + "\n").encode("utf-8")


def info_of(row: Sequence[Any]) -> SessionInfo:
    """A :class:`SessionInfo` from a row of :data:`~.sql.LIST`."""
    session_id, cwd, name, parent, created, modified, count, first = row[:8]
    return SessionInfo(
        path=session_url_path(session_id),
        id=session_id,
        cwd=cwd,
        name=name,
        parent_session_path=parent,
        created=created or modified,
        modified=modified,
        message_count=count,
        first_message=first or NO_MESSAGES,
        all_messages_text="",
    )
