"""The terminal chat's prompt line, without any I/O: bytes typed in, key events out
(:func:`decode`), and a one-line editor fed those keys (:class:`LineEditor`) that says what
the line is, where its cursor is and what to write to show a change (:func:`redraw`).

What pi's editor does for one line: printable text (UTF-8), Backspace/Delete, Left/Right,
Home/End (Ctrl-A/Ctrl-E), Ctrl-U/Ctrl-K/Ctrl-W, Up/Down through the prompt history (pi's
rules: Up browses when the line is empty, already browsing or the cursor is at its start,
else goes to the start; Down browses back while browsing, else goes to the end; the line
typed before browsing comes back past the newest entry), Tab completes a ``/`` command name,
Enter submits, Esc ends the line as an interrupt, Ctrl-D on an empty line is the end of
input.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import attrs

HISTORY_MOST = 100
"""Entries the history keeps (pi's editor keeps as many)."""

_CSI_KEYS = {
    "A": "up",
    "B": "down",
    "C": "right",
    "D": "left",
    "H": "home",
    "F": "end",
    "1~": "home",
    "7~": "home",
    "4~": "end",
    "8~": "end",
    "3~": "delete",
}
_CONTROL_KEYS = {
    "\r": "enter",
    "\n": "enter",
    "\t": "tab",
    "\x7f": "backspace",
    "\x08": "backspace",
    "\x01": "home",
    "\x05": "end",
    "\x02": "left",
    "\x06": "right",
    "\x04": "ctrl-d",
    "\x15": "kill-start",
    "\x0b": "kill-end",
    "\x17": "kill-word",
    "\x10": "up",
    "\x0e": "down",
}


@attrs.frozen
class Key:
    """One key press: ``name`` is ``text`` for printable input, else the key's name."""

    name: str
    text: str = ""


def decode(data: bytes, *, waiting: bool = False) -> tuple[list[Key], bytes]:
    """The keys in ``data`` and the bytes left over (an unfinished escape sequence or UTF-8
    character, to be completed by the next read). A lone Esc at the end is the Esc key,
    unless ``waiting``: then it is left over too, as the start of a sequence (an arrow's)
    whose rest may come in the next read."""
    keys: list[Key] = []
    index = 0
    while index < len(data):
        byte = data[index]
        if byte == 0x1B:
            if index + 1 == len(data):
                if waiting:
                    return keys, data[index:]
                keys.append(Key("escape"))
                index += 1
                continue
            lead = data[index + 1 : index + 2]
            if lead not in (b"[", b"O"):
                keys.append(Key("escape"))  # Esc then a key: the Esc ends the line first
                index += 1
                continue
            end = index + 2
            while end < len(data) and not 0x40 <= data[end] <= 0x7E:
                end += 1
            if end >= len(data):
                return keys, data[index:]  # the rest of the sequence is on its way
            body = data[index + 2 : end + 1].decode("ascii", "replace")
            name = _CSI_KEYS.get(body) or _CSI_KEYS.get(body[-1:] if ";" in body else "")
            if name is not None:
                keys.append(Key(name))
            index = end + 1  # an unknown sequence is dropped whole, never typed as text
            continue
        if byte < 0x80:
            char = chr(byte)
            if char in _CONTROL_KEYS:
                keys.append(Key(_CONTROL_KEYS[char]))
            elif char.isprintable():
                keys.append(Key(char, char))
            index += 1
            continue
        size = (
            1 if byte < 0xC0 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
        )  # a stray continuation byte is one replacement character, never a longer read
        if index + size > len(data):
            return keys, data[index:]
        text = data[index : index + size].decode("utf-8", "replace")
        keys.append(Key(text, text))
        index += size
    return keys, b""


def width(text: str) -> int:
    """The columns ``text`` takes on a terminal (wide East Asian characters take two,
    combining marks none)."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


@attrs.frozen
class Done:
    """The line is finished: ``line`` is the text (ending in Esc for an interrupt), ``None``
    at the end of input."""

    line: str | None


@attrs.frozen
class Listing:
    """Tab found several commands and nothing more to complete: show them."""

    names: tuple[str, ...]


class LineEditor:
    """One prompt line being edited, with the history it can recall and the ``/`` command
    names Tab completes."""

    def __init__(self, history: Sequence[str] = (), commands: Sequence[str] = ()) -> None:
        self.history: list[str] = []
        """Newest first, as pi keeps it."""
        for entry in history:
            self.remember(entry)
        self.commands = sorted(set(commands))
        self.text = ""
        self.cursor = 0
        self.browsing = -1
        self.draft = ""

    def remember(self, line: str) -> None:
        """Keep a submitted line for Up (trimmed; not twice in a row; the newest 100)."""
        trimmed = line.strip()
        if trimmed and (not self.history or self.history[0] != trimmed):
            self.history.insert(0, trimmed)
            del self.history[HISTORY_MOST:]

    def start(self, text: str = "") -> None:
        """A new line, empty or starting as ``text`` (the cursor at its end)."""
        self.text, self.cursor, self.browsing, self.draft = text, len(text), -1, ""

    def feed(self, key: Key) -> Done | Listing | None:
        """Apply one key: what finished, if anything."""
        name = key.name
        if key.text:
            before, after = self.text[: self.cursor], self.text[self.cursor :]
            self._set(before + key.text + after, self.cursor + len(key.text))
        elif name == "enter":
            return Done(self.text)
        elif name == "escape":
            return Done(self.text + "\x1b")
        elif name == "ctrl-d":
            if not self.text:
                return Done(None)
            self._delete_forward()
        elif name == "backspace" and self.cursor:
            self._set(self.text[: self.cursor - 1] + self.text[self.cursor :], self.cursor - 1)
        elif name == "delete":
            self._delete_forward()
        elif name == "left":
            self.cursor = max(0, self.cursor - 1)
        elif name == "right":
            self.cursor = min(len(self.text), self.cursor + 1)
        elif name == "home":
            self.cursor = 0
        elif name == "end":
            self.cursor = len(self.text)
        elif name == "kill-start":
            self._set(self.text[self.cursor :], 0)
        elif name == "kill-word":
            start = len(self.text[: self.cursor].rstrip())
            while start and not self.text[start - 1].isspace():
                start -= 1
            self._set(self.text[:start] + self.text[self.cursor :], start)
        elif name == "kill-end":
            self._set(self.text[: self.cursor], self.cursor)
        elif name == "up":
            if not self.text or self.browsing > -1 or not self.cursor:
                self._browse(+1)
            else:
                self.cursor = 0
        elif name == "down":
            if self.browsing > -1:
                self._browse(-1)
            else:
                self.cursor = len(self.text)
        elif name == "tab":
            return self._complete()
        return None

    def _set(self, text: str, cursor: int) -> None:
        self.text, self.cursor = text, cursor

    def _delete_forward(self) -> None:
        self._set(self.text[: self.cursor] + self.text[self.cursor + 1 :], self.cursor)

    def _browse(self, older: int) -> None:
        index = self.browsing + older
        if index < -1 or index >= len(self.history):
            return
        if self.browsing == -1:
            self.draft = self.text  # the line typed so far comes back past the newest
        self.browsing = index
        if index == -1:
            self._set(self.draft, len(self.draft))
        else:
            entry = self.history[index]
            # As pi: Up leaves the cursor at the start (so Up again goes on), Down at the end.
            self._set(entry, 0 if older > 0 else len(entry))

    def _complete(self) -> Listing | None:
        """Tab on ``/name`` (the cursor at its end, no argument yet): the one command that
        fits completes with a space; several extend to what they share, or are listed."""
        typed = self.text[: self.cursor]
        if not typed.startswith("/") or " " in typed or self.cursor != len(self.text):
            return None
        fits = [name for name in self.commands if name.startswith(typed[1:])]
        if not fits:
            return None
        if len(fits) == 1:
            completed = "/" + fits[0] + " "
            self._set(completed, len(completed))
            return None
        shared = "/" + _shared_start(fits)
        if len(shared) > len(typed):
            self._set(shared, len(shared))
            return None
        return Listing(tuple(fits))


def _shared_start(names: Sequence[str]) -> str:
    """The longest text every one of ``names`` starts with."""
    first, last = min(names), max(names)  # sorted apart the most: what they share, all share
    size = 0
    while size < min(len(first), len(last)) and first[size] == last[size]:
        size += 1
    return first[:size]


def redraw(shown: str, shown_cursor: int, text: str, cursor: int) -> str:
    """What to write to turn the line ``shown`` (cursor at ``shown_cursor``) into ``text``
    (cursor at ``cursor``) in place: back to where the line began, the new text over the
    old one and the rest of the row cleared, then back to the cursor. A line wider than the
    terminal is not handled (the cursor cannot move back over a wrap)."""
    out = []
    back = width(shown[:shown_cursor])
    if back:
        out.append(f"\x1b[{back}D")
    out.append(text + "\x1b[K")
    after = width(text[cursor:])
    if after:
        out.append(f"\x1b[{after}D")
    return "".join(out)
