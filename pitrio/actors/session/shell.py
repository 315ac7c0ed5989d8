"""The session's user shell commands (``bash``, ``abort_bash``; spec §3.12).

One command at a time, streamed as ``bash_execution_update`` events. Its result is recorded
at once when no run is active, else held and recorded before the next prompt, as pi does
(never between a tool call and its result, nor in the run's own continuations). Owned by
the session actor, whose tasks alone call it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from pitrio import _attrs_cache
from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.errors import PitrioError
from pitrio.messages.agent import BashExecutionMessage, now_ms
from pitrio.messages.events import AgentSessionEvent, BashExecutionUpdate, EntryRecorded

if TYPE_CHECKING:
    from pitrio.actors.session.user_bash import BashResult
    from pitrio.actors.session_store.actor import SessionStoreHandle

ALREADY_RUNNING = "A bash command is already running"

Intercept = Callable[[str, bool, str], Awaitable[Any]]
"""``(command, exclude_from_context, cwd)`` -> the extensions' ``UserBashResult`` or ``None``
(run it locally); raises to stop the command (the extensions fail closed)."""


class UserShell:
    """Runs the user's shell commands for one session and records their results."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_command_prefix", "_cwd", "_emit", "_held", "_intercept", "_loop",
        "_scope", "_shell_path", "_store",
    )
    # fmt: on

    def __init__(
        self,
        *,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        emit: Callable[[AgentSessionEvent], None],
        cwd: str,
        shell_path: str | None,
        command_prefix: str | None,
        intercept: Intercept | None = None,
    ) -> None:
        self._intercept = intercept
        self._loop = loop
        self._store = store
        self._emit = emit
        self._cwd = cwd
        self._shell_path = shell_path
        self._command_prefix = command_prefix
        self._scope: trio.CancelScope | None = None  # the running command's (abort_bash)
        self._held: list[BashExecutionMessage] = []  # results waiting for the next prompt

    def start(
        self,
        nursery: trio.Nursery,
        command: str,
        exclude: bool | None,
        reply: Reply[BashResult],
        run_active: Callable[[], bool],
        *,
        stream_id: str | None = None,
    ) -> None:
        """Run ``command`` in a task of ``nursery`` (refused while another one runs); its
        output chunks are ``bash_execution_update`` events with ``stream_id``."""
        if self._scope is not None:
            reply.fail(PitrioError(ALREADY_RUNNING))
            return
        self._scope = trio.CancelScope()
        nursery.start_soon(self._command, command, exclude, reply, run_active, stream_id)

    def abort(self) -> None:
        """Cancel the running command, if any (its result then says ``cancelled``)."""
        if self._scope is not None:
            self._scope.cancel()

    async def _command(
        self,
        command: str,
        exclude: bool | None,
        reply: Reply[BashResult],
        run_active: Callable[[], bool],
        stream_id: str | None,
    ) -> None:
        scope = self._scope
        assert scope is not None
        # Here: the runner of user shell commands waits for the first one (cold start, issue 38).
        with _attrs_cache.caching():  # its classes from the attrs method cache
            from pitrio.actors.session.user_bash import run_bash_operations, run_user_bash
        try:

            async def stream(delta: str) -> None:
                await trio.lowlevel.checkpoint()
                self._emit(BashExecutionUpdate(id=stream_id, delta=delta))

            # The extensions' user_bash first (pi 1.6.0): a handler may run the command
            # elsewhere, answer it itself, or (by failing) stop it from running at all.
            verdict = None
            if self._intercept is not None:
                verdict = await self._intercept(command, bool(exclude), self._cwd)
            if verdict is not None and verdict.result is not None:
                result = verdict.result
            elif verdict is not None:
                result = await run_bash_operations(
                    command,
                    self._cwd,
                    verdict.operations,
                    command_prefix=self._command_prefix,
                    on_chunk=stream,
                    scope=scope,
                )
            else:
                result = await run_user_bash(
                    command,
                    self._cwd,
                    shell_path=self._shell_path,
                    command_prefix=self._command_prefix,
                    on_chunk=stream,
                    scope=scope,
                )
            message = BashExecutionMessage(
                command=command,
                output=result.output,
                exit_code=result.exit_code,
                cancelled=result.cancelled,
                truncated=result.truncated,
                full_output_path=result.full_output_path,
                timestamp=now_ms(),
                exclude_from_context=exclude,  # as given, false too (pi)
            )
            if run_active():
                self._held.append(message)  # until the next prompt's preflight
            else:
                await self.flush()  # an earlier command's result first: file order
                await self._record(message)
        except (PitrioError, OSError) as exc:
            reply.fail(exc if isinstance(exc, PitrioError) else PitrioError(str(exc)))
        else:
            reply.set(result)
        finally:
            self._scope = None

    async def _record(self, message: BashExecutionMessage) -> None:
        await self._loop.append_message(message)
        entry = await self._store.append_message(message)
        self._emit(EntryRecorded(entry=entry))

    async def flush(self) -> None:
        """Record the held results (raises ``ReadOnlySessionError`` if the file cannot be
        written; the rest are then dropped, as nothing could record them)."""
        held, self._held = self._held, []
        for message in held:
            await self._record(message)
