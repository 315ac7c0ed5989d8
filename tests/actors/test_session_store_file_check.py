"""``check`` and ``repair`` of a session file's bytes (pitrio/actors/session_store/file_check.py):
every problem in line order, and the split into kept and rejected lines."""

from __future__ import annotations

import pytest

from pitrio.actors.session_store.file_check import check_session_bytes, plan_repair
from pitrio.errors import SessionFileError
from tests.actors.test_session_store_file_format import HEADER, entry, file_of, parse


def test_check_lists_every_problem_in_line_order() -> None:
    data = file_of(
        HEADER, entry("a", None), b"oops", entry("a", None), entry("b", "a")[:30], end=b""
    )
    problems = check_session_bytes(data, origin="f.jsonl")
    assert [(p.line, p.kind, p.severity) for p in problems] == [
        (3, "malformed", "error"),
        (4, "duplicate_id", "error"),
        (5, "torn", "warning"),
    ]
    assert (
        problems[0].describe("f.jsonl")
        == "f.jsonl:3: error: malformed JSON: " + problems[0].message.split(": ", 1)[1]
    )


def test_repair_plan_moves_bad_lines_and_keeps_the_rest_verbatim() -> None:
    keep = [HEADER, entry("a", None), b"", entry("b", "a")]
    data = file_of(
        keep[0], keep[1], b"oops", keep[2], keep[3], entry("b", "a"), b'{"type":"me', end=b""
    )
    plan = plan_repair(data, origin="f.jsonl")
    assert plan.kept == file_of(*keep)
    assert plan.rejected == ((3, b"oops"), (6, entry("b", "a")), (7, b'{"type":"me'))
    assert parse(plan.kept).problems == []


def test_repair_plan_adds_the_missing_last_newline() -> None:
    plan = plan_repair(file_of(HEADER, entry("a", None), end=b""), origin="f")
    assert plan.kept == file_of(HEADER, entry("a", None)) and plan.rejected == ()


def test_repair_refuses_a_file_without_header() -> None:
    with pytest.raises(SessionFileError, match="cannot repair"):
        plan_repair(file_of(b"junk", entry("a", None)), origin="f")
