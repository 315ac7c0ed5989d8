"""``pitrio serve``'s start-up lines (``serve.announce``)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from pitrio.transports.serve import announce


class Recorder:
    """A stdout that keeps every write call apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_the_start_up_lines_are_one_write_of_whole_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With --workers, the workers write their log lines to the same output: the address line
    # and its newline written apart let a log line land inside it, and a reader took
    # 'http://127.0.0.1:PORT/{"time":' for the address. Whole lines, in one write.
    out = Recorder()
    monkeypatch.setattr(sys, "stdout", out)
    prepared = SimpleNamespace(agent=tmp_path, token="t0k", store=None, open_files=1024)
    args = SimpleNamespace(idle=0.0)
    announce(args, prepared, "http://127.0.0.1:4321/")  # type: ignore[arg-type]
    assert len(out.writes) == 1
    lines = out.writes[0].split("\n")
    assert lines[:2] == [
        "pitrio daemon listening on http://127.0.0.1:4321/",
        "web page: http://127.0.0.1:4321/#token=t0k",
    ]
    assert lines[2].startswith("token: ") and lines[-1] == ""
