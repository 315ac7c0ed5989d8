"""What the host needs of a shared session store (the PostgreSQL one) instead of files.

The host keeps sessions in files unless :attr:`HostConfig.store` holds a
:class:`SessionBackend`; then sessions are found, listed, opened and deleted through it, and
a session another daemon holds is *followed* rather than opened. Defined here as a protocol
so the host never imports the database driver.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

import trio

from pitrio.actors.session_store import SessionInfo, SessionSeed, SessionStoreHandle
from pitrio.actors.session_store.actor import StoreOptions
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.actors.session_store.postgres.rows import WatchedEntry

StoreOpener = Callable[[trio.Nursery, StoreOptions | None], Awaitable[SessionStoreHandle]]

__all__ = ["SessionBackend", "SessionOwnedElsewhereError", "StoreOpener", "WatchedEntry"]


class SessionBackend(Protocol):
    """A session store shared by several daemons (:mod:`pitrio.actors.session_store.postgres`)."""

    def opener(self, session_id: str, seed: SessionSeed | None = None) -> StoreOpener:
        """What starts the store of ``session_id`` (from ``seed`` if it is not stored yet)."""
        ...

    async def find(self, session_id: str) -> str | None:
        """The cwd of a stored session, ``None`` if there is none."""
        ...

    async def list_infos(self) -> list[SessionInfo]:
        """Every stored session, newest first."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Delete a stored session; whether it existed."""
        ...

    async def last_seq(self, session_id: str) -> int:
        """The sequence number of a session's last entry."""
        ...

    def watch(
        self, session_id: str, since: int, capacity: int = 256
    ) -> AbstractAsyncContextManager[trio.MemoryReceiveChannel[WatchedEntry]]:
        """The entries of a session after ``since``, as whichever daemon writes them commits
        them."""
        ...

    async def wait_availability_change(self) -> bool:
        """Wait until the store goes away or comes back; whether it is available."""
        ...

    def metric_values(self) -> list[tuple[str, str, str, float]]:
        """``(name, kind, help, value)`` for ``/metrics``."""
        ...
