"""A user's own shell command (``!cmd``, RPC ``bash``; spec §3.12).

Runs the command in the session's cwd through the configured shell, in its own process group,
with stdout and stderr merged. Output is decoded, stripped of terminal control sequences and
carriage returns, streamed to ``on_chunk``, and tail-truncated (2000 lines / 50 KB) with the
whole output kept in a temp file once it grows past the limit. Cancellation (``abort_bash``)
ends the whole process group and gives a result with ``cancelled`` set, never an exception.
"""

from __future__ import annotations

import codecs
import os
import re
import secrets
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import trio

from pitrio.actors.tool_executor.processes import open_merged, terminate_group
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
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    output = OutputAccumulator()
    spill_path: str | None = None
    spill: Any = None

    async def take(text: str) -> None:
        nonlocal spill, spill_path
        clean = sanitize(text)
        if not clean:
            return
        output.append(clean.encode())
        chunks = output.take_spill()
        if chunks:
            if spill is None:
                directory = temp_dir or tempfile.gettempdir()
                # pi's name for it (issue 21), as the bash tool's
                spill_path = os.path.join(directory, f"pi-bash-{secrets.token_hex(8)}.log")
                spill = await trio.open_file(spill_path, "wb")
            await spill.write(b"".join(chunks))
        if on_chunk is not None:
            await on_chunk(clean)

    process = await open_merged(argv, cwd=cwd)
    cancelled = False
    try:
        with scope:
            stream = process.stdout
            assert stream is not None
            while chunk := await stream.receive_some(READ_CHUNK):
                await take(decoder.decode(bytes(chunk)))
            await process.wait()
        cancelled = scope.cancelled_caught
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await terminate_group(process.pid, process)
            if process.stdout is not None:
                await process.stdout.aclose()
            await take(decoder.decode(b"", final=True))
            output.finish()
            chunks = output.take_spill()
            if chunks and spill is not None:
                await spill.write(b"".join(chunks))
            if spill is not None:
                await spill.aclose()
    snapshot = output.snapshot()
    truncated = snapshot.truncation.truncated
    return BashResult(
        output=snapshot.content,
        exit_code=None if cancelled else process.returncode,
        cancelled=cancelled,
        truncated=truncated,
        full_output_path=spill_path if truncated else None,
    )
