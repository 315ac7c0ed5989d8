"""What a session file's one writer knows the file holds (pure; issue 36, item 3).

A :class:`FileMark` is the size, modification time and last bytes of the file as the store
last left it; :mod:`.foreign` compares it with the file before each batch.
"""

from __future__ import annotations

import attrs

SUFFIX_BYTES = 256
"""How many of its last bytes a mark keeps: enough to tell a rewritten end from an intact
one without re-reading the file (a whole line, usually; always the newline that ends it)."""


@attrs.frozen
class FileMark:
    """What a store knows its file holds: ``size`` bytes, last modified at ``mtime_ns``,
    ending with ``suffix`` (at most :data:`SUFFIX_BYTES`)."""

    size: int
    mtime_ns: int
    suffix: bytes

    def unchanged(self, size: int, mtime_ns: int) -> bool:
        """Whether a file of this size and time is, as far as a stat can tell, the same."""
        return size == self.size and mtime_ns == self.mtime_ns

    @property
    def read_from(self) -> int:
        """Where a re-read starts: the first byte of the suffix."""
        return self.size - len(self.suffix)

    def after(self, data: bytes, mtime_ns: int) -> FileMark:
        """The mark once ``data`` is appended (and the file's time is ``mtime_ns``)."""
        suffix = (self.suffix + data)[-SUFFIX_BYTES:]
        return FileMark(self.size + len(data), mtime_ns, suffix)


def mark_of(data: bytes, *, size: int, mtime_ns: int) -> FileMark:
    """The mark of a file of ``size`` bytes whose last bytes are ``data``."""
    return FileMark(size, mtime_ns, data[-SUFFIX_BYTES:])
