"""The terminal side of ``pitrio attach``: stdin read as lines by a trio task, stdout and stderr
written with the live area redrawn below the transcript, and ``$EDITOR`` run on a file."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import sys
import tempfile
import termios
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, TextIO

import trio

from pitrio.transports.attach_render import Chunk, Renderer, choose_style

ESC = "\x1b"
"""Ends a line read from a terminal set up by :func:`escape_ends_lines` (the key was Esc)."""


class Keyboard:
    """Lines of stdin read by a trio task, not a thread, so reading can pause (``$EDITOR``)."""

    def __init__(self, fd: int, *, escape: bool = False) -> None:
        self.fd = fd
        self.buffer = b""
        self.eof = False
        self.pollable = True
        self.escape = escape
        """Esc ends a line too (kept at its end): the terminal delivers it at once."""

    def remember(self, line: str) -> None:
        """A prompt or command the user sent (an editing keyboard recalls it; this one
        has no history)."""

    def know(self, *, history: Sequence[str] = (), commands: Sequence[str] = ()) -> None:
        """Earlier prompts and the ``/`` command names (for an editing keyboard; unused here)."""

    def prefill(self, text: str) -> None:
        """The next line starts as ``text`` (an editing keyboard; here it is dropped)."""

    def _end(self) -> int:
        """Where the first line in the buffer ends (its terminator's index), -1: not yet."""
        ends = [self.buffer.find(b"\n")]
        if self.escape:
            ends.append(self.buffer.find(ESC.encode()))
        found = [end for end in ends if end >= 0]
        return min(found) if found else -1

    async def readline(self) -> str | None:
        """The next line without its newline (a line Esc ended keeps the Esc at its end);
        ``None`` at end of input."""
        while self._end() < 0 and not self.eof:
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
        end = self._end()
        if end < 0:  # the last line, without a newline
            line, self.buffer = self.buffer, b""
        elif self.buffer[end : end + 1] == b"\n":
            line, self.buffer = self.buffer[:end], self.buffer[end + 1 :]
        else:
            line, self.buffer = self.buffer[: end + 1], self.buffer[end + 1 :]
        return line.decode("utf-8", "replace").rstrip("\r")


Settings = list[Any]
"""A terminal's ``termios`` attributes as ``tcgetattr`` gives them."""


@contextlib.contextmanager
def changed_settings(
    fd: int, change: Callable[[Settings], Settings]
) -> Iterator[Callable[[], None] | None]:
    """The terminal ``fd`` with its settings ``change``d (given a copy whose control
    characters may be edited in place): yields a function that gives the settings back,
    ``None`` when ``fd`` is no terminal. They are given back as found on the way out."""
    try:
        saved = termios.tcgetattr(fd)
    except (termios.error, OSError):
        yield None
        return
    changed = list(saved)
    changed[6] = list(saved[6])

    def restore() -> None:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    try:
        termios.tcsetattr(fd, termios.TCSANOW, change(changed))
    except (termios.error, OSError):
        yield None
        return
    try:
        yield restore
    finally:
        restore()


def _escape_eol(settings: Settings) -> Settings:
    settings[6][termios.VEOL] = ESC.encode()
    return settings


@contextlib.contextmanager
def escape_ends_lines(fd: int) -> Iterator[bool]:
    """On a terminal in line mode, make Esc end a line (``VEOL``), so a read returns at the
    key press instead of at the next Enter; yields whether it could (not a terminal: no).
    The terminal's settings are given back as found."""
    with changed_settings(fd, _escape_eol) as restore:
        yield restore is not None


class Overlay(Protocol):
    """Something drawn after the output that output must not overwrite (a half-typed line):
    taken away before output is written and drawn again after it."""

    def hide(self) -> str:
        """What to write to take it away (the cursor where it began)."""

    def reveal(self) -> str:
        """What to write to draw it again where the cursor is."""


class Terminal:
    """stdout and stderr: chunks of the transcript, and the live area a terminal redraws."""

    def __init__(self, out: TextIO, err: TextIO, renderer: Renderer, tty: bool) -> None:
        self.out, self.err, self.renderer, self.tty = out, err, renderer, tty
        self.drawn = 0
        self.overlay: Overlay | None = None
        """The line being typed, moved below each piece of output (an editing keyboard)."""

    def show(self, chunks: Sequence[Chunk]) -> None:
        """Write ``chunks`` above the live area, then redraw it (and the overlay after)."""
        if self.overlay is not None:
            self.out.write(self.overlay.hide())
            self.out.flush()  # before any stderr text goes to the same terminal
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
        if self.overlay is not None:
            self.out.write(self.overlay.reveal())
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


def stdio_terminal() -> Terminal:
    """The process's stdout and stderr as a :class:`Terminal` (colour on a terminal unless
    ``NO_COLOR``); text that cannot be encoded is replaced, never an error."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    tty = sys.stdout.isatty()
    style = choose_style(tty=tty, env=os.environ, width=shutil.get_terminal_size().columns)
    return Terminal(sys.stdout, sys.stderr, Renderer(style), tty)


async def edit_in(editor: str, text: str) -> str | None:
    """Let the user edit ``text`` with the ``editor`` command (split like a shell would) on a
    temporary file, on this terminal: the text saved, ``None`` when the editor failed."""
    with tempfile.TemporaryDirectory(prefix="pitrio-attach-") as folder:
        path = Path(folder) / "answer.txt"
        path.write_text(text, encoding="utf-8")
        done = await trio.run_process([*shlex.split(editor), str(path)], check=False, stdin=None)
        return path.read_text(encoding="utf-8") if done.returncode == 0 else None
