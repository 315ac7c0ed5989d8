"""A process's current session, replaceable (pi's ``AgentSessionRuntime``, spec §4.12).

RPC mode talks to one session at a time, but ``new_session``, ``switch_session``, ``fork`` and
``clone`` replace it. :class:`SessionRuntime` owns the current session's actors in a task of its
own (one nursery per session) and forwards that session's events into one output channel that
outlives replacements, so a client sees one continuous stream. A replacement aborts the current
run, flushes the old store, stops the old session's actors, then starts the new one.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors.model_router import ModelRouterHandle
from pitrio.actors.session.bootstrap import SessionOptions, StartedSession, start_session
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session_store import SessionSeed
from pitrio.actors.session_store.maintenance import probe_session_file
from pitrio.errors import PitrioError
from pitrio.messages.entries import MessageEntry
from pitrio.messages.ostext import check_os_text

FLUSH_SECONDS = 10.0
EVENT_BUFFER = 16
"""Events the output channel holds. Few: behind it each session's subscriber buffer merges a
backlog within a byte bound (fanout.py), while events in this channel are never merged; 4,096
``message_update``s of a 1 MB reply held 7.5 GB for a client that stopped reading (issue 21)."""


def single_error(exc: BaseException) -> Exception:
    """The error to report for a failed start: a :class:`PitrioError` inside the nursery's
    exception group if there is one (a user never sees the group), else a plain one."""
    leaves: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(reversed(current.exceptions))
        else:
            leaves.append(current)
    for leaf in leaves:
        if isinstance(leaf, PitrioError):
            return leaf
    first = leaves[0] if leaves else exc
    if isinstance(first, OSError):
        return PitrioError(str(first))
    return PitrioError(f"{type(first).__name__}: {first}")


NOTHING_TO_CLONE = "Cannot clone: the session has no messages yet"


def resolve_session_path(cwd: str | None, path: str) -> str:
    """``path`` made absolute against ``cwd`` (the process's when None) and normalized
    lexically, ``..`` included, as Node's ``path.resolve``; nothing is touched on disk."""
    return os.path.normpath(os.path.join(cwd or os.getcwd(), path))


class SessionReplacementCancelled(PitrioError):
    """An extension's ``session_before_switch`` / ``session_before_fork`` said no."""


@attrs.define
class _Slot:
    started: StartedSession
    scope: trio.CancelScope
    stopped: trio.Event


class SessionRuntime:
    """Holds the current session; its methods run in the caller's task (one caller at a time)."""

    def __init__(
        self, nursery: trio.Nursery, router: ModelRouterHandle, *, runs: bool = False
    ) -> None:
        self._nursery = nursery
        # Whether :attr:`events` may hold a ``SequencedRun`` (a run of streamed deltas as one
        # item, issue 38): for a reader that expands them (the RPC server's forwarder).
        self._runs = runs
        self._router = router
        self._slot: _Slot | None = None
        self._options: SessionOptions | None = None
        self._lock = trio.Lock()
        self._send, self.events = trio.open_memory_channel[Sequenced](EVENT_BUFFER)

    @property
    def current(self) -> StartedSession:
        """The current session's handles."""
        if self._slot is None:
            raise PitrioError("No session is running")
        return self._slot.started

    @property
    def options(self) -> SessionOptions:
        """The options the current session was started with."""
        assert self._options is not None
        return self._options

    async def start(self, options: SessionOptions, *, target: str | None = None) -> StartedSession:
        """Start (or replace the current session with) a session made from ``options``;
        the current one's extensions hear ``session_shutdown`` with ``options.start_reason``."""
        async with self._lock:
            if options.path is not None:
                # Refuse a path that is no session file before the current session stops.
                path = options.path
                await trio.to_thread.run_sync(probe_session_file, path)
            previous = await self._reopen_options()
            await self._stop_current(options.start_reason, target)
            try:
                slot: _Slot = await self._nursery.start(self._run_session, options)
            except Exception as exc:
                error = single_error(exc)
                if previous is not None:
                    # The new one failed after the current one stopped: bring it back.
                    with trio.CancelScope(shield=True):
                        try:
                            self._slot = await self._nursery.start(self._run_session, previous)
                            self._options = previous
                        except Exception:  # the first failure is the news
                            pass
                raise error from None
            self._slot = slot
            self._options = options
            return slot.started

    async def _reopen_options(self) -> SessionOptions | None:
        """How to start the current session again (its file if written, else like it)."""
        if self._slot is None or self._options is None:
            return None
        base = attrs.evolve(
            self._options, session=None, continue_recent=False, fork=None, seed=None
        )
        path = self._slot.started.store.path
        if path is not None and await trio.to_thread.run_sync(path.exists):
            return attrs.evolve(base, path=path, model=None, start_reason="resume")
        return attrs.evolve(base, path=None)

    async def new_session(self, parent_session: str | None = None) -> StartedSession:
        """A fresh session in the same directory, on the start-up model (pi's ``new_session``)."""
        base = self.options
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import SessionBeforeSwitchEvent

        await self.gate("session_before_switch", SessionBeforeSwitchEvent(reason="new"))
        return await self.start(
            attrs.evolve(
                base,
                session=None,
                continue_recent=False,
                fork=None,
                path=None,
                seed=None,
                parent_session=parent_session,
                persist=base.persist or base.path is not None,
                start_reason="new",
            )
        )

    async def gate(self, event: str, payload: object) -> None:
        """Ask the current session's extensions; raise if one cancels."""
        if self._slot is None:
            return
        if await self._slot.started.session.extension_lifecycle(event, payload):
            raise SessionReplacementCancelled(f"{event} was cancelled by an extension")

    async def switch_session(self, path: str) -> StartedSession:
        """Open another session file (a missing one becomes a new session at that path).

        A relative ``path`` is resolved against the session's working directory and
        normalized lexically, as pi does, so ``sessionFile`` reads absolute; the extensions'
        gate sees it as given (pi's ``session_before_switch`` does too)."""
        base = self.options
        check_os_text(path, "sessionPath")
        resolved = resolve_session_path(base.cwd, path)
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import SessionBeforeSwitchEvent

        await self.gate(
            "session_before_switch",
            SessionBeforeSwitchEvent(reason="resume", target_session_file=path),
        )
        return await self.start(
            attrs.evolve(
                base,
                model=None,
                session=None,
                continue_recent=False,
                fork=None,
                seed=None,
                path=Path(resolved),
                parent_session=None,
                start_reason="resume",
            ),
            target=resolved,
        )

    async def fork(self, entry_id: str) -> str | None:
        """A new session holding the path before a user message; returns that message's text."""
        with _attrs_cache.caching():  # the events' classes: first use, from the cache
            from pitrio.actors.session.extensions.events import SessionBeforeForkEvent

        await self.gate(
            "session_before_fork", SessionBeforeForkEvent(entry_id=entry_id, position="before")
        )
        result = await self.current.store.fork(entry_id, position="before")
        await self._start_seeded(result.seed)
        return result.selected_text

    async def clone(self) -> None:
        """A new session holding the whole current branch (pi's ``clone``); refused while
        the branch holds no message (pi fails then: it has no file to branch from)."""
        store = self.current.store
        if not any(isinstance(entry, MessageEntry) for entry in await store.branch_entries()):
            raise PitrioError(NOTHING_TO_CLONE)
        leaf = await store.leaf_id()
        if leaf is not None:
            with _attrs_cache.caching():  # the events' classes: first use, from the cache
                from pitrio.actors.session.extensions.events import SessionBeforeForkEvent

            await self.gate(
                "session_before_fork", SessionBeforeForkEvent(entry_id=leaf, position="at")
            )
        result = await self.current.store.clone()
        await self._start_seeded(result.seed)

    async def _start_seeded(self, seed: SessionSeed) -> None:
        base = self.options
        await self.start(
            attrs.evolve(
                base,
                model=None,
                session=None,
                continue_recent=False,
                fork=None,
                path=None,
                seed=seed,
                parent_session=None,
                start_reason="fork",
            )
        )

    async def aclose(self) -> None:
        """Abort a run, flush and stop the current session; close the event stream."""
        async with self._lock:
            await self._stop_current("quit", None)
        await self._send.aclose()

    async def _stop_current(self, reason: str, target: str | None) -> None:
        slot, self._slot = self._slot, None
        if slot is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(FLUSH_SECONDS):
            # pi 1.6.0 settles the run first (teardownCurrent): the aborted reply's events go
            # out and the aborted turn is written to the outgoing session, then extensions
            # hear session_shutdown. (0.73.1 stopped listening first and dropped the reply.)
            await slot.started.session.abort()
            shutdown = None  # without extensions nobody reads it: its class is not imported
            if slot.started.has_extensions:
                with _attrs_cache.caching():  # the events' classes: first use, from the cache
                    from pitrio.actors.session.extensions.events import SessionShutdownEvent

                shutdown = SessionShutdownEvent(reason=reason, target_session_file=target)
            # Asked either way: the round trip also drains the session's inbox up to here.
            await slot.started.session.extension_lifecycle("session_shutdown", shutdown)
            await slot.started.store.flush()
        slot.scope.cancel()
        await slot.stopped.wait()

    async def _run_session(
        self,
        options: SessionOptions,
        *,
        task_status: trio.TaskStatus[_Slot] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        stopped = trio.Event()
        try:
            with trio.CancelScope() as scope:
                async with trio.open_nursery() as nursery:
                    started = await start_session(nursery, self._router, options)
                    # Straight into the output channel (a clone: closing it at the session's
                    # end leaves the others open), no relay task per event.
                    await started.session.subscribe_into(self._send.clone(), runs=self._runs)
                    task_status.started(_Slot(started=started, scope=scope, stopped=stopped))
                    await trio.sleep_forever()
        finally:
            stopped.set()
