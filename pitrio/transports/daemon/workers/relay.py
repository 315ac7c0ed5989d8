"""Host events of one worker on their way to the other workers' ``/v1/host`` clients.

Each worker sends the acceptor its host's events (``host_event`` notices, in the order its
host emitted them); the acceptor puts each into every other worker's :class:`Relay`, whose task
sends them on in that order, and the worker pushes them to its host clients. A session's events
all come from the one worker owning it, through one control stream each way and one relay, so
they stay in order.

Bounded: a worker that falls :data:`RELAY_CAPACITY` events behind has what is queued for it
dropped and :data:`LOST` put in its place; the worker closes its host clients with 1008 ("host
events dropped"), as a one-process daemon closes a host client that falls behind, and they
reconnect and list again. The acceptor never waits for a slow worker.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

RELAY_CAPACITY = 1024
"""Host events queued for one worker before it is declared behind."""
LOST: dict[str, Any] = {"op": "host_events_lost"}
"""The notice that takes the place of dropped host events."""


class Relay:
    """The host events waiting to be sent to one worker."""

    def __init__(self, capacity: int = RELAY_CAPACITY) -> None:
        if capacity < 2:
            raise ValueError("a relay holds at least the loss notice and one event")
        self._send, self._receive = trio.open_memory_channel[dict[str, Any]](capacity)
        self.dropped = 0
        """Events dropped because the worker was behind."""

    def put(self, message: dict[str, Any]) -> None:
        """Queue ``message``; when full, drop what is queued for :data:`LOST`, then queue it."""
        try:
            self._send.send_nowait(message)
            return
        except trio.WouldBlock:
            pass
        while True:
            try:
                self._receive.receive_nowait()
            except trio.WouldBlock:
                break
            self.dropped += 1
        self._send.send_nowait(LOST)
        self._send.send_nowait(message)

    async def run(self, send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        """Send each queued message with ``send``, in order, until cancelled."""
        async for message in self._receive:
            await send(message)
