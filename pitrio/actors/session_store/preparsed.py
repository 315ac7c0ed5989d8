"""A session file's parse finished from what a child process read and checked (issue 38).

The ``pitrio`` launcher may start, before pitrio is imported, a child that reads the session
file an RPC command line names and parses its lines on the other core
(:mod:`pitrio._preparse`, which says why). Here the store's read takes that offer: for
each line the child found in the shape of the parser's quick path, its id, parent and role
come with it, and :class:`CheckedParser` builds the entry without parsing the line, a
:class:`~.stored.MappedMessageEntry` reading its line where the child left it; every other
line goes through the parser as read from the file. The result is the in-process parse's
(the tests compare them on mutated files).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import IO, Any

from pitrio import _preparse as preparse
from pitrio.actors.session_store.file_format import ParsedSession, SessionParser
from pitrio.actors.session_store.stored import ROLE_OBJECTS, MappedMessageEntry

_new = object.__new__


class CheckedParser(SessionParser):
    """A :class:`SessionParser` also fed lines whose JSON another process checked."""

    def feed_mapped(
        self,
        lines: preparse.MappedLines,
        ids: Sequence[Any],
        parents: Sequence[Any],
        roles: Sequence[Any],
    ) -> None:
        """Take a block of terminated lines and, for each, the ``(id, parentId, role)`` of
        :func:`pitrio._preparse_child.check_line` (``None`` ids where it found none). A checked
        line is built as the quick path of ``_feed_terminated`` builds it after parsing it,
        with the same checks of what depends on other lines, as a
        :class:`~.stored.MappedMessageEntry` of ``lines``; the rest goes to that method."""
        append = self._entries.append
        known = self._ids
        origin = self.origin
        role_objects = ROLE_OBJECTS
        mapped_class = MappedMessageEntry
        line = self._line
        lines.first = line
        ordered, chain, last = self._ordered, self._chain, self._last
        plain = self._header_seen and self._legacy is None and not self._decode_all
        for entry_id, parent_id, role in zip(ids, parents, roles, strict=True):
            if entry_id is None or not plain or entry_id in known:
                self._line, self._ordered, self._chain, self._last = line, ordered, chain, last
                self._feed_terminated([lines.raw(line + 1 - lines.first)])
                line, ordered, chain, last = self._line, self._ordered, self._chain, self._last
                plain = self._header_seen and self._legacy is None and not self._decode_all
                continue
            line += 1
            if parent_id is not None:
                shared = known.get(parent_id)
                if shared is None:
                    ordered = False  # a later, missing or own parent
                else:
                    parent_id = shared.id
            if parent_id is not last:
                chain = False  # (the id objects are shared: the same object)
            # What TailMessageEntry.read makes, without the call (as _feed_terminated does;
            # a test compares every slot), the line left where the child wrote it.
            stored: MappedMessageEntry = _new(mapped_class)
            stored.type = "message"
            stored.id = entry_id
            stored.parent_id = parent_id
            stored.lines = lines
            stored.role = role_objects.get(role, role)
            stored.line = line
            stored.origin = origin
            stored._entry = None
            stored._message = None
            append(stored)
            known[entry_id] = stored
            last = entry_id
        self._line, self._ordered, self._chain, self._last = line, ordered, chain, last


def read_offered(file: IO[bytes], origin: str, block: int) -> tuple[ParsedSession, int] | None:
    """The file open as ``file`` (at its start) parsed from a child's offer, and the size
    read, if one was made for this very file (same device, inode, size and times); else
    ``None``: read it in this process. What the child had not handed over when it was
    caught up with is read here, ``block`` bytes a read, as the in-process read does."""
    status = os.fstat(file.fileno())
    offer = preparse.take(status)
    if offer is None:
        return None
    records = offer.records(preparse.identity(status))
    if records is None:
        return None
    parser = CheckedParser(origin)
    try:
        for record in records:
            if isinstance(record, bytes):
                if record:
                    parser.feed(record, terminated=False)
            else:
                parser.feed_mapped(*record)
    except (OSError, ValueError, EOFError, TypeError):
        records.close()  # the child stopped and the memory file closed now, not when collected
        return None  # a record that does not load: the file is read again, whole
    if offer.covered == status.st_size:
        return parser.finish(), status.st_size
    file.seek(offer.covered)
    parser.feed_lines(iter(functools.partial(file.read, block), b""))
    return parser.finish(), file.tell()
