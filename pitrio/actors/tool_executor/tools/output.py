"""Streaming command output with bounded memory (the bash tool's accumulator, spec §5.5).

Raw bytes arrive in chunks. The accumulator decodes them incrementally (UTF-8, invalid bytes
replaced), counts lines and bytes of everything seen, and keeps only a rolling tail of the text
for snapshots. Once the output passes a limit (:data:`DEFAULT_MAX_BYTES` or
:data:`DEFAULT_MAX_LINES`) the full raw output must be kept in a file: the accumulator then
hands out the raw chunks to write (:meth:`OutputAccumulator.take_spill`); the tool shell owns
the file. Pure: no I/O.
"""

from __future__ import annotations

import codecs

import attrs

from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    Truncation,
    truncate_tail,
    utf8_len,
)


@attrs.frozen
class OutputSnapshot:
    """The displayable tail (``content``) and a truncation record covering the whole output."""

    content: str
    truncation: Truncation


class OutputAccumulator:
    """Tracks one command's output: totals, a decoded tail, and what must go to the spill file."""

    def __init__(
        self, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._rolling = max(max_bytes * 2, 1)  # tail bytes kept after a trim
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail = ""
        self._tail_bytes = 0
        self._tail_at_line_start = True
        self._held: list[bytes] = []  # raw chunks kept until we know whether to spill
        self._spill: list[bytes] = []  # raw chunks the shell still has to write to the file
        self.spilling = False
        self.total_raw_bytes = 0
        self.total_bytes = 0
        self.total_lines = 1
        self.last_line_bytes = 0
        self.finished = False

    def append(self, data: bytes) -> None:
        """Add one raw chunk of output."""
        if self.finished:
            raise ValueError("the output has finished")
        self.total_raw_bytes += len(data)
        self._add_text(self._decoder.decode(data))
        if self.spilling or self._over_limit():
            if not self.spilling:
                self.spilling = True
                self._spill.extend(self._held)
                self._held = []
            if data:
                self._spill.append(data)
        elif data:
            self._held.append(data)

    def finish(self) -> None:
        """No more output: flush the decoder (a cut multi-byte character becomes U+FFFD)."""
        if self.finished:
            return
        self.finished = True
        self._add_text(self._decoder.decode(b"", final=True))
        if not self.spilling and self._over_limit():
            self.spilling = True
            self._spill.extend(self._held)
            self._held = []

    def take_spill(self) -> list[bytes]:
        """Raw chunks to append to the full-output file now (empty unless spilling)."""
        chunks, self._spill = self._spill, []
        return chunks

    def held_bytes(self) -> bytes:
        """The raw output kept in memory: all of it while nothing was spilled to a file."""
        return b"".join(self._held)

    @property
    def truncated(self) -> bool:
        """Whether the output as a whole exceeds a limit."""
        return self.total_lines > self.max_lines or self.total_bytes > self.max_bytes

    def snapshot(self) -> OutputSnapshot:
        """The tail as it would be shown now, with totals of the whole output."""
        tail = truncate_tail(
            self._snapshot_text(), max_lines=self.max_lines, max_bytes=self.max_bytes
        )
        truncated = self.truncated
        truncated_by = None
        if truncated:
            truncated_by = tail.truncated_by or (
                "bytes" if self.total_bytes > self.max_bytes else "lines"
            )
        truncation = attrs.evolve(
            tail,
            truncated=truncated,
            truncated_by=truncated_by,
            total_lines=self.total_lines,
            total_bytes=self.total_bytes,
        )
        return OutputSnapshot(content=tail.content, truncation=truncation)

    # -- internals ------------------------------------------------------------------------

    def _over_limit(self) -> bool:
        return (
            self.total_raw_bytes > self.max_bytes
            or self.total_bytes > self.max_bytes
            or self.total_lines > self.max_lines
        )

    def _add_text(self, text: str) -> None:
        if not text:
            return
        size = utf8_len(text)
        self.total_bytes += size
        self._tail += text
        self._tail_bytes += size
        if self._tail_bytes > self._rolling * 2:
            self._trim_tail()
        newlines = text.count("\n")
        if newlines == 0:
            self.last_line_bytes += size
        else:
            self.total_lines += newlines
            self.last_line_bytes = utf8_len(text[text.rfind("\n") + 1 :])

    def _trim_tail(self) -> None:
        data = self._tail.encode("utf-8", "replace")
        if len(data) <= self._rolling:
            self._tail_bytes = len(data)
            return
        start = len(data) - self._rolling
        while start < len(data) and (data[start] & 0xC0) == 0x80:
            start += 1
        if start > 0:
            self._tail_at_line_start = data[start - 1] == 0x0A
        self._tail = data[start:].decode("utf-8", "replace")
        self._tail_bytes = utf8_len(self._tail)

    def _snapshot_text(self) -> str:
        if self._tail_at_line_start:
            return self._tail
        newline = self._tail.find("\n")
        return self._tail if newline == -1 else self._tail[newline + 1 :]
