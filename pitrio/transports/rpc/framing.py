"""RPC framing (pi-rpc.md §2): strict LF-separated records in, compact JSON lines out.

:class:`RecordSplitter` is a pure incremental splitter: bytes in (any chunking, a UTF-8
character may be split across reads), complete records out. Records end at ``\\n`` only
(U+2028/U+2029 are ordinary characters); one trailing ``\\r`` per record is dropped; a last
record without ``\\n`` is returned by :meth:`RecordSplitter.finish` at end of input. A record
longer than ``max_record`` bytes is reported as oversize and skipped up to its end, so one bad
frame loses nothing else.
"""

from __future__ import annotations

import codecs

import attrs

DEFAULT_MAX_RECORD = 256 * 1024 * 1024


@attrs.frozen
class Oversize:
    """A record that exceeded the size limit (its content was dropped)."""

    size: int
    limit: int


Record = str | Oversize


class RecordSplitter:
    """Splits a byte stream into LF-terminated text records."""

    def __init__(self, max_record: int = DEFAULT_MAX_RECORD) -> None:
        self.max_record = max_record
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []
        self._size = 0  # bytes of the record in progress
        self._skipping = False  # inside an oversize record: drop until its end

    def feed(self, data: bytes) -> list[Record]:
        """Add bytes; return the records they complete, in order."""
        records: list[Record] = []
        start = 0
        while True:
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline
            self._take(data[start:end])
            if newline < 0:
                return records
            records.append(self._close_record())
            start = newline + 1

    def finish(self) -> list[Record]:
        """End of input: the last record if it had no trailing LF."""
        self._parts.append(self._decoder.decode(b"", final=True))
        if self._skipping or self._size or any(self._parts):
            return [self._close_record()]
        return []

    def _take(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._skipping:
            return
        if self._size > self.max_record:
            self._skipping = True
            self._parts.clear()
            self._decoder.reset()
            return
        if chunk:
            self._parts.append(self._decoder.decode(chunk))

    def _close_record(self) -> Record:
        if self._skipping:
            record: Record = Oversize(self._size, self.max_record)
        else:
            self._parts.append(self._decoder.decode(b"", final=True))
            text = "".join(self._parts)
            record = text[:-1] if text.endswith("\r") else text
        self._parts = []
        self._size = 0
        self._skipping = False
        self._decoder.reset()
        return record
