"""Output truncation shared by the tools (spec §5.1): line and byte limits, head or tail.

Two independent limits apply, whichever is hit first: :data:`DEFAULT_MAX_LINES` lines and
:data:`DEFAULT_MAX_BYTES` bytes of UTF-8. ``truncate_head`` keeps the beginning in whole lines
(file reads, search results); ``truncate_tail`` keeps the end (command output) and may cut the
last line when it alone is too big. Lines are the pieces of ``text.split("\\n")``, so a trailing
newline counts as one more (empty) line, as in pi. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 50 * 1024
GREP_MAX_LINE_LENGTH = 500
NO_LINE_LIMIT = 2**53 - 1
"""The line limit of byte-only truncation (JavaScript's ``Number.MAX_SAFE_INTEGER``)."""

TruncatedBy = Literal["lines", "bytes"]


def format_size(size: int) -> str:
    """``512B``, ``50.0KB``, ``1.5MB``: one decimal, halves rounded up as JavaScript's toFixed."""
    if size < 1024:
        return f"{size}B"
    unit, divisor = ("KB", 1024) if size < 1024 * 1024 else ("MB", 1024 * 1024)
    from decimal import ROUND_HALF_UP, Decimal  # here: ~2 ms of every start (issue 38)

    # Dividing by a power of two is exact in decimal, so ties are real ties: round them up.
    value = (Decimal(size) / Decimal(divisor)).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)
    return f"{value}{unit}"


@attrs.frozen(kw_only=True)
class Truncation:
    """What a truncation kept and why; :meth:`to_details` is pi's ``truncation`` object."""

    content: str
    truncated: bool
    truncated_by: TruncatedBy | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool = False
    first_line_exceeds_limit: bool = False
    max_lines: int
    max_bytes: int

    def to_details(self) -> dict[str, Any]:
        """The JSON object pi puts under ``details.truncation`` (same keys, same order)."""
        return {
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        }


def utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8 (unpaired surrogates count as the replacement character)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "replace"))


def _untouched(text: str, lines: int, size: int, max_lines: int, max_bytes: int) -> Truncation:
    return Truncation(
        content=text,
        truncated=False,
        truncated_by=None,
        total_lines=lines,
        total_bytes=size,
        output_lines=lines,
        output_bytes=size,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def truncate_head(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole lines from the start while both limits hold.

    If the first line alone exceeds ``max_bytes`` the content is empty and
    ``first_line_exceeds_limit`` is set: a partial first line would be misleading.
    """
    total_bytes = utf8_len(text)
    lines = text.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untouched(text, total_lines, total_bytes, max_lines, max_bytes)
    if utf8_len(lines[0]) > max_bytes:
        return Truncation(
            content="",
            truncated=True,
            truncated_by="bytes",
            total_lines=total_lines,
            total_bytes=total_bytes,
            output_lines=0,
            output_bytes=0,
            first_line_exceeds_limit=True,
            max_lines=max_lines,
            max_bytes=max_bytes,
        )
    kept = 0
    used = 0
    truncated_by: TruncatedBy = "lines"
    for index, line in enumerate(lines[:max_lines]):
        cost = utf8_len(line) + (1 if index > 0 else 0)  # the newline joining it to the previous
        if used + cost > max_bytes:
            truncated_by = "bytes"
            break
        kept += 1
        used += cost
    if kept >= max_lines and used <= max_bytes:
        truncated_by = "lines"
    content = "\n".join(lines[:kept])
    return Truncation(
        content=content,
        truncated=True,
        truncated_by=truncated_by,
        total_lines=total_lines,
        total_bytes=total_bytes,
        output_lines=kept,
        output_bytes=utf8_len(content),
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def tail_bytes(text: str, max_bytes: int) -> str:
    """The last ``max_bytes`` bytes of ``text``, starting on a whole UTF-8 character."""
    data = text.encode("utf-8", "replace")
    if len(data) <= max_bytes:
        return text
    start = len(data) - max_bytes
    while start < len(data) and (data[start] & 0xC0) == 0x80:  # skip continuation bytes
        start += 1
    return data[start:].decode("utf-8", "replace")


def truncate_tail(
    text: str, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Truncation:
    """Keep whole lines from the end while both limits hold.

    If even the last line does not fit, its final ``max_bytes`` bytes are kept and
    ``last_line_partial`` is set.
    """
    total_bytes = utf8_len(text)
    lines = text.split("\n")
    total_lines = len(lines)
    if total_lines <= max_lines and total_bytes <= max_bytes:
        return _untouched(text, total_lines, total_bytes, max_lines, max_bytes)
    kept: list[str] = []
    used = 0
    truncated_by: TruncatedBy = "lines"
    last_line_partial = False
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        cost = utf8_len(line) + (1 if kept else 0)
        if used + cost > max_bytes:
            truncated_by = "bytes"
            if not kept:
                part = tail_bytes(line, max_bytes)
                kept.append(part)
                used = utf8_len(part)
                last_line_partial = True
            break
        kept.append(line)
        used += cost
    if len(kept) >= max_lines and used <= max_bytes:
        truncated_by = "lines"
    kept.reverse()
    content = "\n".join(kept)
    return Truncation(
        content=content,
        truncated=True,
        truncated_by=truncated_by,
        total_lines=total_lines,
        total_bytes=total_bytes,
        output_lines=len(kept),
        output_bytes=utf8_len(content),
        last_line_partial=last_line_partial,
        max_lines=max_lines,
        max_bytes=max_bytes,
    )


def truncate_line(line: str, max_chars: int = GREP_MAX_LINE_LENGTH) -> tuple[str, bool]:
    """Cut ``line`` to ``max_chars`` characters plus ``... [truncated]``; say whether it was cut."""
    if len(line) <= max_chars:
        return line, False
    return f"{line[:max_chars]}... [truncated]", True
