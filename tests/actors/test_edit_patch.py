"""The edit tool's ``details.patch``: pi 1.6.0's unified diff (jsdiff's ``createTwoFilesPatch``
with file headers only). Expected texts were produced by the jsdiff 8.0.4 pi 1.6.0 ships; 403
random edits gave the same text from both when this was written."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.tool_executor.tools.edit import edit_file
from pitrio.actors.tool_executor.tools.edit_core import Replacement, unified_patch

LINES = "".join(f"{n}\n" for n in range(1, 21))


@pytest.mark.parametrize(
    ("path", "old", "new", "patch"),
    [
        ("new.txt", "a\nb\n", "a\nc\n", "--- new.txt\n+++ new.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"),
        (
            "f",
            "x",
            "y",
            "--- f\n+++ f\n@@ -1,1 +1,1 @@\n-x\n\\ No newline at end of file\n"
            "+y\n\\ No newline at end of file\n",
        ),
        ("f", "", "a\n", "--- f\n+++ f\n@@ -0,0 +1,1 @@\n+a\n"),  # an empty side: line 0
        (  # changes more than twice the context apart: two hunks
            "f",
            LINES,
            LINES.replace("\n3\n", "\nX\n").replace("\n18\n", "\nY\n"),
            "--- f\n+++ f\n@@ -1,7 +1,7 @@\n 1\n 2\n-3\n+X\n 4\n 5\n 6\n 7\n"
            "@@ -14,7 +14,7 @@\n 14\n 15\n 16\n 17\n-18\n+Y\n 19\n 20\n",
        ),
        (  # closer: one hunk
            "f",
            LINES[: LINES.index("11\n")],
            "1\n2\nX\n4\n5\n6\n7\n8\nY\n10\n",
            "--- f\n+++ f\n@@ -1,10 +1,10 @@\n 1\n 2\n-3\n+X\n 4\n 5\n 6\n 7\n 8\n-9\n+Y\n 10\n",
        ),
    ],
)
def test_unified_patch_is_jsdiffs(path: str, old: str, new: str, patch: str) -> None:
    assert unified_patch(path, old, new) == patch


def test_the_edit_tool_reports_diff_patch_and_first_changed_line_in_pis_order(
    tmp_path: Path,
) -> None:
    target = tmp_path / "new.txt"
    target.write_text("a\nb\n")
    result = edit_file(str(target), "new.txt", [Replacement(old_text="b", new_text="c")])
    assert result.details is not None
    assert list(result.details) == ["diff", "patch", "firstChangedLine"]
    assert result.details["patch"] == "--- new.txt\n+++ new.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
