"""Lease renewals off the event loop: one thread and one connection per database (issue 36).

A lease renewed by a task of the event loop that runs the sessions is only as punctual as that
loop: a provider stream flooding deltas or a CPU-bound hook that keeps the loop busy for
longer than the lease lasts lets it expire, another daemon takes the session over, and the
run's work is lost at its next append (a production system lost 42 runs that way:
``vm0-ai/vm0`` #27056). So renewals do not run on the loop at all:

* **A thread of its own** (:class:`LeaseKeeper`, one per :class:`~.database.Database`): it
  sleeps on a :class:`threading.Event` until the next lease is due and renews it. The session's
  work can delay it only by the interpreter's lock, which a thread gets back every switch
  interval (5 ms) however busy the loop is, and which psycopg releases while it waits for the
  server.
* **A connection of its own**, outside the pool: appends can hold every pooled connection (and
  every thread of the pool's limiter) while a renewal is due; a renewal must not queue behind
  them. One connection for all of a daemon's leases keeps the server's connection count flat.
* **Loss is told, never waited for**: a renewal the database refuses (the fence moved or another
  owner holds the session) marks the lease lost at once (:attr:`HeldLease.lost`, read by the
  store before each batch and in the batch's own worker thread just before its statement) and
  schedules the store's callback on the loop with ``run_sync_soon``, which never blocks the
  keeper, so a loop that is busy cannot delay the renewals of the other leases either.

A renewal that cannot reach the server is retried at the next interval (the connection made
again); the lease is not counted lost for it: only the database can say it moved, and an
append is refused there once it has (the append statement is conditional on the fence).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import trio

from pitrio.actors.session_store.postgres import sql
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.actors.session_store.postgres.lease import LeaseCounters

log = logging.getLogger("pitrio.session_store.postgres")

RECONNECT_PAUSE = 0.5
"""Seconds between attempts to connect when the server cannot be reached."""


class HeldLease:
    """One lease the keeper renews. ``lost`` and ``renewals`` are written by the keeper's
    thread and read by the store (a plain attribute: one reference, atomic to read)."""

    def __init__(
        self,
        session_id: str,
        fence: int,
        owner: str,
        *,
        duration: float,
        interval: float,
        on_lost: Callable[[str], object],
        token: trio.lowlevel.TrioToken,
        counters: LeaseCounters | None = None,
    ) -> None:
        self.session_id = session_id
        self.fence = fence
        self.owner = owner
        self.duration = duration
        self.interval = interval
        self.renewing = True
        """Renew while true (a test turns it off to play a paused daemon)."""
        self.lost: str | None = None
        """Why the lease was lost (``None``: held)."""
        self.moved: SessionOwnedElsewhereError | None = None
        """Who holds the session now when another daemon took it (set before ``lost``)."""
        self.dropped = False
        """Its store let it go (set before the store releases it: a renewal refused after
        that is the release, not a loss)."""
        self.renewals = 0
        self.due = time.monotonic() + interval
        self._on_lost = on_lost
        self._token = token
        self.counters = counters

    def mark_lost(self, reason: str, moved: SessionOwnedElsewhereError | None = None) -> None:
        """Record the loss (``moved``: to another daemon, naming it) and tell the store on
        its loop (never waits for the loop)."""
        if self.lost is not None or self.dropped:
            return
        self.moved = moved
        self.lost = reason
        with contextlib.suppress(trio.RunFinishedError):  # the loop is gone: nobody to tell
            self._token.run_sync_soon(self._on_lost, reason)


class LeaseKeeper:
    """Renews every :class:`HeldLease` of one database in a thread of its own (see the
    module doc). :meth:`hold` starts the thread on first use; :meth:`stop` ends it."""

    def __init__(self, url: str, *, connect_timeout: int = 5) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self._held: dict[int, HeldLease] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._timeout_ms: int | None = None  # the connection's statement_timeout, once set
        self.renewals = 0
        self.failures = 0

    def hold(
        self,
        session_id: str,
        fence: int,
        owner: str,
        *,
        duration: float,
        interval: float,
        on_lost: Callable[[str], object],
        counters: LeaseCounters | None = None,
    ) -> HeldLease:
        """Renew this lease from now on (call on the loop: it takes the loop's token)."""
        held = HeldLease(
            session_id,
            fence,
            owner,
            duration=duration,
            interval=interval,
            on_lost=on_lost,
            token=trio.lowlevel.current_trio_token(),
            counters=counters,
        )
        with self._lock:
            self._held[id(held)] = held
            if self._thread is None and not self._stopping:
                self._thread = threading.Thread(
                    target=self._run, name="pitrio-lease-keeper", daemon=True
                )
                self._thread.start()
        self._wake.set()
        return held

    def drop(self, held: HeldLease) -> None:
        """Stop renewing ``held`` (its store released it or ended)."""
        held.dropped = True
        with self._lock:
            self._held.pop(id(held), None)

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread and close its connection (blocking: call from a worker thread)."""
        with self._lock:
            self._stopping = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout)

    # -- the thread ------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        return
                    held = list(self._held.values())
                now = time.monotonic()
                for lease in held:
                    if lease.due <= now and lease.lost is None:
                        lease.due = now + lease.interval
                        if lease.renewing:
                            self._renew(lease)
                with self._lock:
                    dues = [lease.due for lease in self._held.values() if lease.lost is None]
                wait = min(dues, default=now + 1.0) - time.monotonic()
                self._wake.wait(max(0.0, wait))
                self._wake.clear()
        finally:
            self._disconnect()

    def _disconnect(self) -> None:
        self._timeout_ms = None
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing more to do
                conn.close()

    def _connection(self) -> psycopg.Connection[Any]:
        conn = self._conn
        if conn is None or conn.closed:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
            self._conn = conn
        return conn

    def _who(
        self, conn: psycopg.Connection[Any], lease: HeldLease
    ) -> tuple[str, SessionOwnedElsewhereError | None]:
        """Why a renewal was refused, naming the holder now (for the session's error), and
        the daemon that holds it when it is another one (its host hands the session over)."""
        lost = f"the lease {lease.fence} was lost"
        try:
            holder = conn.execute(sql.LEASE_HOLDER, {"session_id": lease.session_id}).fetchone()
        except psycopg.Error:
            holder = None
        if holder is None:
            return f"{lost}: the session is no longer stored", None
        owner, url, fence, expires_in = holder
        if owner is None:
            return f"{lost}: the session's lease is {fence} now, held by nobody", None
        where = f" at {url}" if url else ""
        reason = f"{lost}: another daemon holds the session now ({owner}{where}, lease {fence})"
        moved = None
        if owner != lease.owner:
            moved = SessionOwnedElsewhereError(
                lease.session_id,
                owner=owner,
                url=url,
                fence=int(fence),
                expires_in=float(expires_in or 0.0),
            )
        return reason, moved

    def _renew(self, lease: HeldLease) -> None:
        params = {
            "session_id": lease.session_id,
            "owner": lease.owner,
            "duration": lease.duration,
            "fence": lease.fence,
        }
        try:
            conn = self._connection()
            # A renewal stuck behind a lock (another daemon's take-over in progress) must
            # not hold up the others: it gives up after the renewal interval (set once per
            # connection while the leases' intervals agree, as a daemon's do).
            timeout_ms = max(1, int(lease.interval * 1000))
            if timeout_ms != self._timeout_ms:
                conn.execute(f"SET statement_timeout = {timeout_ms}")
                self._timeout_ms = timeout_ms
            row = conn.execute(sql.RENEW, params).fetchone()
        except psycopg.Error as exc:
            self.failures += 1
            log.warning("renewing the lease of %s failed: %s", lease.session_id, exc)
            self._disconnect()
            lease.due = time.monotonic() + min(lease.interval, RECONNECT_PAUSE)
            return
        if row is None:
            lease.mark_lost(*self._who(conn, lease))
            return
        lease.renewals += 1
        self.renewals += 1
        if lease.counters is not None:
            lease.counters.renewals += 1
