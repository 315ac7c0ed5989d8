"""Running ``rg`` or ``fd`` when they are installed: lines out, stop early, nothing left over.

The child runs in its own process group and is ended (group-wide) as soon as the caller has
seen enough lines, on abort, or on any error, so no search outlives its tool call.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence

import attrs
import trio

from pitrio.actors.tool_executor.processes import terminate_group
from pitrio.messages.ostext import check_os_texts


@attrs.frozen
class NativeResult:
    """Exit code (``None`` if we stopped it), stderr text, and whether we stopped it early."""

    code: int | None
    stderr: str
    stopped: bool


def find_executable(name: str) -> str | None:
    """The path of ``name`` on ``PATH``, if any."""
    return shutil.which(name)


async def run_lines(argv: Sequence[str], on_line: Callable[[str], bool]) -> NativeResult:
    """Run ``argv``, passing each stdout line to ``on_line``; it returns False to stop early.

    Raises :class:`~pitrio.errors.UnencodableTextError` for an argument the OS cannot take."""
    check_os_texts(argv, "argument", from_os=True)  # a root under a cwd the OS named
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    stderr_chunks: list[bytes] = []
    stopped = False

    async def read_stderr() -> None:
        assert process.stderr is not None
        while chunk := await process.stderr.receive_some(65536):
            stderr_chunks.append(bytes(chunk))

    async def read_stdout() -> None:
        nonlocal stopped
        assert process.stdout is not None
        pending = b""
        while chunk := await process.stdout.receive_some(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not on_line(line.decode("utf-8", "replace")):
                    stopped = True
                    return
        if pending and not on_line(pending.decode("utf-8", "replace")):
            stopped = True

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_stderr)
            await read_stdout()
            if stopped:
                nursery.cancel_scope.cancel()
            else:
                await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                await terminate_group(process.pid, process)
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    await stream.aclose()
    stderr = b"".join(stderr_chunks).decode("utf-8", "replace")
    return NativeResult(
        code=None if stopped else process.returncode, stderr=stderr, stopped=stopped
    )
