"""The terminal chat's keyboard on a terminal: the terminal in non-canonical mode and each
line edited by :class:`~pitrio.transports.line_editor.LineEditor` (history, Tab completion,
cursor keys), shown by writing the editor's changes to stdout. Not a terminal: the plain
:class:`~pitrio.transports.attach_terminal.Keyboard` reads lines as before."""

from __future__ import annotations

import contextlib
import os
import signal
import termios
from collections.abc import Iterator, Sequence
from types import FrameType
from typing import TextIO

import trio

from pitrio.transports.attach_terminal import Keyboard, Settings, changed_settings
from pitrio.transports.line_editor import Done, Key, LineEditor, decode, redraw

ESCAPE_WAIT = 0.05
"""Seconds a lone Esc waits for the rest of a key's sequence before it counts as the Esc key
(a terminal sends a sequence in one write; over a slow link it may arrive in two reads)."""


class EditingKeyboard(Keyboard):
    """Lines typed on a terminal in non-canonical mode, edited as pi's editor would."""

    def __init__(self, fd: int, out: TextIO, *, marker: str = "> ") -> None:
        super().__init__(fd, escape=True)
        self.out = out
        self.marker = marker
        """What stands before the line when it is written again (after a Tab listing)."""
        self.editor = LineEditor()
        self.partial = b""
        self.prefilled = ""
        """The text the next line starts with (``/fork``'s prompt), shown when it is read."""
        self.reading = False
        self.shown, self.shown_cursor = "", 0
        """The line as it stands on the screen, and its cursor."""
        self.ahead: list[Key] = []
        """Keys read but not yet fed (typed ahead of the line that asks for them)."""

    def remember(self, line: str) -> None:
        """A prompt or command sent: Up recalls it."""
        self.editor.remember(line)

    def know(self, *, history: Sequence[str] = (), commands: Sequence[str] = ()) -> None:
        """Earlier prompts of the session (oldest first) and the command names Tab completes."""
        for line in history:
            self.editor.remember(line)
        self.editor.commands = sorted(set(commands))

    def prefill(self, text: str) -> None:
        """The next line starts as ``text``, the cursor at its end."""
        self.prefilled = text

    def hide(self) -> str:
        """Output is coming: the typed line is taken away (see :class:`Overlay`)."""
        if not self.shown:
            return ""
        erase = redraw(self.shown, self.shown_cursor, "", 0)
        self.shown, self.shown_cursor = "", 0
        return erase

    def reveal(self) -> str:
        """Output was written: the line being typed is drawn again after it."""
        editor = self.editor
        if not self.reading or not editor.text:
            return ""
        self.shown, self.shown_cursor = editor.text, editor.cursor
        return redraw("", 0, editor.text, editor.cursor)

    def _write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    async def _next_key(self) -> Key | None:
        while not self.ahead:
            if self.eof:
                return None
            if self.partial == b"\x1b":
                # Esc alone so far: the key, unless an arrow's sequence goes on at once.
                with trio.move_on_after(ESCAPE_WAIT):
                    await trio.lowlevel.wait_readable(self.fd)
                    self._read()
                    continue
                keys, self.partial = decode(self.partial)
                self.ahead.extend(keys)
                continue
            await trio.lowlevel.wait_readable(self.fd)
            self._read()
        return self.ahead.pop(0)

    def _read(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:  # the terminal went away (EIO): as the end of input
            data = b""
        self.eof = not data
        keys, self.partial = decode(self.partial + data, waiting=not self.eof)
        self.ahead.extend(keys)

    async def readline(self) -> str | None:
        """The next line as edited (one the Esc key ended ends with Esc); ``None`` at the end
        of input. Enter is echoed as a new line; Esc is not."""
        editor = self.editor
        editor.start(self.prefilled)
        self.prefilled = ""
        self.shown, self.shown_cursor = "", 0
        self.reading = True
        try:
            while True:
                self._update()
                key = await self._next_key()
                outcome = Done(editor.text or None) if key is None else editor.feed(key)
                if isinstance(outcome, Done):
                    if outcome.line is not None and not outcome.line.endswith("\x1b"):
                        self._write("\n")  # the terminal adds the CR (ONLCR), as for all output
                    return outcome.line
                if outcome is not None:  # a listing of the commands that fit
                    names = "  ".join("/" + name for name in outcome.names)
                    self._write(f"\n{names}\n{self.marker}")
                    self.shown, self.shown_cursor = "", 0
        finally:
            self.reading = False

    def _update(self) -> None:
        """Make the line on the screen the editor's."""
        editor = self.editor
        if (self.shown, self.shown_cursor) != (editor.text, editor.cursor):
            self._write(redraw(self.shown, self.shown_cursor, editor.text, editor.cursor))
            self.shown, self.shown_cursor = editor.text, editor.cursor


def _non_canonical(settings: Settings) -> Settings:
    settings[3] &= ~(termios.ICANON | termios.ECHO | termios.IEXTEN)
    settings[6][termios.VMIN] = 1
    settings[6][termios.VTIME] = 0
    return settings


@contextlib.contextmanager
def prompt_line_mode(fd: int) -> Iterator[bool]:
    """The terminal ``fd`` in non-canonical mode without echo (keys arrive one by one; Ctrl-C
    still raises SIGINT): yields whether it could (not a terminal: no). The settings are given
    back as found on the way out, and before the process dies of SIGTERM or SIGHUP."""
    with changed_settings(fd, _non_canonical) as restore:
        if restore is None:
            yield False
            return
        put_back = restore

        def dying(number: int, frame: FrameType | None) -> None:
            put_back()
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)  # dies of the signal, as without this handler

        signals = (signal.SIGTERM, signal.SIGHUP)
        before = {number: signal.signal(number, dying) for number in signals}
        try:
            yield True
        finally:
            for number, handler in before.items():
                signal.signal(number, handler)
