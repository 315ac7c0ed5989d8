"""What is equal across a daemon's sessions, held once: bounded tables of shared values, and
encoded JSON kept as pieces around the big parts of ``system`` messages.

A session's first ``system`` message declares every prompt section and every tool's schema
(about 5 KB of JSON for the built-in tools). pi 1.6.0 sends it in ``message_start``,
``message_end``, ``entry_appended`` and ``agent_end``, and stores it as an entry, so an idle
daemon session kept five encodings of it (its replay frames and its stored line): some 25 KB
of the ~136 KB an idle session held (issue 38). The sections and tool declarations are the
same for every session of one cwd and tool set; only the envelope around them (timestamps,
ids, ``seq``) differs. So what is kept is split into pieces (:func:`split_shared`): the
encodings of a system message's ``sections`` and ``toolsAdded`` come from a bounded table
(:func:`shared`), shared by every frame and line of every session, and the rest is the
session's own. :func:`joined` gives back the exact bytes. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

import orjson

from pitrio.messages.codec import to_json
from pitrio.messages.entries import CompactionEntry, MessageEntry
from pitrio.messages.events import (
    AgentEnd,
    EntryAppended,
    MessageEnd,
    MessageStart,
    MessageUpdate,
)

Pieces = tuple[bytes, ...]
"""Encoded JSON kept in parts; ``b"".join`` of them is the encoding."""

SHARED_VALUES = 512
"""How many distinct values :func:`shared` keeps (a daemon's sessions use a few per cwd and
tool set; past it the oldest is forgotten and a new one is held again)."""
SHARED_FIELDS = ("sections", "toolsAdded")
"""The fields of a ``system`` message whose encodings are shared (the big, common ones)."""
MIN_SHARED = 256
"""A field encoded in fewer bytes is left in the session's own piece (a table entry and a
piece cost about as much)."""

_V = TypeVar("_V", str, bytes)
_SHARED: dict[Any, Any] = {}


def shared(value: _V) -> _V:
    """``value``, or the equal one held already (strings and bytes are immutable, so holding
    one copy for every session changes nothing else). The table is bounded: past
    ``SHARED_VALUES`` entries the oldest is forgotten."""
    held = _SHARED.get(value)
    if held is not None:
        return held  # type: ignore[no-any-return]
    if len(_SHARED) >= SHARED_VALUES:
        del _SHARED[next(iter(_SHARED))]
    _SHARED[value] = value
    return value


def is_system(message: object) -> bool:
    """Whether ``message`` is a ``system`` message (or a compaction's checkpoint of one)."""
    return getattr(message, "role", None) == "system"


def system_messages(event: object) -> tuple[object, ...]:
    """The ``system`` messages a session event carries (``message_start`` / ``message_end``
    of one, an ``entry_appended`` of its entry or of a compaction's checkpoint, ``agent_end``
    listing the run's messages); empty for any other event."""
    if type(event) is MessageUpdate:  # most events of a run: one check
        return ()
    if isinstance(event, MessageStart | MessageEnd):
        return (event.message,) if is_system(event.message) else ()
    if isinstance(event, AgentEnd):
        return tuple(message for message in event.messages if is_system(message))
    if isinstance(event, EntryAppended):
        carried = entry_system_message(event.entry)
        return () if carried is None else (carried,)
    return ()


def entry_system_message(entry: object) -> object | None:
    """The ``system`` message an entry holds (a ``message`` entry of one, or a compaction's
    checkpoint), else ``None``."""
    if isinstance(entry, MessageEntry) and is_system(entry.message):
        return entry.message
    if isinstance(entry, CompactionEntry):
        return entry.system_message
    return None


def field_encodings(messages: Iterable[object]) -> list[bytes]:
    """The encodings of the shared fields of each ``system`` message in ``messages``, in
    order: the bytes any JSON holding the message contains for them (the codec writes a
    nested value as orjson writes it alone). A field orjson refuses (a lone surrogate) is
    skipped; its JSON stays whole."""
    found: list[bytes] = []
    for message in messages:
        if not is_system(message):
            continue
        value = to_json(message)
        for key in SHARED_FIELDS:
            field = value.get(key)
            if not field:
                continue
            try:
                encoded = orjson.dumps(field)
            except orjson.JSONEncodeError:
                continue
            if len(encoded) >= MIN_SHARED:
                found.append(encoded)
    return found


def split_shared(data: bytes, parts: Iterable[bytes]) -> bytes | Pieces:
    """``data`` cut around the first occurrence of each of ``parts`` (searched in order, each
    after the previous), those held from the shared table; ``data`` itself when none occurs.
    Any cut joins back to ``data``: a part that is not found only shares less."""
    pieces: list[bytes] = []
    start = 0
    for part in parts:
        at = data.find(part, start)
        if at < 0:
            continue
        pieces.append(data[start:at])
        pieces.append(shared(part))
        start = at + len(part)
    if not pieces:
        return data
    pieces.append(data[start:])
    return tuple(pieces)


def shared_system_json(data: bytes, messages: Iterable[object]) -> bytes | Pieces:
    """``data`` (JSON holding ``messages``) as pieces around their system messages' shared
    fields, or ``data`` when there are none."""
    parts = field_encodings(messages)
    return split_shared(data, parts) if parts else data


def joined(data: bytes | Pieces) -> bytes:
    """The bytes of ``data``."""
    return data if isinstance(data, bytes) else b"".join(data)


def joined_length(data: bytes | Pieces) -> int:
    """``len(joined(data))`` without joining."""
    return len(data) if isinstance(data, bytes) else sum(map(len, data))
