"""``@file`` arguments: which words name files, what the files add to the first prompt."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from pitrio.errors import PitrioError
from pitrio.transports.cli_files import (
    FileArgumentError,
    read_file_arguments,
    split_file_arguments,
)
from pitrio.transports.print_mode import build_prompts

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def test_words_with_an_at_sign_are_files_in_order() -> None:
    files, messages = split_file_arguments(["@a", "hi", "@b/c", "there", "x@y"])
    assert (files, messages) == (["a", "b/c"], ["hi", "there", "x@y"])


def test_text_images_and_empty_files(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes("\ufeffline one\n".encode())
    (tmp_path / "e.txt").write_bytes(b"")
    (tmp_path / "i.png").write_bytes(PNG)
    read = read_file_arguments(["a.txt", "e.txt", "i.png"], str(tmp_path))
    assert read.text == (
        f'<file name="{tmp_path}/a.txt">\nline one\n\n</file>\n'  # BOM gone, text kept whole
        f'<file name="{tmp_path}/i.png"></file>\n'
    )
    assert [(i.mime_type, base64.b64decode(i.data)) for i in read.images] == [("image/png", PNG)]


def test_home_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "n.md").write_text("notes")
    assert (
        read_file_arguments(["~/n.md"], "/").text
        == f'<file name="{tmp_path}/n.md">\nnotes\n</file>\n'
    )


def test_a_missing_or_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileArgumentError, match=f"^File not found: {tmp_path}/nope$"):
        read_file_arguments(["nope"], str(tmp_path))
    (tmp_path / "dir").mkdir()
    with pytest.raises(FileArgumentError, match=f"^Could not read file {tmp_path}/dir: "):
        read_file_arguments(["dir"], str(tmp_path))


def test_a_path_with_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PitrioError, match="@file argument"):
        read_file_arguments(["a\ud800"], str(tmp_path))


@pytest.mark.parametrize(
    ("messages", "stdin", "files", "expected"),
    [
        (["q", "next"], None, "", ["q", "next"]),
        (["q"], None, "<f/>\n", ["<f/>\nq"]),
        ([], None, "<f/>\n", ["<f/>\n"]),
        (["q"], "piped", "<f/>\n", ["piped\n\n<f/>\nq"]),
        ([], "piped", "", ["piped"]),
        ([], None, "", []),
    ],
)
def test_the_first_prompt_is_stdin_then_files_then_the_message(
    messages: list[str], stdin: str | None, files: str, expected: list[str]
) -> None:
    assert build_prompts(messages, stdin, files) == expected
