"""Writing an export (pitrio/actors/session/export.py): only into a regular file; every failure
an :class:`ExportError` naming the path (issue 21)."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from pitrio.actors.session.export import ExportError, write_export_sync


def test_a_new_or_regular_file_is_written_whole(tmp_path: Path) -> None:
    target = tmp_path / "page.html"
    write_export_sync(str(target), b"first, longer contents")
    write_export_sync(str(target), b"second")
    assert target.read_bytes() == b"second"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.mkdir(), "it is a directory"),
        (lambda p: os.mkfifo(p), "it is a FIFO"),
        (lambda p: os.mknod(p, stat.S_IFCHR | 0o600, os.makedev(1, 3)), "it is a character device"),
    ],
)
def test_other_kinds_of_file_are_refused_untouched(
    tmp_path: Path, make: Callable[[Path], None], reason: str
) -> None:
    target = tmp_path / "target"
    make(target)
    before = os.lstat(target)
    with pytest.raises(ExportError) as caught:
        write_export_sync(str(target), b"data")
    assert str(caught.value) == f"Cannot export to {target}: {reason}"
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode, after.st_size) == (
        before.st_ino,
        before.st_mode,
        before.st_size,
    )


def test_a_fifo_with_a_reader_is_refused_too(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with pytest.raises(ExportError, match="it is a FIFO"):
            write_export_sync(str(fifo), b"data")
        assert os.read(reader, 10) == b""  # nothing was written into it (and it is closed)
    finally:
        os.close(reader)


def test_a_missing_directory_names_the_path(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "page.html"
    with pytest.raises(ExportError) as caught:
        write_export_sync(str(target), b"data")
    assert str(caught.value) == f"Cannot export to {target}: No such file or directory"
