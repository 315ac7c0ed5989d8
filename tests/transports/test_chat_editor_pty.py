"""The terminal chat's prompt line on a real pseudo-terminal: the keys a pi user types (Up
for an earlier prompt, Tab for a command, cursor keys mid-line), and the terminal given back
as found however the chat ends."""

from __future__ import annotations

import signal
import termios
from pathlib import Path

import pytest

from tests.transports.test_chat_pty import (
    MARKER,
    _exits,
    _session_files,
    chat,
    exchange,
    greeting_chat,
    leave,
    work,
)

__all__ = ["work"]  # the fixture, used by name

UP, DOWN, LEFT, RIGHT, HOME, END = "\x1b[A", "\x1b[B", "\x1b[D", "\x1b[C", "\x1b[H", "\x1b[F"


def _line_mode(screen_master: int) -> tuple[bool, bool]:
    """Whether the terminal is in canonical mode and echoes."""
    lflag = termios.tcgetattr(screen_master)[3]
    return bool(lflag & termios.ICANON), bool(lflag & termios.ECHO)


async def test_up_recalls_earlier_prompts_also_of_a_reopened_session(work: Path) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        assert _line_mode(screen.master) == (False, False)  # keys come one by one
        await exchange(screen, "first words", r"You said: first words")
        await exchange(screen, "second words", r"You said: second words")
        # Up twice: the older prompt; Enter sends it again.
        await exchange(screen, UP + UP, r"You said: first words")
        # Up, then Down past the newest: the line typed before browsing comes back.
        await exchange(screen, "draft" + HOME + UP + DOWN + " kept", r"You said: draft kept")
        await leave(screen, process)
        assert _line_mode(screen.master) == (True, True)  # given back as found
    async with chat(work, "--continue") as (screen, process):
        await screen.until(MARKER)
        # pi's editor fills its history from the reopened session's prompts.
        await exchange(screen, UP, r"draft kept\x1b\[K.*\r\nYou said: draft kept")
        await leave(screen, process)


async def test_tab_completes_the_chats_and_the_sessions_commands(work: Path) -> None:
    async with greeting_chat(work) as (screen, process):
        # A prompt template of the session (from get_commands).
        await exchange(screen, "/gr\tAda", r"You said: Say hello to Ada")
        # The chat's own command: /mo + Tab is "/model ".
        await exchange(screen, "/mo\tfaux/faux-think", r"model: faux/faux-think\r\n")
        # Several fit: Tab lists them under the line, which is written again.
        screen.type("/n\t")
        await screen.until(r"/name  /new\r\n> /n")
        await exchange(screen, "ame\tchatty", r"name: chatty\r\n")
        await leave(screen, process)


async def test_editing_in_the_middle_of_a_line(work: Path) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        # "helo wörld": two Left, an "l"; Home, "¡"; End, Backspace, "d!".
        keys = "helo wörld" + LEFT * 7 + "l" + HOME + "¡" + END + "\x7f" + "d!"
        await exchange(screen, keys, r"You said: ¡hello wörld!\r\n")
        # Ctrl-A / Ctrl-E / Right / Delete.
        await exchange(screen, "bc\x01a\x05d" + HOME + RIGHT + "\x1b[3~", r"You said: acd\r\n")
        await leave(screen, process)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["term", "hup"])
async def test_the_terminal_is_given_back_when_the_chat_is_killed(
    work: Path, number: signal.Signals
) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        assert _line_mode(screen.master) == (False, False)
        process.send_signal(number)
        await _exits(process, -number)
        assert _line_mode(screen.master) == (True, True)
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        screen.type("typed, then Ctrl-C\x03")  # Ctrl-C when idle leaves, as before
        await _exits(process)
        assert _line_mode(screen.master) == (True, True)


async def test_fork_puts_the_prompt_picked_on_the_line_in_a_new_session(work: Path) -> None:
    async with chat(work) as (screen, process):
        await screen.until(MARKER)
        for word in ("one", "two", "three"):
            await exchange(screen, word, rf"You said: {word}")
        screen.type("/fork\n")
        await screen.until(r"Fork from which prompt\?\r\n  1\. one\r\n  2\. two\r\n  3\. three")
        screen.type("2\n")
        # What came before "two", then "two" on the prompt line to edit and send.
        await screen.until(r"> one\r\nYou said: one\r\n")
        await screen.until(r"\(forked: a new session, \S+\.jsonl\)")
        await exchange(screen, " more", r"> two.* more\x1b\[K\r\n.*You said: two more")
        await exchange(screen, "/clone", r"\(cloned: a new session with this conversation\)")
        await leave(screen, process)
    files = {p: p.read_text() for p in _session_files(work)}
    assert len(files) == 3
    forked = [text for text in files.values() if "two more" in text]
    assert len(forked) == 2  # the fork and its clone
    assert all("You said: one" in text and "three" not in text for text in forked)
