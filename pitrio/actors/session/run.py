"""What the session is busy with: a run's record, a maintenance step, and lending a scope.

Plain records owned by the session actor (its run driver holds the current :class:`Run`); no
task of their own. :func:`lend` gives the supervisor a nursery for one step inside a scope that
abort cancels.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.supervisor.actor.shell import Lent
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import AssistantMessage

T = TypeVar("T")


@attrs.define
class Run:
    """The state of one accepted run."""

    number: int
    scope: trio.CancelScope
    settled: list[Reply[None]]
    abort_waiters: list[Reply[None]] = attrs.field(factory=list)
    idle_waiters: list[Reply[None]] = attrs.field(factory=list)  # wait_for_idle, set at settle
    failure: ReadOnlySessionError | None = None  # the session file failed during this run
    # Set by the pump from an agent_end after which the run only settles (no retry, nothing
    # queued yet), or only compacts and then settles (a threshold compaction: pi is idle
    # then); a new low-level run clears it. A plain prompt sent then (a client that reacts to
    # agent_end) waits for the settle instead of being refused.
    closing: bool = False
    # The scope of the supervisor's step in progress (a retry back-off, a compaction), lent
    # with a nursery for it: abort cancels it together with the run's scope.
    work: trio.CancelScope | None = None
    # Aborted with ``detach`` (an SDK caller's option; pi 0.73.1's session replacements): the
    # pump neither reports nor records its remaining events.
    detached: bool = False


@attrs.define
class Maintenance:
    """A manual compaction or a navigation in progress (no run then): prompts, compactions
    and navigations are refused meanwhile."""

    # The supervisor's step in progress (the summary), as in :class:`Run`: abort cancels it.
    work: trio.CancelScope | None = None
    # Abort was asked for: a step lent after it (a compaction still waiting for the run it
    # aborts) is cancelled as it starts.
    aborted: bool = False
    # Aborts answered when the maintenance ends (pi: abort returns once the session is idle).
    idle_waiters: list[Reply[None]] = attrs.field(factory=list)

    def abort(self, reply: Reply[None]) -> None:
        """Stop the step in progress (and any later one); ``reply`` is answered at the end."""
        self.aborted = True
        if self.work is not None:
            self.work.cancel()
        self.idle_waiters.append(reply)

    def finish(self) -> None:
        """The maintenance is over: answer the aborts waiting for it."""
        for reply in self.idle_waiters:
            reply.set(None)
        self.idle_waiters.clear()


async def lend(busy: Run | Maintenance, call: Callable[[Lent], Awaitable[T]]) -> T | None:
    """``call`` with a nursery lent to the supervisor, in a scope abort cancels (``busy``'s
    ``work``); ``None`` when abort cancelled it. An error of the call is raised here, not
    as a group out of the nursery."""
    result: T | None = None
    error: Exception | None = None
    with trio.CancelScope() as scope:
        busy.work = scope
        if isinstance(busy, Maintenance) and busy.aborted:
            scope.cancel()
        try:
            async with trio.open_nursery() as nursery:
                try:
                    result = await call(Lent(nursery, scope))
                except Exception as exc:
                    error = exc
        finally:
            busy.work = None
    if error is not None:
        raise error
    return result


def outcome(last: AssistantMessage | None, run: Run | None) -> str:
    """``agent_before_settle``'s outcome for the run as it stands."""
    if run is None or run.scope.cancel_called or (last and last.stop_reason == "aborted"):
        return "aborted"
    return "error" if last is not None and last.stop_reason == "error" else "completed"
