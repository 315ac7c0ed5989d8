"""Truncation (spec §5.1): limits, head vs tail, the edges pi's notices depend on."""

from __future__ import annotations

import pytest

from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    NO_LINE_LIMIT,
    format_size,
    tail_bytes,
    truncate_head,
    truncate_line,
    truncate_tail,
)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1.0KB"),
        (1280, "1.3KB"),  # 1.25 exactly: JavaScript's toFixed rounds the tie up
        (51200, "50.0KB"),
        (1024 * 1024 - 1, "1024.0KB"),
        (1024 * 1024, "1.0MB"),
        (int(2.25 * 1024 * 1024), "2.3MB"),
    ],
)
def test_format_size(size: int, text: str) -> None:
    assert format_size(size) == text


def test_constants() -> None:
    assert (DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES) == (2000, 51200)


def test_head_untouched_when_within_limits() -> None:
    result = truncate_head("a\nb\n")
    assert not result.truncated and result.truncated_by is None
    assert (result.total_lines, result.output_lines) == (3, 3)  # the trailing newline counts
    assert result.content == "a\nb\n"


def test_head_exactly_2000_lines_is_not_truncated() -> None:
    text = "\n".join(f"line {i}" for i in range(2000))
    assert not truncate_head(text).truncated
    result = truncate_head(text + "\n")  # 2001 pieces
    assert result.truncated and result.truncated_by == "lines"
    assert result.output_lines == 2000 and result.content == text


def test_head_exactly_50kb_is_not_truncated() -> None:
    text = "x" * DEFAULT_MAX_BYTES
    assert not truncate_head(text).truncated


def test_head_byte_limit_keeps_whole_lines() -> None:
    line = "y" * 1000
    text = "\n".join([line] * 60)  # 60 lines, about 60 KB
    result = truncate_head(text)
    assert result.truncated and result.truncated_by == "bytes"
    # 51 lines cost 51*1000 + 50 newlines = 51050 <= 51200; a 52nd would not fit.
    assert result.output_lines == 51
    assert result.output_bytes == 51050
    assert result.content == "\n".join([line] * 51)


def test_head_first_line_over_the_limit() -> None:
    result = truncate_head("z" * (DEFAULT_MAX_BYTES + 1) + "\nshort")
    assert result.first_line_exceeds_limit
    assert result.content == "" and result.output_lines == 0
    assert result.truncated_by == "bytes"


def test_head_counts_utf8_bytes() -> None:
    text = "é" * 30000  # 60000 bytes in one line
    result = truncate_head(text, max_bytes=60000)
    assert not result.truncated
    assert truncate_head(text, max_bytes=59999).first_line_exceeds_limit


def test_head_details_shape() -> None:
    details = truncate_head("a\nb\nc", max_lines=2).to_details()
    assert list(details) == [
        "content",
        "truncated",
        "truncatedBy",
        "totalLines",
        "totalBytes",
        "outputLines",
        "outputBytes",
        "lastLinePartial",
        "firstLineExceedsLimit",
        "maxLines",
        "maxBytes",
    ]
    assert details["content"] == "a\nb" and details["truncatedBy"] == "lines"


def test_head_without_line_limit() -> None:
    text = "\n".join("l" for _ in range(5000))
    result = truncate_head(text, max_lines=NO_LINE_LIMIT)
    assert not result.truncated
    assert result.max_lines == 2**53 - 1


def test_tail_keeps_the_end() -> None:
    text = "\n".join(str(i) for i in range(2500))
    result = truncate_tail(text)
    assert result.truncated and result.truncated_by == "lines"
    assert result.output_lines == 2000
    assert result.content.split("\n")[0] == "500"
    assert result.content.endswith("2499")


def test_tail_byte_limit() -> None:
    text = "\n".join(["q" * 1000] * 60)
    result = truncate_tail(text)
    assert result.truncated_by == "bytes" and result.output_lines == 51
    assert not result.last_line_partial


def test_tail_single_huge_line_is_cut_on_a_character_boundary() -> None:
    text = "start" + "€" * 20000  # 60005 bytes, one line
    result = truncate_tail(text)
    assert result.last_line_partial and result.truncated_by == "bytes"
    assert result.output_lines == 1
    assert result.content == "€" * 17066  # 51198 bytes: a third of a euro sign would not fit
    assert result.output_bytes == 51198


def test_tail_partial_last_line_after_a_newline() -> None:
    text = "first\n" + "w" * 60000
    result = truncate_tail(text)
    assert result.last_line_partial
    assert result.content == "w" * DEFAULT_MAX_BYTES
    assert result.total_lines == 2


def test_tail_bytes_helper() -> None:
    assert tail_bytes("abc", 5) == "abc"
    assert tail_bytes("aé", 2) == "é"
    assert tail_bytes("aé", 1) == ""


def test_truncate_line() -> None:
    assert truncate_line("x" * 500) == ("x" * 500, False)
    assert truncate_line("x" * 501) == ("x" * 500 + "... [truncated]", True)
