"""One client's attachment to a hosted session: the feed it is sent from and its wake-up.

Made by :meth:`HostedSession.attach <pitrio.actors.host.hosted.HostedSession.attach>`; the
transport's sender task waits on it and sends what its feed holds, and the session's relay
may write an event to the client at once through :attr:`AttachedClient.direct`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import trio

from pitrio.actors.host.feed import ClientFeed, FramedEvent, Outgoing


class AttachedTo(Protocol):
    """What an attachment needs of its session (:class:`~pitrio.actors.host.hosted.HostedSession`;
    a protocol, as the session module imports this one)."""

    @property
    def seq(self) -> int:
        """The last ``seq`` the session emitted."""

    def drop_client(self, client: AttachedClient) -> None:
        """Forget ``client``."""


class AttachedClient:
    """One client's attachment to a hosted session: its feed and the sender's wake-up."""

    def __init__(self, session: AttachedTo, feed: ClientFeed) -> None:
        self.session = session
        self.feed = feed
        self._wake = trio.Event()
        self.detached = False
        self.direct: Callable[[FramedEvent], bool] | None = None
        """The transport's direct send, while its sender runs: writes a relayed event to the
        client at once and says whether it did. Offered an event only when the feed is idle
        (nothing queued ahead of it), so a client that keeps up is sent each event by the
        relay, without its sender task waking per event; one that is behind is fed through
        its feed (and coalesced) as before."""

    def wake(self) -> None:
        """Something may be ready to send."""
        self._wake.set()

    async def wait(self) -> None:
        """Sleep until :meth:`wake` (returns at once if woken since the last wait)."""
        await self._wake.wait()
        self._wake = trio.Event()

    def push(self, payload: dict[str, Any], *, after_seq: int | None = None) -> None:
        """Queue a response or notice after the events emitted so far (or ``after_seq``)."""
        after = self.session.seq if after_seq is None else after_seq
        self.feed.push(Outgoing(payload=payload, after_seq=after))
        self.wake()

    def detach(self) -> None:
        """Stop receiving events (idempotent)."""
        if not self.detached:
            self.detached = True
            self.session.drop_client(self)


__all__ = ["AttachedClient"]
