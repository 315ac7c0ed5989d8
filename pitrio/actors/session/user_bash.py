"""A user's own shell command (``!cmd``, RPC ``bash``; spec §3.12).

Runs the command in the session's cwd through the configured shell, in its own process group,
stdout and stderr on pipes of their own as pi 1.6.0 reads them: each chunk read from either
is decoded (a UTF-8 decoder per pipe, so a character split across reads of one pipe survives
the other's output), stripped of terminal control sequences and carriage returns, streamed to
``on_chunk`` (one ``bash_execution_update`` per chunk) and added to the output, which is
tail-truncated (2000 lines / 50 KB) with the whole of it kept in a temp file once it grows
past the limit. Cancellation (``abort_bash``) ends the whole process group and gives a result
with ``cancelled`` set, never an exception.

One task reads both pipes (:func:`read_pipes`): two reader tasks would take chunks in the
scheduler's order, not the command's. Writes separated in time come out in the order they
were made; what is waiting on both pipes at once is taken stdout first.
"""

from __future__ import annotations

import codecs
import errno
import os
import re
import secrets
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from pitrio.actors.tool_executor.processes import open_split, terminate_group
from pitrio.actors.tool_executor.tools.bash import nul_problem, shell_command
from pitrio.actors.tool_executor.tools.output import OutputAccumulator
from pitrio.errors import PitrioError

READ_CHUNK = 65536

# CSI / OSC / two-character escape sequences, as terminals and colouring tools emit them.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ufff9-\ufffb]")


@attrs.frozen(kw_only=True)
class BashResult:
    """What a user command gave (pi's ``BashResult``; ``exit_code`` is absent when cancelled)."""

    output: str
    exit_code: int | None = None
    cancelled: bool
    truncated: bool
    full_output_path: str | None = None


class BashCommandError(PitrioError):
    """A user command that cannot be run at all (the message says why)."""


def sanitize(text: str) -> str:
    """Drop terminal escapes, control characters (tab and newline kept) and carriage returns."""
    return _CONTROL.sub("", _ANSI.sub("", text).replace("\r", ""))


class PipeTexts:
    """Text of several pipes' bytes, a UTF-8 decoder per pipe (pure): a character whose bytes
    arrive in two reads of one pipe decodes whole, whatever another pipe gave in between."""

    def __init__(self, pipes: int) -> None:
        self._decoders = [codecs.getincrementaldecoder("utf-8")("replace") for _ in range(pipes)]

    def decode(self, index: int, data: bytes) -> str:
        """The text of pipe ``index``'s next ``data`` (an incomplete character is held)."""
        return self._decoders[index].decode(data)

    def finish(self) -> list[str]:
        """What each pipe still holds (an incomplete character, replaced), in pipe order."""
        return [decoder.decode(b"", final=True) for decoder in self._decoders]


def _read_ready(fd: int) -> bytes | None:
    """One chunk of ``fd`` (non-blocking): ``None`` when nothing is waiting, ``b""`` at the
    end of the pipe."""
    try:
        return os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return None
    except OSError as exc:
        if exc.errno == errno.EIO:  # a pty-like end that hung up: the end of its output
            return b""
        raise


async def _wait_any_readable(fds: Sequence[int]) -> None:
    """Return once at least one of ``fds`` is readable (data or the end of the pipe)."""
    async with trio.open_nursery() as nursery:

        async def watch(fd: int) -> None:
            await trio.lowlevel.wait_readable(fd)
            nursery.cancel_scope.cancel()

        for fd in fds:
            nursery.start_soon(watch, fd)


async def read_pipes(fds: Sequence[int], on_data: Callable[[int, bytes], Awaitable[None]]) -> None:
    """Read the non-blocking pipes ``fds`` to their ends in one task, giving each chunk to
    ``on_data(index of its pipe, bytes)``.

    Each round takes one chunk from every pipe that has one waiting, in the order of ``fds``
    (stdout before stderr), then waits for any of them to have more. So what a command writes
    at different times comes out in that order, and what waits on several pipes at once comes
    out in ``fds``' order, never in a scheduler's.
    """
    open_pipes = list(range(len(fds)))
    while open_pipes:
        progressed = False
        for index in list(open_pipes):
            data = _read_ready(fds[index])
            if data is None:
                continue
            progressed = True
            if data:
                await on_data(index, data)
            else:
                open_pipes.remove(index)
        if progressed:
            await trio.lowlevel.checkpoint()  # a cancellation lands between rounds too
        elif open_pipes:
            await _wait_any_readable([fds[index] for index in open_pipes])


class OutputCollector:
    """A user command's output as it arrives: sanitised, streamed to ``on_chunk``, kept
    tail-truncated, the whole of it spilled to pi's temp file once past the limit."""

    def __init__(
        self,
        on_chunk: Callable[[str], Awaitable[None]] | None = None,
        temp_dir: str | None = None,
    ) -> None:
        self._on_chunk = on_chunk
        self._temp_dir = temp_dir
        self._output = OutputAccumulator()
        self._spill: Any = None
        self.spill_path: str | None = None

    async def take(self, text: str) -> None:
        """Add ``text`` (a decoded chunk)."""
        clean = sanitize(text)
        if not clean:
            return
        self._output.append(clean.encode())
        chunks = self._output.take_spill()
        if chunks:
            if self._spill is None:
                directory = self._temp_dir or tempfile.gettempdir()
                # pi's name for it (issue 21), as the bash tool's
                self.spill_path = os.path.join(directory, f"pi-bash-{secrets.token_hex(8)}.log")
                self._spill = await trio.open_file(self.spill_path, "wb")
            await self._spill.write(b"".join(chunks))
        if self._on_chunk is not None:
            await self._on_chunk(clean)

    async def finish(self) -> None:
        """Close the output (and its spill file); call once, shielded."""
        self._output.finish()
        chunks = self._output.take_spill()
        if chunks and self._spill is not None:
            await self._spill.write(b"".join(chunks))
        if self._spill is not None:
            await self._spill.aclose()

    def result(self, exit_code: int | None, cancelled: bool) -> BashResult:
        """The command's result once finished."""
        snapshot = self._output.snapshot()
        truncated = snapshot.truncation.truncated
        return BashResult(
            output=snapshot.content,
            exit_code=None if cancelled else exit_code,
            cancelled=cancelled,
            truncated=truncated,
            full_output_path=self.spill_path if truncated else None,
        )


async def run_user_bash(
    command: str,
    cwd: str,
    *,
    shell_path: str | None = None,
    command_prefix: str | None = None,
    on_chunk: Callable[[str], Awaitable[None]] | None = None,
    temp_dir: str | None = None,
    scope: trio.CancelScope | None = None,
) -> BashResult:
    """Run ``command``; cancelling ``scope`` ends it and gives a cancelled result.

    Raises :class:`BashCommandError` for a command no shell can be given (a NUL in it).
    """
    problem = nul_problem(command) or (nul_problem(command_prefix) if command_prefix else None)
    if problem is not None:
        raise BashCommandError(problem)  # the spawn would fail with a bare ValueError
    scope = scope or trio.CancelScope()
    resolved = f"{command_prefix}\n{command}" if command_prefix else command
    argv = [*shell_command(shell_path), resolved]
    texts = PipeTexts(2)
    output = OutputCollector(on_chunk, temp_dir)

    async def pipe_data(index: int, data: bytes) -> None:
        await output.take(texts.decode(index, data))

    process = await open_split(argv, cwd=cwd)
    pipes = [process.stdout, process.stderr]
    cancelled = False
    try:
        with scope:
            fds = []
            for pipe in pipes:
                assert isinstance(pipe, trio.lowlevel.FdStream)  # POSIX pipes, both ways
                fds.append(pipe.fileno())
            await read_pipes(fds, pipe_data)
            await process.wait()
        cancelled = scope.cancelled_caught
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await terminate_group(process.pid, process)
            for pipe in pipes:
                if pipe is not None:
                    await pipe.aclose()
            for rest in texts.finish():  # a character cut off at a pipe's end: stdout's first
                await output.take(rest)
            await output.finish()
    return output.result(process.returncode, cancelled)


async def run_bash_operations(
    command: str,
    cwd: str,
    operations: Any,
    *,
    command_prefix: str | None = None,
    on_chunk: Callable[[str], Awaitable[None]] | None = None,
    temp_dir: str | None = None,
    scope: trio.CancelScope | None = None,
) -> BashResult:
    """Run ``command`` through an extension's backend (a ``user_bash`` handler's
    ``operations``: ``await operations.exec(command, cwd, on_data=...)`` calls ``on_data``
    with each chunk of bytes and returns the exit code, or a dict with ``exitCode``), its
    output collected as a local command's. Cancelling ``scope`` gives a cancelled result."""
    scope = scope or trio.CancelScope()
    resolved = f"{command_prefix}\n{command}" if command_prefix else command
    texts = PipeTexts(1)
    output = OutputCollector(on_chunk, temp_dir)

    async def on_data(data: bytes | str) -> None:
        await output.take(data if isinstance(data, str) else texts.decode(0, data))

    code: Any = None
    try:
        with scope:
            code = await operations.exec(resolved, cwd, on_data=on_data)
    finally:
        with trio.CancelScope(shield=True):
            for rest in texts.finish():
                await output.take(rest)
            await output.finish()
    if isinstance(code, dict):
        code = code.get("exitCode", code.get("exit_code"))
    return output.result(code if isinstance(code, int) else None, scope.cancelled_caught)
