"""``read``/``write``/``edit`` through an editor's buffers: the editor's text is what is read
and edited, writes go to the editor (not the disk), results read as the built-ins'; what an
editor cannot give (a missing file, an image, a missing folder) falls back to the disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from pitrio.actors.tool_executor.tools.delegated import delegated_file_tools
from pitrio.actors.tool_executor.tools.edit import create_edit_tool
from pitrio.errors import ToolError
from tests.actors.tools.support import run_one, text


class Editor:
    """Unsaved buffers over the disk, recording the writes asked of it."""

    def __init__(self, buffers: dict[str, str]) -> None:
        self.buffers = buffers
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

    async def read(self, path: str) -> str:
        self.reads.append(path)
        if path not in self.buffers:
            raise OSError("no buffer")
        return self.buffers[path]

    async def write(self, path: str, content: str) -> None:
        self.writes.append((path, content))
        self.buffers[path] = content


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "a.txt").write_text("on disk\n")
    return tmp_path


async def test_read_and_edit_see_the_unsaved_buffer_and_write_goes_to_the_editor(
    files: Path,
) -> None:
    a = str(files / "a.txt")
    editor = Editor({a: "line one\nunsaved two\nline three\n"})
    read, write, edit = delegated_file_tools(str(files), editor.read, editor.write)
    result, _ = await run_one(read, {"path": "a.txt", "offset": 2, "limit": 1})
    assert text(result) == "unsaved two\n\n[2 more lines in file. Use offset=3 to continue.]"
    edits = {"path": "a.txt", "edits": [{"oldText": "unsaved two", "newText": "edited"}]}
    result, _ = await run_one(edit, edits)
    assert text(result) == "Successfully replaced 1 block(s) in a.txt."
    assert editor.writes == [(a, "line one\nedited\nline three\n")]
    assert "edited" in result.details["diff"]
    result, _ = await run_one(write, {"path": "a.txt", "content": "new\n"})
    assert text(result) == "Successfully wrote to a.txt"
    assert editor.writes[-1] == (a, "new\n")
    assert (files / "a.txt").read_text() == "on disk\n"  # the editor saves, not the tool


async def test_edit_results_match_the_builtin_on_the_same_text(files: Path, tmp_path: Path) -> None:
    a = str(files / "a.txt")
    editor = Editor({a: "on disk\n"})
    _, _, edit = delegated_file_tools(str(files), editor.read, editor.write)
    args = {"path": "a.txt", "edits": [{"oldText": "disk", "newText": "screen"}]}
    through_editor, _ = await run_one(edit, args)
    on_disk, _ = await run_one(create_edit_tool(str(files)), args)
    assert through_editor == on_disk
    assert editor.buffers[a] == (files / "a.txt").read_text() == "on screen\n"


async def test_what_an_editor_cannot_give_falls_back_to_the_disk(files: Path) -> None:
    editor = Editor({})
    read, write, _ = delegated_file_tools(str(files), editor.read, editor.write)
    with pytest.raises(ToolError, match="ENOENT"):
        await run_one(read, {"path": "missing.txt"})
    await run_one(write, {"path": "new/dir/b.txt", "content": "x"})
    assert (files / "new" / "dir" / "b.txt").read_text() == "x"
    assert editor.reads == [] and editor.writes == []


async def test_an_editor_failure_is_the_tools_error(files: Path) -> None:
    editor = Editor({})  # no buffer for a.txt although it is on disk
    read, _, _ = delegated_file_tools(str(files), editor.read, editor.write)
    with pytest.raises(ToolError, match="The editor could not do it: no buffer"):
        await run_one(read, {"path": "a.txt"})
