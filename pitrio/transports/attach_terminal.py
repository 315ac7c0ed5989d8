"""The terminal side of ``pitrio attach``: stdin read as lines by a trio task, stdout and stderr
written with the live area redrawn below the transcript, and ``$EDITOR`` run on a file."""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

import trio

from pitrio.transports.attach_render import Chunk, Renderer


class Keyboard:
    """Lines of stdin read by a trio task, not a thread, so reading can pause (``$EDITOR``)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.pollable = True

    async def readline(self) -> str | None:
        """The next line without its newline; ``None`` at end of input."""
        while b"\n" not in self.buffer and not self.eof:
            if self.pollable:
                try:
                    await trio.lowlevel.wait_readable(self.fd)
                except OSError:  # a regular file (epoll refuses it): reads never block
                    self.pollable = False
            else:
                await trio.lowlevel.checkpoint()
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                continue
            self.eof = not data
            self.buffer += data
        if not self.buffer:
            return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")


class Terminal:
    """stdout and stderr: chunks of the transcript, and the live area a terminal redraws."""

    def __init__(self, out: TextIO, err: TextIO, renderer: Renderer, tty: bool) -> None:
        self.out, self.err, self.renderer, self.tty = out, err, renderer, tty
        self.drawn = 0

    def show(self, chunks: Sequence[Chunk]) -> None:
        """Write ``chunks`` above the live area, then redraw it."""
        if self.drawn:
            self.out.write(f"\x1b[{self.drawn}F\x1b[J")
            self.drawn = 0
        for chunk in chunks:
            if chunk.err and self.tty and not self.renderer.at_line_start:
                self.out.write("\n")  # one screen: stderr text goes on a line of its own
                self.renderer.at_line_start = True
            (self.err if chunk.err else self.out).write(chunk.text)
        live = self.renderer.live() if self.tty and self.renderer.at_line_start else []
        for line in live:
            self.out.write(line + "\n")
        self.drawn = len(live)
        self.out.flush()
        self.err.flush()

    def text(self, text: str) -> None:
        """Stdout text that is not a frame's (a question, the prompt marker, an echo)."""
        if text:
            self.renderer.at_line_start = text.endswith("\n")
            self.show([Chunk(text)])

    def error(self, text: str) -> None:
        """A line on stderr."""
        self.show([Chunk(text + "\n", err=True)])


async def edit_in(editor: str, text: str) -> str | None:
    """Let the user edit ``text`` with the ``editor`` command (split like a shell would) on a
    temporary file, on this terminal: the text saved, ``None`` when the editor failed."""
    with tempfile.TemporaryDirectory(prefix="pitrio-attach-") as folder:
        path = Path(folder) / "answer.txt"
        path.write_text(text, encoding="utf-8")
        done = await trio.run_process([*shlex.split(editor), str(path)], check=False, stdin=None)
        return path.read_text(encoding="utf-8") if done.returncode == 0 else None
