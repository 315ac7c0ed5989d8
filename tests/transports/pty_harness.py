"""A program on a pseudo-terminal of its own (stdlib ``pty``): what it writes, read with
bounded waits for expected output, and keys typed at it."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import termios
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio


class Screen:
    """What the program wrote to the terminal, raw (ANSI included; a dim span closed and
    reopened at once is read as one)."""

    def __init__(self, master: int) -> None:
        self.master = master
        self.text = ""
        self.mark = 0

    async def until(self, pattern: str, seconds: float = 30.0) -> re.Match[str]:
        """Wait for ``pattern`` in the output after the previous match."""
        with trio.move_on_after(seconds):
            while True:
                if match := re.compile(pattern).search(self.text, self.mark):
                    self.mark = match.end()
                    return match
                await trio.lowlevel.wait_readable(self.master)
                try:
                    data = os.read(self.master, 65536)
                except OSError:  # EIO: the program closed the terminal
                    break
                # One dim span per delta: adjacent spans are read as one.
                self.text += data.decode("utf-8", "replace")
                self.text = self.text.replace("\x1b[22m\x1b[2m", "")
        raise AssertionError(f"no {pattern!r} in {self.text[self.mark :]!r}")

    def type(self, keys: str) -> None:
        """Keys typed at the terminal."""
        os.write(self.master, keys.encode())


def _controlling_terminal() -> None:  # runs in the child before exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@asynccontextmanager
async def on_a_pty(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: Path | None = None,
    stdin: int | None = None,
) -> AsyncIterator[tuple[Screen, trio.Process]]:
    """Run ``command`` with the terminal as its stdin (unless ``stdin`` is given), stdout and
    stderr, as the controlling terminal of a session of its own; killed if still running."""
    master, slave = pty.openpty()
    process = await trio.lowlevel.open_process(
        list(command),
        stdin=slave if stdin is None else stdin,
        stdout=slave,
        stderr=slave,
        env=dict(env),
        cwd=cwd,
        preexec_fn=_controlling_terminal if stdin is None else os.setsid,
    )
    os.close(slave)
    try:
        yield Screen(master), process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        os.close(master)
