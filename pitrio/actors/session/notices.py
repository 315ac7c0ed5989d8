"""What the session store tells a session unasked, and what it took in when asked.

Split from :mod:`.actor`. The store hands its notices over in its own task and must never wait
for the session, so a notice is queued here and a task of the session actor (started for the
first one queued, in the actor's context) forwards every one queued by then: an idle session
keeps no task or channel waiting for a notice that seldom comes (issue 38). Owned by the
session actor; only the store's hand-over call comes from another task, and it only appends
and starts the forwarder.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from pitrio.errors import ReadOnlySessionError
from pitrio.messages.events import AgentSessionEvent, SessionReadOnly

if TYPE_CHECKING:
    from pitrio.actors.session_store.actor import SessionStoreHandle
    from pitrio.actors.session_store.commands import StoreNotice


class StoreNotices:
    """The store's unasked notices forwarded to clients, and the count of other writers'
    entries it has taken in (whether a catch-up brought any)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_context", "_emit", "_merges_seen", "_nursery", "_queued",
        "_read_only", "_store",
    )
    # fmt: on

    def __init__(
        self,
        store: SessionStoreHandle,
        *,
        emit: Callable[[AgentSessionEvent], None],
        read_only: Callable[[ReadOnlySessionError], None],
        nursery: Callable[[], trio.Nursery | None],
    ) -> None:
        self._store = store
        self._emit = emit
        self._read_only = read_only
        self._nursery = nursery  # the actor's, ``None`` once it stopped
        self._queued: list[StoreNotice] = []  # handed over by the store, not forwarded yet
        self._merges_seen = 0  # the store's count of other writers' entries taken in
        self._context = contextvars.Context()  # the actor's, once started

    async def start(self) -> None:
        """Ask the store for its notices (called in the actor's task, whose context the
        forwarder then runs in)."""
        self._context = contextvars.copy_context()
        await self._store.deliver_notices(self._take)

    def _take(self, notice: StoreNotice) -> None:
        """Called by the store's task with each notice (never waits)."""
        queued = bool(self._queued)
        self._queued.append(notice)
        nursery = self._nursery()
        if not queued and nursery is not None:  # a stopped actor forwards nothing
            self._context.run(nursery.start_soon, self._forward_notices)

    async def _forward_notices(self) -> None:
        """Another writer's entries were taken in (``entries_merged``), or the store turned
        read-only by itself (its lease was lost: the run stops, prompts are refused,
        ``session_read_only`` says why, at once)."""
        notices, self._queued = self._queued, []
        for notice in notices:
            if isinstance(notice, SessionReadOnly):
                self._read_only(ReadOnlySessionError(notice.error))
            else:
                self._emit(notice)

    async def catch_up(self) -> bool:
        """The store takes in another writer's entries; whether any came since last time."""
        count = await self._store.catch_up()
        moved, self._merges_seen = count != self._merges_seen, count
        return moved
