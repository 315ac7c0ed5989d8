"""Runs one codemode script in an engine process and answers its host calls, in trio.

The engine is QuickJS (the ``quickjs-ng`` package) in a child process of its own
(:mod:`.child`), spoken to over JSON lines; see DESIGN-NOTES "codemode" for the measurement
behind that choice. The process is what makes every limit enforceable from here: the deadline
and an abort kill it wherever the script is (a thread running the engine cannot be stopped
from outside), the engine's heap limit and an address-space limit bound its memory, and a
crash of the engine is one failed script, not a failed session.

A script's tool calls arrive as ``call`` lines; each runs in a task of this call's nursery
(so calls the script awaits together run together), at most :data:`MAX_CONCURRENT_CALLS` at
once, and is cancelled when the script ends, fails, times out or is aborted. Engine processes
are shared by every session of the trio run: at most ``PITRIO_CODEMODE_MAX_WORKERS`` (default
2, pi 1.6.0's ``PI_CODEMODE_MAX_WORKERS`` is read too) live at once, granted in arrival order.
"""

from __future__ import annotations

import collections
import contextlib
import importlib.util
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from pitrio.errors import ToolError

MEMORY_LIMIT_BYTES = 256 * 1024 * 1024
"""The engine's heap: past it the script gets ``InternalError: out of memory`` (pi's figure)."""
DEFAULT_MAX_WORKERS = 2
WORKER_WAIT_SECONDS = 60.0
"""How long a script waits for a free engine process before failing without running."""
MAX_CONCURRENT_CALLS = 64
"""Host calls of one script running at once; more wait their turn (pitrio's bound: pi has
none, and 10,000 calls awaited together must not be 10,000 tasks at once)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line the engine may send (its output is limited to 16 Mi characters)."""

_CHILD = Path(__file__).with_name("child.py")
_PRELUDE = Path(__file__).with_name("prelude.js")
_prelude_text: str | None = None
_engine_path: str | None = None

HostCall = Callable[[str, Any], Awaitable[Any]]
"""``await call(name, args)``: a tool's or global's value (JSON-able); raise to reject."""


class HostCallError(Exception):
    """A host call that rejects in the script with ``message`` (and extra ``properties``)."""

    def __init__(self, message: str, properties: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.properties = dict(properties or {})


@attrs.frozen
class ScriptError:
    """Why a script failed: ``kind`` is ``script``, ``timeout``, ``aborted``, ``sandbox``, or
    ``busy`` (it never started: no engine process became free in time)."""

    kind: str
    message: str
    name: str | None = None
    stack: str | None = None


@attrs.frozen
class OutputItem:
    """One ``text()`` / ``console`` / ``image()`` item, in the order the script made them."""

    kind: str
    data: str
    mime_type: str | None = None


@attrs.frozen
class ScriptResult:
    """What a script left: its output, and either a value and store writes, or an error."""

    ok: bool
    output: tuple[OutputItem, ...]
    value: Any = None
    has_value: bool = False
    writes: tuple[tuple[str, str | None], ...] = ()
    error: ScriptError | None = None


def max_workers() -> int:
    """The process-wide limit of engine processes, read at each script (hosts may change it)."""
    for name in ("PITRIO_CODEMODE_MAX_WORKERS", "PI_CODEMODE_MAX_WORKERS"):
        raw = os.environ.get(name, "").strip()
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
    return DEFAULT_MAX_WORKERS


class WorkerSlots:
    """Engine-process slots of one trio run, granted in arrival order."""

    def __init__(self) -> None:
        self.active = 0
        self._waiting: collections.deque[trio.Event] = collections.deque()

    def _admit(self) -> None:
        while self._waiting and self.active < max_workers():
            self.active += 1
            self._waiting.popleft().set()

    async def acquire(self) -> None:
        """Wait for a slot (cancellation while waiting leaves the queue cleanly)."""
        granted = trio.Event()
        self._waiting.append(granted)
        self._admit()
        try:
            await granted.wait()
        except BaseException:
            if granted.is_set():
                self.release()
            else:
                self._waiting.remove(granted)
            raise

    def release(self) -> None:
        """Give a slot back and admit the next waiter."""
        self.active -= 1
        self._admit()


_SLOTS: trio.lowlevel.RunVar[WorkerSlots] = trio.lowlevel.RunVar("pitrio_codemode_slots")


def worker_slots() -> WorkerSlots:
    """The slots of the current trio run (one run is one process's daemon or command)."""
    try:
        return _SLOTS.get()
    except LookupError:
        slots = WorkerSlots()
        _SLOTS.set(slots)
        return slots


def _engine_dir() -> str:
    """Where the QuickJS binding lives: the engine process skips ``site`` (its ``.pth`` files
    cost more than the script) and imports the binding from there."""
    global _engine_path
    if _engine_path is None:
        spec = importlib.util.find_spec("_quickjs")
        if spec is None or spec.origin is None:
            raise ToolError("codemode needs the quickjs-ng package (pip install quickjs-ng)")
        _engine_path = os.path.dirname(spec.origin)
    return _engine_path


def _prelude() -> str:
    global _prelude_text
    if _prelude_text is None:
        _prelude_text = _PRELUDE.read_text(encoding="utf-8")
    return _prelude_text


def _script_error(raw: str | None) -> ScriptError:
    try:
        data = json.loads(raw or "")
        message = data["message"]
        if not isinstance(message, str):
            raise TypeError(message)
    except (ValueError, KeyError, TypeError):
        return ScriptError("sandbox", "Sandbox bridge broken: an unreadable error report")
    name = data.get("name") if isinstance(data.get("name"), str) else None
    stack = data.get("stack") if isinstance(data.get("stack"), str) else None
    return ScriptError("script", message, name, stack)


class _Run:
    """The state of one script between its engine process and the host."""

    def __init__(
        self,
        process: trio.Process,
        call_tool: HostCall,
        call_global: HostCall,
        output: list[OutputItem],
    ) -> None:
        self.process = process
        self.call_tool = call_tool
        self.call_global = call_global
        self.output = output
        self.result: ScriptResult | None = None
        self.finished = trio.Event()
        self._write_lock = trio.Lock()
        self._limiter = trio.CapacityLimiter(MAX_CONCURRENT_CALLS)

    def end(self, result: ScriptResult) -> None:
        if self.result is None:
            self.result = result
            self.finished.set()

    def fail(self, kind: str, message: str) -> None:
        error = ScriptError(kind, message)
        self.end(ScriptResult(ok=False, output=tuple(self.output), error=error))

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        line = json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
        # A gone engine is reported by the reader, not by the write that found it gone.
        async with self._write_lock:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.process.stdin.send_all(line)

    async def read(self, nursery: trio.Nursery) -> None:
        assert self.process.stdout is not None
        buffer = bytearray()
        while self.result is None:
            chunk = await self.process.stdout.receive_some(1 << 16)
            if not chunk:
                code = await self.process.wait()
                reason = f"the engine process ended (exit status {code})"
                if code == -signal.SIGKILL or code == -signal.SIGSEGV or code == -signal.SIGABRT:
                    reason += ": out of memory or crashed"
                self.fail("sandbox", reason)
                return
            buffer += chunk
            while self.result is None:
                end = buffer.find(b"\n")
                if end < 0:
                    if len(buffer) > MAX_LINE_BYTES:
                        self.fail("sandbox", "the engine sent a line over the size limit")
                    break
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                self.receive(json.loads(line), nursery)

    def receive(self, message: dict[str, Any], nursery: trio.Nursery) -> None:
        kind = message.get("t")
        if kind == "out":
            self.output.append(OutputItem(message["kind"], message["data"], message.get("mime")))
        elif kind == "call":
            nursery.start_soon(self.answer, message)
        elif kind == "done":
            if message.get("ok"):
                raw = message.get("value")
                writes = tuple(
                    (entry[0], entry[1] if len(entry) > 1 else None)
                    for entry in json.loads(message.get("writes") or "[]")
                )
                self.end(
                    ScriptResult(
                        ok=True,
                        output=tuple(self.output),
                        value=None if raw is None else json.loads(raw),
                        has_value=raw is not None,
                        writes=writes,
                    )
                )
            else:
                error = _script_error(message.get("error"))
                self.end(ScriptResult(ok=False, output=tuple(self.output), error=error))
        elif kind == "crash":
            self.fail("sandbox", str(message.get("message")))

    async def answer(self, message: dict[str, Any]) -> None:
        ident = message["id"]
        raw = message.get("args")
        reply: dict[str, Any]
        async with self._limiter:
            try:
                args = None if raw is None else json.loads(raw)
                call = self.call_tool if message["target"] == "call" else self.call_global
                value = await call(message["name"], args)
                payload = None if value is None else json.dumps(value, ensure_ascii=False)
                reply = {"t": "result", "id": ident, "ok": True, "payload": payload}
            except HostCallError as exc:
                reply = {"t": "result", "id": ident, "ok": False, "payload": str(exc)}
                if exc.properties:
                    reply["properties"] = json.dumps(exc.properties)
            except Exception as exc:
                reply = {"t": "result", "id": ident, "ok": False, "payload": str(exc) or repr(exc)}
        await self.send(reply)


async def run_script(
    code: str,
    *,
    tools: Sequence[Mapping[str, Any]],
    globals_: Sequence[Mapping[str, Any]] = (),
    store: Mapping[str, str] | None = None,
    call_tool: HostCall,
    call_global: HostCall,
    timeout_ms: int | None = None,
    memory_limit: int = MEMORY_LIMIT_BYTES,
    output: list[OutputItem] | None = None,
) -> ScriptResult:
    """Run ``code`` (a script body: top-level ``await`` and ``return`` work) to its end.

    ``tools`` lists ``{name, jsName, description}``; ``globals_`` ``{name, spread}``;
    ``store`` maps keys to JSON text. Script failures, the deadline (``timeout_ms``,
    counting the wait for a free engine process) and engine crashes are a failed result;
    cancellation (abort) kills the engine and propagates. ``output``, when given, receives
    the items as they come (what an aborted script had output).
    """
    clock = trio.current_time()
    deadline = clock + timeout_ms / 1000 if timeout_ms is not None else float("inf")
    slots = worker_slots()
    acquired = False
    with trio.move_on_at(min(deadline, clock + WORKER_WAIT_SECONDS)):
        await slots.acquire()
        acquired = True
    if not acquired:
        if timeout_ms is not None and deadline <= clock + WORKER_WAIT_SECONDS:
            message = (
                f"Script timed out: Execution timed out after {timeout_ms} ms while waiting"
                " for a free codemode worker"
            )
            return ScriptResult(False, (), error=ScriptError("busy", message))
        message = (
            f"No codemode worker became free within {round(WORKER_WAIT_SECONDS)} seconds. All"
            f" {max_workers()} workers, shared by every session in this process, are held by"
            " other scripts. Retry after they finish."
        )
        return ScriptResult(False, (), error=ScriptError("busy", message))
    try:
        job = {
            "code": code,
            "prelude": _prelude(),
            "tools": list(tools),
            "globals": list(globals_),
            "store": dict(store or {}),
            "memoryLimit": memory_limit,
        }
        items = output if output is not None else []
        return await _run_in_process(job, call_tool, call_global, deadline, timeout_ms, items)
    finally:
        slots.release()


async def _run_in_process(
    job: dict[str, Any],
    call_tool: HostCall,
    call_global: HostCall,
    deadline: float,
    timeout_ms: int | None,
    output: list[OutputItem],
) -> ScriptResult:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-I", "-S", str(_CHILD), _engine_dir()],
        stdin=-1,  # subprocess.PIPE
        stdout=-1,
        stderr=-3,  # subprocess.DEVNULL: the engine's own diagnostics are not the user's
    )
    run = _Run(process, call_tool, call_global, output)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.send, job)
            nursery.start_soon(run.read, nursery)
            with trio.move_on_at(deadline) as scope:
                await run.finished.wait()
            if scope.cancelled_caught:
                run.fail("timeout", f"Execution timed out after {timeout_ms} ms")
            nursery.cancel_scope.cancel()  # calls still running are cancelled
    finally:
        # Killed, never asked: the engine may be in a loop that would never read a request.
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
            await process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    await stream.aclose()
    assert run.result is not None
    return run.result
