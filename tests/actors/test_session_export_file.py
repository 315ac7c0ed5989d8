"""``export_file_html``: a session file on disk as one HTML page, without opening a session."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pitrio.actors.session.export import ExportError
from pitrio.actors.session.export_file import export_file_html

HEADER = {
    "type": "session",
    "version": 3,
    "id": "s-1",
    "timestamp": "2026-01-01T00:00:00.000Z",
    "cwd": "/w",
}
USER = {
    "type": "message",
    "id": "a1",
    "parentId": None,
    "timestamp": "2026-01-01T00:00:01.000Z",
    "message": {"role": "user", "content": "hello </script> there", "timestamp": 1},
}
ODD = {
    "type": "from_the_future",
    "id": "a2",
    "parentId": "a1",
    "timestamp": "2026-01-01T00:00:02.000Z",
    "x": [1],
}


def page_data(page: str) -> dict:
    """The JSON the page embeds (the one script literal that holds the session)."""
    match = re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S)
    assert match is not None, page[:400]
    return json.loads(match.group(1))


def write(path: Path, *lines: dict) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_page_holds_every_line_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    source = write(tmp_path / "2026_s-1.jsonl", HEADER, USER, ODD)
    written = export_file_html(str(source))
    assert written == "pitrio-session-2026_s-1.html"
    page = (tmp_path / written).read_text()
    data = page_data(page)
    assert data["header"]["id"] == "s-1"
    assert data["entries"] == [USER, ODD]  # an unknown entry type is kept as written
    assert data["leafId"] == "a2"
    assert "</script> there" not in page  # the user's text cannot end the script early


def test_an_output_path_is_used_as_given(tmp_path: Path) -> None:
    source = write(tmp_path / "s.jsonl", HEADER, USER)
    target = tmp_path / "out.html"
    assert export_file_html(str(source), str(target)) == str(target)
    assert page_data(target.read_text())["entries"] == [USER]


def test_an_empty_file_makes_an_empty_page(tmp_path: Path) -> None:
    source = tmp_path / "empty.jsonl"
    source.write_bytes(b"")
    target = tmp_path / "e.html"
    export_file_html(str(source), str(target))
    data = page_data(target.read_text())
    assert data["header"] is None and data["entries"] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "File not found: {path}"),
        (b"garbage\n", "Session file is not a valid pi session: {path}"),
        (b'{"type":"message","id":"x"}\n', "Session file is not a valid pi session: {path}"),
    ],
)
def test_what_is_not_a_session_file_is_named(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    source = tmp_path / "in.jsonl"
    if content is not None:
        source.write_bytes(content)
    with pytest.raises(ExportError) as caught:
        export_file_html(str(source), str(tmp_path / "o.html"))
    assert str(caught.value) == message.format(path=source)
    assert not (tmp_path / "o.html").exists()


def test_an_output_in_a_missing_folder_is_refused_with_its_path(tmp_path: Path) -> None:
    source = write(tmp_path / "s.jsonl", HEADER)
    target = tmp_path / "no" / "o.html"
    with pytest.raises(ExportError, match=f"Cannot export to {target}: No such file"):
        export_file_html(str(source), str(target))


def test_a_fifo_output_is_refused_untouched(tmp_path: Path) -> None:
    import os

    source = write(tmp_path / "s.jsonl", HEADER)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ExportError, match="it is a FIFO"):
        export_file_html(str(source), str(fifo))


def test_a_lone_surrogate_in_a_path_is_refused_naming_the_flag(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="--export"):
        export_file_html(str(tmp_path / "a\ud800.jsonl"))
