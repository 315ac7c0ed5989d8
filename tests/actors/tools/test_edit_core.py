"""The edit tool's text work (spec §5.4): endings, BOM, matching, errors, the diff."""

from __future__ import annotations

import pytest

from pitrio.actors.tool_executor.tools.edit_core import (
    Replacement,
    apply_edits,
    detect_line_ending,
    generate_diff,
    normalize_for_fuzzy_match,
    normalize_to_lf,
    restore_line_endings,
    strip_bom,
)
from pitrio.errors import ToolError

R = Replacement


def test_line_endings_and_bom() -> None:
    assert detect_line_ending("a\r\nb\nc") == "\r\n"
    assert detect_line_ending("a\nb\r\n") == "\n"
    assert detect_line_ending("no newline") == "\n"
    assert normalize_to_lf("a\r\nb\rc\n") == "a\nb\nc\n"
    assert restore_line_endings("a\nb", "\r\n") == "a\r\nb"
    assert strip_bom("\ufeffx") == ("\ufeff", "x")
    assert strip_bom("x") == ("", "x")


def test_fuzzy_normalisation() -> None:
    text = "\u201cquote\u201d \u2018x\u2019 a\u2013b\u2014c\u2212d e\u00a0f\u3000g  \nﬁ"
    assert normalize_for_fuzzy_match(text) == "\"quote\" 'x' a-b-c-d e f g\nfi"


def test_single_exact_edit() -> None:
    applied = apply_edits("one\ntwo\nthree\n", [R("two", "2")], "f.txt")
    assert applied.base == "one\ntwo\nthree\n"
    assert applied.new == "one\n2\nthree\n"


def test_edits_match_the_original_not_incrementally() -> None:
    applied = apply_edits("a b c", [R("a", "b"), R("b", "X")], "f")
    assert applied.new == "b X c"


def test_multi_edit_applied_in_any_source_order() -> None:
    applied = apply_edits("1\n2\n3\n4\n", [R("4", "four"), R("1", "one")], "f")
    assert applied.new == "one\n2\n3\nfour\n"


def test_fuzzy_match_rewrites_the_whole_file_normalised() -> None:
    content = "say \u201chi\u201d   \nkeep\u2014this\n"
    applied = apply_edits(content, [R('say "hi"', "say bye")], "f")
    assert applied.base == 'say "hi"\nkeep-this\n'
    assert applied.new == "say bye\nkeep-this\n"


def test_trailing_whitespace_is_fuzzy() -> None:
    applied = apply_edits("x = 1   \ny = 2\n", [R("x = 1\ny", "x = 3\ny")], "f")
    assert applied.new == "x = 3\ny = 2\n"


def test_crlf_old_text_matches_lf_content() -> None:
    applied = apply_edits("a\nb\n", [R("a\r\nb", "c\r\nd")], "f")
    assert applied.new == "c\nd\n"


@pytest.mark.parametrize(
    ("edits", "message"),
    [
        ([R("", "x")], "oldText must not be empty in f.txt."),
        ([R("a", "b"), R("", "x")], "edits[1].oldText must not be empty in f.txt."),
        (
            [R("zzz", "x")],
            "Could not find the exact text in f.txt. The old text must match exactly "
            "including all whitespace and newlines.",
        ),
        (
            [R("a", "b"), R("zzz", "x")],
            "Could not find edits[1] in f.txt. The oldText must match exactly including all "
            "whitespace and newlines.",
        ),
        (
            [R("dup", "x")],
            "Found 2 occurrences of the text in f.txt. The text must be unique. Please provide "
            "more context to make it unique.",
        ),
        (
            [R("a", "b"), R("dup", "x")],
            "Found 2 occurrences of edits[1] in f.txt. Each oldText must be unique. Please "
            "provide more context to make it unique.",
        ),
        (
            [R("a dup", "x"), R("dup\nb", "y")],
            "edits[0] and edits[1] overlap in f.txt. Merge them into one edit or target "
            "disjoint regions.",
        ),
        (
            [R("a", "a")],
            "No changes made to f.txt. The replacement produced identical content. This might "
            "indicate an issue with special characters or the text not existing as expected.",
        ),
        (
            [R("a", "a"), R("c", "c")],
            "No changes made to f.txt. The replacements produced identical content.",
        ),
    ],
)
def test_errors(edits: list[Replacement], message: str) -> None:
    with pytest.raises(ToolError) as caught:
        apply_edits("a dup\nb dup\nc\n", edits, "f.txt")
    assert str(caught.value) == message


def test_uniqueness_is_judged_in_fuzzy_space() -> None:
    with pytest.raises(ToolError, match="Found 2 occurrences"):
        apply_edits("it's\nit\u2019s\n", [R("it's", "x")], "f")


def test_diff_of_the_recorded_fixture() -> None:
    # tools.jsonl of pi's fixtures: the first edit of src/app.py.
    old = 'def greet(name):\n    return "Hello, " + name\n\n\nprint(greet("world"))\n'
    applied = apply_edits(old, [R("Hello, ", "Hi, ")], "src/app.py")
    diff = generate_diff(applied.base, applied.new)
    assert diff.text == (
        ' 1 def greet(name):\n-2     return "Hello, " + name\n+2     return "Hi, " + name\n'
        ' 3 \n 4 \n 5 print(greet("world"))'
    )
    assert diff.first_changed_line == 2


def test_diff_elides_far_context_and_pads_numbers() -> None:
    old = "\n".join(f"l{i}" for i in range(1, 31)) + "\n"
    new = old.replace("l3\n", "L3\n").replace("l25\n", "L25\n")
    diff = generate_diff(old, new)
    assert diff.text.split("\n") == [
        "  1 l1",
        "  2 l2",
        "- 3 l3",
        "+ 3 L3",
        "  4 l4",
        "  5 l5",
        "  6 l6",
        "  7 l7",
        "    ...",
        " 21 l21",
        " 22 l22",
        " 23 l23",
        " 24 l24",
        "-25 l25",
        "+25 L25",
        " 26 l26",
        " 27 l27",
        " 28 l28",
        " 29 l29",
        "    ...",
    ]
    assert diff.first_changed_line == 3


def test_diff_of_inserted_lines() -> None:
    diff = generate_diff("a\nb\n", "a\nnew\nb\n")
    assert diff.text == " 1 a\n+2 new\n 2 b"
    assert diff.first_changed_line == 2
