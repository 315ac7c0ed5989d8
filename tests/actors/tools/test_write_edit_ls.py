"""The write, edit and ls tools (spec §5.3, §5.4, §5.8) on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pitrio.actors.tool_executor.tools.edit import create_edit_tool, prepare_edit_arguments
from pitrio.actors.tool_executor.tools.ls import create_ls_tool
from pitrio.actors.tool_executor.tools.write import create_write_tool
from pitrio.errors import ToolError

from .support import run_one, text


async def test_write_creates_parents_and_reports_the_path(tmp_path: Path) -> None:
    tool = create_write_tool(str(tmp_path))
    result, _ = await run_one(
        tool, {"path": "docs/todo.md", "content": "# TODO\n\n- write tests\n"}
    )
    # pi 1.6.0's text (0.73.1 counted UTF-16 units: "Successfully wrote 22 bytes to ...").
    assert text(result) == "Successfully wrote to docs/todo.md"
    assert result.details is None
    result, _ = await run_one(tool, {"path": "e.txt", "content": "é😀"})
    assert text(result) == "Successfully wrote to e.txt"
    assert (tmp_path / "e.txt").read_bytes() == "é😀".encode()
    await run_one(tool, {"path": "e.txt", "content": "over"})
    assert (tmp_path / "e.txt").read_text() == "over"
    assert tool.mutates is not None and tool.mutates({"path": "x"}) == str(tmp_path / "x")


async def test_write_errors(tmp_path: Path) -> None:
    tool = create_write_tool(str(tmp_path))
    (tmp_path / "file").write_text("")
    with pytest.raises(ToolError, match=r"^ENOTDIR: not a directory, mkdir '.*file'$"):
        await run_one(tool, {"path": "file/child.txt", "content": "x"})
    (tmp_path / "adir").mkdir()
    with pytest.raises(
        ToolError, match=r"^EISDIR: illegal operation on a directory, open '.*adir'$"
    ):
        await run_one(tool, {"path": "adir", "content": "x"})


async def test_edit_reports_a_diff(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("a = 1\nb = 2\n")
    result, _ = await run_one(
        create_edit_tool(str(tmp_path)),
        {"path": "app.py", "edits": [{"oldText": "b = 2", "newText": "b = 3"}]},
    )
    assert text(result) == "Successfully replaced 1 block(s) in app.py."
    # pi 1.6.0 adds the unified patch (0.73.1: diff and firstChangedLine only).
    assert result.details == {
        "diff": " 1 a = 1\n-2 b = 2\n+2 b = 3",
        "patch": "--- app.py\n+++ app.py\n@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n",
        "firstChangedLine": 2,
    }
    assert (tmp_path / "app.py").read_text() == "a = 1\nb = 3\n"


async def test_edit_keeps_bom_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "win.txt"
    path.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    result, _ = await run_one(
        create_edit_tool(str(tmp_path)),
        {
            "path": "win.txt",
            "edits": [
                {"oldText": "one\ntwo", "newText": "1\n2"},
                {"oldText": "three", "newText": "3"},
            ],
        },
    )
    assert text(result) == "Successfully replaced 2 block(s) in win.txt."
    assert path.read_bytes() == b"\xef\xbb\xbf1\r\n2\r\n3\r\n"


async def test_edit_fuzzy_match_writes_normalised_text(tmp_path: Path) -> None:
    path = tmp_path / "q.md"
    path.write_text("He said \u201chello\u201d  \nother \u2014 line\n")
    await run_one(
        create_edit_tool(str(tmp_path)),
        {"path": "q.md", "edits": [{"oldText": 'said "hello"', "newText": 'said "bye"'}]},
    )
    assert path.read_text() == 'He said "bye"\nother - line\n'


async def test_edit_errors(tmp_path: Path) -> None:
    tool = create_edit_tool(str(tmp_path))
    with pytest.raises(ToolError, match=r"^Could not edit file: nope\.txt\. Error code: ENOENT\.$"):
        await run_one(tool, {"path": "nope.txt", "edits": [{"oldText": "a", "newText": "b"}]})
    (tmp_path / "notes.txt").write_text("Project notes\n")
    with pytest.raises(ToolError) as caught:
        await run_one(
            tool, {"path": "notes.txt", "edits": [{"oldText": "no such text", "newText": "x"}]}
        )
    assert str(caught.value) == (  # as pi's fixture
        "Could not find the exact text in notes.txt. The old text must match exactly including "
        "all whitespace and newlines."
    )
    with pytest.raises(
        ToolError,
        match=r"^Edit tool input is invalid\. edits must contain at least one replacement\.$",
    ):
        await run_one(tool, {"path": "notes.txt", "edits": []})
    if os.geteuid() != 0:  # root may write anything
        (tmp_path / "ro.txt").write_text("x")
        (tmp_path / "ro.txt").chmod(0o444)
        with pytest.raises(ToolError, match=r"Error code: EACCES\.$"):
            await run_one(tool, {"path": "ro.txt", "edits": [{"oldText": "x", "newText": "y"}]})


def test_legacy_and_string_arguments() -> None:
    assert prepare_edit_arguments({"path": "p", "oldText": "a", "newText": "b"}) == {
        "path": "p",
        "edits": [{"oldText": "a", "newText": "b"}],
    }
    assert prepare_edit_arguments(
        {"path": "p", "edits": '[{"oldText": "a", "newText": "b"}]', "oldText": "c", "newText": "d"}
    ) == {
        "path": "p",
        "edits": [{"oldText": "a", "newText": "b"}, {"oldText": "c", "newText": "d"}],
    }
    untouched = {"path": "p", "edits": "not json"}
    assert prepare_edit_arguments(untouched) == untouched


async def test_ls(tmp_path: Path) -> None:
    for name in ("b.txt", "A.txt", ".env", "c"):
        (tmp_path / name).touch()
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "missing", tmp_path / "dangling")
    tool = create_ls_tool(str(tmp_path))
    result, _ = await run_one(tool, {})
    assert text(result) == ".env\nA.txt\nb.txt\nc\nsub/"
    result, _ = await run_one(tool, {"limit": 2})
    assert text(result) == ".env\nA.txt\n\n[2 entries limit reached. Use limit=4 for more]"
    assert result.details == {"entryLimitReached": 2}
    result, _ = await run_one(tool, {"path": "sub"})
    assert text(result) == "(empty directory)"


async def test_ls_errors(tmp_path: Path) -> None:
    tool = create_ls_tool(str(tmp_path))
    with pytest.raises(ToolError, match=f"^Path not found: {tmp_path}/x$"):
        await run_one(tool, {"path": "x"})
    (tmp_path / "f").touch()
    with pytest.raises(ToolError, match=f"^Not a directory: {tmp_path}/f$"):
        await run_one(tool, {"path": "f"})


async def test_ls_byte_limit(tmp_path: Path) -> None:
    for index in range(300):
        (tmp_path / f"{index:03d}{'n' * 200}").touch()
    result, _ = await run_one(create_ls_tool(str(tmp_path)), {})
    assert text(result).endswith("\n\n[50.0KB limit reached]")
    assert result.details["truncation"]["truncatedBy"] == "bytes"
