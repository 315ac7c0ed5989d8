"""Migrations of old session files to the current format (spec §4.10).

Pure functions over the parsed JSON lines of a session file: a list of dicts, the header
first. Nothing here does I/O; the store reads the lines, migrates them and, when anything
changed, rewrites the whole file.

JSON key order matters, because pi rewrites migrated files and pitrio aims to write the same
bytes: keys a migration adds (``version`` on the header, ``id`` / ``parentId`` /
``firstKeptEntryId`` on entries) go at the end of their object, and keys it changes
(``version`` when present, a message's ``role``) keep their place. The input is never
modified: changed objects are copies, unchanged nested values are shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pitrio.messages.entries import CURRENT_SESSION_VERSION, new_entry_id

JsonLine = dict[str, Any]
IdFactory = Callable[[set[str]], str]
"""Makes a fresh entry id that is not in the given set of ids already taken."""

HEADER_TYPE = "session"


def session_version(header: JsonLine) -> int:
    """The format version of a session file given its header; a missing ``version`` means 1."""
    version = header.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    return 1


def _index(value: Any) -> int | None:
    """A JSON number usable as a list index, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def migrate_v1_to_v2(
    lines: Sequence[JsonLine], *, new_id: IdFactory = new_entry_id
) -> list[JsonLine]:
    """Turn a version-1 file (a flat list) into a version-2 tree (a linear chain).

    Every non-header entry gets a fresh ``id`` and ``parentId`` = the previous entry's id
    (``None`` for the first), both added at the end of the entry. A ``compaction`` entry's
    numeric ``firstKeptEntryIndex`` (an index into ``lines``, the header being 0) becomes
    ``firstKeptEntryId``, the id of the entry at that index, added after ``parentId``; the
    index is removed. An index that points at the header or past the end yields no
    ``firstKeptEntryId``. The header gets ``version`` 2 (added at its end if absent).
    """
    out: list[JsonLine] = [dict(line) for line in lines]
    taken: set[str] = set()
    previous: str | None = None
    for line in out:
        if line.get("type") == HEADER_TYPE:
            line["version"] = 2
            continue
        entry_id = new_id(taken)
        taken.add(entry_id)
        line["id"] = entry_id
        line["parentId"] = previous
        previous = entry_id
    for line in out:
        if line.get("type") != "compaction" or "firstKeptEntryIndex" not in line:
            continue
        index = _index(line.pop("firstKeptEntryIndex"))
        if index is not None and 0 <= index < len(out):
            target = out[index]
            if target.get("type") != HEADER_TYPE:
                line["firstKeptEntryId"] = target["id"]
    return out


def migrate_v2_to_v3(lines: Sequence[JsonLine]) -> list[JsonLine]:
    """Rename the legacy message role ``hookMessage`` to ``custom``; header ``version`` 3."""
    out: list[JsonLine] = []
    for line in lines:
        if line.get("type") == HEADER_TYPE:
            line = {**line, "version": 3}
        elif line.get("type") == "message":
            message = line.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                line = {**line, "message": {**message, "role": "custom"}}
        out.append(line)
    return out


def migrate_to_current(
    lines: Sequence[JsonLine], *, new_id: IdFactory = new_entry_id
) -> tuple[list[JsonLine], bool]:
    """Migrate a session file's parsed lines to version 3, one step at a time.

    Returns ``(lines, migrated)``; ``migrated`` is true when any step ran, i.e. when the file
    must be rewritten. A file already at (or beyond) the current version comes back as an
    unchanged copy of the list with ``migrated`` false, as does an empty one. Raises
    :class:`ValueError` if the first line is not a session header.
    """
    if not lines:
        return [], False
    if lines[0].get("type") != HEADER_TYPE:
        raise ValueError(f"session file does not start with a header: {lines[0].get('type')!r}")
    version = session_version(lines[0])
    out = list(lines)
    if version < 2:
        out = migrate_v1_to_v2(out, new_id=new_id)
    if version < 3:
        out = migrate_v2_to_v3(out)
    return out, version < CURRENT_SESSION_VERSION
