"""The ``bash`` tool (spec §5.5): a shell command in its own process group, output streamed.

* ``<shell> -c <command>`` runs in the session's working directory in a new session (so a new
  process group); stdout and stderr are one pipe, in the order the command wrote them.
* Output is reported as ``tool_execution_update``\\ s: an empty one first, then at most one
  every 100 ms with the current tail. Past 50 KB or 2000 lines the full raw output is saved
  to ``<tmp>/pi-bash-<16 hex>.log`` and the result shows the tail with a notice naming it.
* A non-zero exit is an error (``Command exited with code N``); a timeout or an abort ends
  the whole process group — ``SIGTERM``, then ``SIGKILL`` after a short grace — and reaps it
  before the tool reports ``Command timed out after N seconds`` / ``Command aborted``.
* When the shell exits but a background child still holds the pipe, reading stops 100 ms
  later; the child's group stays tracked by the session and is ended with it.
"""

from __future__ import annotations

import codecs
import os
import secrets
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import nullcontext
from typing import Any

import attrs
import trio

from pitrio.actors.direct_io import receiver
from pitrio.actors.tool_executor.context import current_call
from pitrio.actors.tool_executor.jsvalues import js_number_to_string
from pitrio.actors.tool_executor.ledger import OWNER_VARIABLE, ledger
from pitrio.actors.tool_executor.processes import (
    KILL_GRACE_S,
    ProcessGroups,
    SpawnedProcess,
    open_merged,
    terminate_group,
)
from pitrio.actors.tool_executor.tool import JSON_SCHEMA_PREFER, AgentTool, UpdateFn, text_result
from pitrio.actors.tool_executor.tools.output import OutputAccumulator, OutputSnapshot
from pitrio.actors.tool_executor.tools.truncate import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    format_size,
)
from pitrio.errors import ToolError
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.content import TextContent
from pitrio.messages.ostext import check_os_text, os_text_problem

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "required": ["command"],
    "properties": {
        "command": {"type": "string", "description": "The bash command to run"},
        "timeout": {
            "type": "number",
            "description": "Seconds after which the command is stopped (default: no limit)",
        },
    },
}

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["output", "truncated", "exit_code", "wall_time_seconds"],
    "properties": {
        "output": {"type": "string", "description": "Combined stdout and stderr, maybe cut"},
        "truncated": {"type": "boolean"},
        "full_output_path": {"type": "string", "description": "The whole output, when cut"},
        "exit_code": {"type": "number"},
        "wall_time_seconds": {"type": "number"},
    },
}
"""pi 1.6.0's ``outputSchema`` of bash: what a codemode script's ``tools.bash(...)`` resolves
to (the ``structured_content``), a non-zero exit code included."""

DESCRIPTION = (
    "Run a bash command in the working directory and return its combined stdout and stderr. "
    f"Only the last {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB of output are "
    "returned (whichever limit is reached first); the complete output is then saved to a "
    "temporary file whose path is given. A timeout in seconds may be set."
)
PROMPT_SNIPPET = "Execute bash commands (ls, grep, find, etc.)"

UPDATE_INTERVAL_S = 0.1
"""Minimum spacing of streamed output updates."""
EXIT_STDIO_GRACE_S = 0.1
"""How long output is still awaited after the shell exits (a background child may hold it)."""
READ_CHUNK = 65536
DRAIN_CHUNKS = 256
"""At most this many reads (16 MiB) of what lies in the pipe once the grace is over: more than
any pipe holds, so only a background child still writing can reach the bound."""


@attrs.frozen(kw_only=True)
class BashSettings:
    """Shell (``shell_path``), a prefix line run before every command, environment, grace."""

    shell_path: str | None = None
    command_prefix: str | None = None
    env: Mapping[str, str] | None = None
    kill_grace: float = KILL_GRACE_S
    temp_dir: str | None = None


def nul_problem(command: str) -> str | None:
    """Why ``command`` cannot be given to a shell (it holds a NUL character or a lone surrogate,
    see :mod:`pitrio.messages.ostext`), or ``None``."""
    where = command.find("\0")
    if where < 0:
        return os_text_problem(command, "command")
    return f"The command contains a NUL character (at offset {where}): no command line can hold one"


def shell_command(shell_path: str | None) -> list[str]:
    """The shell and its ``-c`` flag: the configured shell, ``/bin/bash``, ``bash``, ``sh``."""
    if shell_path:
        if os.path.exists(shell_path):
            return [shell_path, "-c"]
        raise ToolError(f"Custom shell path not found: {shell_path}")
    if os.path.exists("/bin/bash"):
        return ["/bin/bash", "-c"]
    found = shutil.which("bash")
    return [found, "-c"] if found else ["sh", "-c"]


def format_output(
    snapshot: OutputSnapshot, *, last_line_bytes: int, full_output_path: str | None, empty: str
) -> tuple[str, dict[str, Any] | None]:
    """The result text (tail plus truncation notice) and details of finished output (pure)."""
    truncation = snapshot.truncation
    text = snapshot.content or empty
    if not truncation.truncated:
        return text, None
    details = {"truncation": truncation.to_details(), "fullOutputPath": full_output_path}
    end = truncation.total_lines
    start = end - truncation.output_lines + 1
    if truncation.last_line_partial:
        notice = (
            f"[Showing last {format_size(truncation.output_bytes)} of line {end} "
            f"(line is {format_size(last_line_bytes)}). Full output: {full_output_path}]"
        )
    elif truncation.truncated_by == "lines":
        notice = f"[Showing lines {start}-{end} of {end}. Full output: {full_output_path}]"
    else:
        notice = (
            f"[Showing lines {start}-{end} of {end} ({format_size(DEFAULT_MAX_BYTES)} limit). "
            f"Full output: {full_output_path}]"
        )
    return f"{text}\n\n{notice}", details


STRUCTURED_OUTPUT_MAX_BYTES = 1024 * 1024
"""How much of the whole output ``structuredContent.output`` carries (pi 1.6.0's limit)."""


def structured_output(raw: bytes, limit: int = STRUCTURED_OUTPUT_MAX_BYTES) -> tuple[str, bool]:
    """The whole output for ``structuredContent`` (pure): all of it up to ``limit`` bytes,
    else the first and last halves of ``limit`` around a note of the bytes left out, cut at
    character boundaries; and whether it was cut."""
    if len(raw) <= limit:
        return raw.decode("utf-8", errors="replace"), False
    head_bytes = limit // 2
    tail_bytes = limit - head_bytes
    head = raw[:head_bytes]
    tail = raw[len(raw) - tail_bytes :]
    # an incomplete trailing sequence of the head is held back, as a streaming decoder does
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    head_text = decoder.decode(head, final=False)
    start = 0
    while start < len(tail) and tail[start] & 0xC0 == 0x80:
        start += 1
    tail_text = tail[start:].decode("utf-8", errors="replace")
    omitted = len(raw) - head_bytes - tail_bytes
    return f"{head_text}\n\n[... {omitted} bytes omitted ...]\n\n{tail_text}", True


def with_status(text: str, status: str) -> str:
    """``<text>\\n\\n<status>``, or just the status when there is no text."""
    return f"{text}\n\n{status}" if text else status


class _Throttle:
    """Calls ``flush`` for new output at most once per :data:`UPDATE_INTERVAL_S`."""

    def __init__(self, flush: Callable[[], Awaitable[None]]) -> None:
        self._flush = flush
        self._dirty = False
        self._last = -float("inf")
        self._wake = trio.Event()

    def mark(self) -> None:
        """There is output not reported yet."""
        self._dirty = True
        self._wake.set()

    async def flush_now(self) -> None:
        """Report pending output at once (used when the command ends)."""
        if self._dirty:
            self._dirty = False
            self._last = trio.current_time()
            await self._flush()

    async def run(self) -> None:
        """Report output as it comes, spaced by the interval; runs until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            delay = self._last + UPDATE_INTERVAL_S - trio.current_time()
            if delay > 0:
                await trio.sleep(delay)
            await self.flush_now()


class _Run:
    """One command's process, output and full-output file."""

    def __init__(self, settings: BashSettings, on_update: UpdateFn) -> None:
        self.settings = settings
        self.on_update = on_update
        self.output = OutputAccumulator()
        self.full_path: str | None = None
        self._writer: Any = None
        self.throttle = _Throttle(self._report)

    async def _report(self) -> None:
        snapshot = self.output.snapshot()
        details: dict[str, Any] = {}
        if snapshot.truncation.truncated:
            details["truncation"] = snapshot.truncation.to_details()
        if self.full_path is not None:
            details["fullOutputPath"] = self.full_path
        await self.on_update(
            AgentToolResult(content=(TextContent(text=snapshot.content),), details=details)
        )

    async def _spill(self) -> None:
        chunks = self.output.take_spill()
        if not chunks:
            return
        # Shielded: the chunks are taken, so a cancellation here (the pump's end) would lose
        # them from the full-output file; a file write is short.
        with trio.CancelScope(shield=True):
            if self._writer is None:
                directory = self.settings.temp_dir or tempfile.gettempdir()
                self.full_path = os.path.join(directory, f"pi-bash-{secrets.token_hex(8)}.log")
                self._writer = await trio.open_file(self.full_path, "wb")
            await self._writer.write(b"".join(chunks))

    def _drain(self, stream: trio.abc.ReceiveStream) -> None:
        """Take what lies in the pipe without waiting. Once the shell has exited, everything
        it wrote is there (a write to a pipe returns when the pipe holds it), whether or not
        the reader ran before the grace ended: on a loaded machine it may not have."""
        if not isinstance(stream, trio.lowlevel.FdStream):
            return
        fd = stream.fileno()
        for _ in range(DRAIN_CHUNKS):
            try:
                chunk = os.read(fd, READ_CHUNK)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.output.append(chunk)
        self.throttle.mark()  # finish() spills and reports it

    async def pump(self, process: SpawnedProcess | trio.Process) -> None:
        """Read the merged output until EOF (or shortly after exit, then what the pipe holds),
        reporting as it goes."""
        stream = process.stdout
        assert stream is not None
        eof = trio.Event()

        # Read directly (see pitrio.actors.direct_io): trio's FdStream yields before every
        # read, a task step per chunk and one more for the end (issue 7: the bash turn).
        receive = receiver(stream, READ_CHUNK)

        async def read() -> None:
            while chunk := await receive():
                self.output.append(chunk)
                await self._spill()
                self.throttle.mark()
            eof.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            nursery.start_soon(self.throttle.run)
            await process.wait()
            with trio.move_on_after(EXIT_STDIO_GRACE_S):
                await eof.wait()
            nursery.cancel_scope.cancel()
        if not eof.is_set():
            self._drain(stream)

    async def structured(self, code: int, wall_time: float) -> dict[str, Any]:
        """pi 1.6.0's ``structuredContent`` of a finished command: the whole output (from the
        full-output file when it spilled), its exit code and wall time in tenths of seconds."""
        if self.full_path is None:
            raw = self.output.held_bytes()
        else:
            raw = await trio.Path(self.full_path).read_bytes()
        output, truncated = structured_output(raw)
        structured: dict[str, Any] = {"output": output, "truncated": truncated}
        if truncated and self.full_path is not None:
            structured["full_output_path"] = self.full_path
        structured["exit_code"] = code
        structured["wall_time_seconds"] = round(wall_time * 10) / 10
        return structured

    async def finish(self, empty: str) -> tuple[str, dict[str, Any] | None]:
        """End the output: last update, close the file, the text and details to report."""
        self.output.finish()
        await self._spill()
        await self.throttle.flush_now()
        if self._writer is not None:
            await self._writer.aclose()
        return format_output(
            self.output.snapshot(),
            last_line_bytes=self.output.last_line_bytes,
            full_output_path=self.full_path,
            empty=empty,
        )


def create_bash_tool(
    cwd: str, settings: BashSettings | None = None, processes: ProcessGroups | None = None
) -> AgentTool:
    """The ``bash`` tool running commands in ``cwd``; groups are tracked in ``processes``."""
    settings = settings or BashSettings()
    groups = processes if processes is not None else ProcessGroups()

    async def execute(_call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        command: str = args["command"]
        timeout = args.get("timeout")
        problem = nul_problem(command)
        if problem is not None:  # the spawn would fail with a bare ValueError
            raise ToolError(problem)
        if settings.command_prefix:
            check_os_text(settings.command_prefix, "shellCommandPrefix")
            command = f"{settings.command_prefix}\n{command}"
        argv = [*shell_command(settings.shell_path), command]
        if not os.path.exists(cwd):  # noqa: ASYNC240 (one stat, before spawning anyway)
            raise ToolError(
                f"Working directory does not exist: {cwd}\nCannot execute bash commands."
            )
        await on_update(AgentToolResult(content=()))
        run = _Run(settings, on_update)
        env = dict(settings.env) if settings.env is not None else dict(os.environ)
        if (record := ledger()) is not None:  # a killed daemon's successor finds it by this
            env.setdefault(OWNER_VARIABLE, record.marker)
        started = trio.current_time()  # wall time, for structuredContent
        process = await open_merged(argv, cwd=cwd, env=env)  # its own group: abort ends all
        groups.prune()
        groups.add(process.pid, process)
        try:
            limit = trio.move_on_after(timeout) if timeout is not None and timeout > 0 else None
            with limit if limit is not None else nullcontext():
                await run.pump(process)
        except BaseException:
            # Abort (or a failure of ours): end the group, then say what the output was.
            with trio.CancelScope(shield=True):
                await terminate_group(process.pid, process, grace=settings.kill_grace)
                groups.discard(process.pid)
                text, _ = await run.finish(empty="")
                call = current_call()
                if call is not None:
                    call.set_aborted_result(text_result(with_status(text, "Command aborted"), {}))
            raise
        finally:
            if process.stdout is not None:
                with trio.CancelScope(shield=True):
                    await process.stdout.aclose()
        if limit is not None and limit.cancelled_caught:
            with trio.CancelScope(shield=True):
                await terminate_group(process.pid, process, grace=settings.kill_grace)
            groups.discard(process.pid)
            text, _ = await run.finish(empty="")
            seconds = js_number_to_string(timeout) if timeout is not None else ""
            raise ToolError(with_status(text, f"Command timed out after {seconds} seconds"))
        text, details = await run.finish(empty="(no output)")
        groups.prune()  # forget the group unless a background child keeps it alive
        code = process.returncode
        structured = await run.structured(code or 0, trio.current_time() - started)
        if code is not None and code > 0:  # negative: ended by a signal, which pi counts as success
            # pi 1.6.0 returns this failure as a result (so structuredContent reaches callers)
            return AgentToolResult(
                content=(TextContent(text=with_status(text, f"Command exited with code {code}")),),
                details=details,
                structured_content=structured,
                is_error=True,
            )
        return AgentToolResult(
            content=(TextContent(text=text),), details=details, structured_content=structured
        )

    return AgentTool(
        name="bash",
        label="bash",
        description=DESCRIPTION,
        parameters=PARAMETERS,
        execute=execute,
        aborted_result=_aborted,
        prompt_snippet=PROMPT_SNIPPET,
        constrained_sampling=JSON_SCHEMA_PREFER,
        output_schema=OUTPUT_SCHEMA,
    )


def _aborted(_partial: AgentToolResult | None) -> AgentToolResult:
    """The aborted result when abort came before the command ran at all."""
    return text_result("Command aborted", details={})
