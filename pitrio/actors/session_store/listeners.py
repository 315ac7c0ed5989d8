"""Who a store tells what: ``entry_appended`` subscribers and the watchers of its notices.

One :class:`Listeners` per store actor, owned by it (its own fields, called from the actor's
tasks only). Subscribers get ``entry_appended`` once an entry is durable, in order: an entry
committed before the store's file exists (a lazy one) is held back and announced with the
file. Watchers get the store's :data:`~.commands.StoreNotice` at once, never waited for.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

import trio

from pitrio.actors.session_store.commands import StoreNotice
from pitrio.messages.entries import SessionEntry
from pitrio.messages.events import EntryAppended

log = logging.getLogger("pitrio.session_store")


class Listeners:
    """The subscribers and notice watchers of one store (see the module doc)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        """How the log names the store (its file)."""
        self._subscribers: list[trio.MemorySendChannel[EntryAppended]] = []
        self._unannounced: list[EntryAppended] = []  # lazy entries: announced with the file
        self._watchers: list[trio.MemorySendChannel[StoreNotice]] = []
        self._deliver: tuple[Callable[[StoreNotice], None], ...] = ()

    def subscribe(self, capacity: int) -> trio.MemoryReceiveChannel[EntryAppended]:
        """A channel of ``entry_appended`` events from now on."""
        send, receive = trio.open_memory_channel[EntryAppended](capacity)
        self._subscribers.append(send)
        return receive

    def watch(self, capacity: int) -> trio.MemoryReceiveChannel[StoreNotice]:
        """A channel of the store's notices from now on."""
        send, receive = trio.open_memory_channel[StoreNotice](capacity)
        self._watchers.append(send)
        return receive

    def deliver_to(self, deliver: Callable[[StoreNotice], None]) -> None:
        """Call ``deliver`` with the store's notices from now on (it must not block or raise)."""
        self._deliver = (*self._deliver, deliver)

    async def committed(self, entries: Iterable[SessionEntry], *, written: bool) -> None:
        """A batch's ``entries`` were committed; ``written``: the store's file (or row) holds
        them (else they wait to be announced with it: ``entry_appended`` means durable)."""
        if not self._subscribers and written:
            self._unannounced = []  # announced to nobody (the usual case: no events made)
            return
        appended = [EntryAppended(entry=entry) for entry in entries]
        if not written:
            self._unannounced.extend(appended)
            return
        appended, self._unannounced = self._unannounced + appended, []
        for event in appended:
            for subscriber in list(self._subscribers):
                try:
                    await subscriber.send(event)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._subscribers.remove(subscriber)

    def notify(self, notice: StoreNotice) -> None:
        """Tell the watchers (never waits: a full channel misses it, the log keeps it; a
        merge is still counted by ``CatchUp``, a read-only store still refuses)."""
        for deliver in self._deliver:
            deliver(notice)
        for watcher in list(self._watchers):
            try:
                watcher.send_nowait(notice)
            except trio.WouldBlock:
                log.warning("%s: a %s notice was not delivered (full)", self.origin, notice.type)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._watchers.remove(watcher)

    async def close(self) -> None:
        """End the subscriptions (the store has stopped writing)."""
        for subscriber in self._subscribers:
            await subscriber.aclose()
