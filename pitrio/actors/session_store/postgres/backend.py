"""The PostgreSQL store as a daemon uses it: sessions by id, listing, watching, metrics.

One :class:`PgBackend` per daemon owns the :class:`~.database.Database` (pool and thread
limiter), the daemon's lease identity (:class:`~.lease.Owner`), the LISTEN thread
(:mod:`.listener`) and the *watches*: a watch follows the entries of a session that another
daemon writes, by sequence number. A notification of an append wakes the watches of that
session at once; every ``catch_up_interval`` each watch also reads what it may have missed
(a notification dropped, or sent while the listening connection was down), so a lost hint
only delays an entry, never loses it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from pitrio.actors.session_store.actor import SessionSeed, SessionStoreHandle, StoreOptions
from pitrio.actors.session_store.catalog import SessionInfo
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.postgres import sql
from pitrio.actors.session_store.postgres.database import Connection, Database, DatabaseOptions
from pitrio.actors.session_store.postgres.errors import PgSessionNotFoundError
from pitrio.actors.session_store.postgres.lease import LeaseCounters, LeaseTerms, Owner
from pitrio.actors.session_store.postgres.listener import Appended, Listener, Reconnected
from pitrio.actors.session_store.postgres.rows import (
    HeaderRow,
    WatchedEntry,
    append_params,
    info_of,
    session_bytes,
)
from pitrio.actors.session_store.postgres.store import open_pg_store
from pitrio.errors import SessionError

log = logging.getLogger("pitrio.session_store.postgres")

StoreOpener = Callable[[trio.Nursery, StoreOptions | None], Awaitable[SessionStoreHandle]]
"""Starts a session's store in a nursery, with the session's write options."""

CATCH_UP_BATCH = 500


def is_postgres_url(value: str | None) -> bool:
    """Whether a ``--store`` / ``session.store`` value names a PostgreSQL database."""
    return bool(value) and str(value).startswith(("postgresql://", "postgres://"))


@attrs.define(eq=False)
class _Watch:
    session_id: str
    seq: int
    send: trio.MemorySendChannel[WatchedEntry]
    wake: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)


@attrs.frozen(kw_only=True)
class BackendOptions:
    """How a daemon uses the database."""

    terms: LeaseTerms = attrs.field(factory=LeaseTerms)
    database: DatabaseOptions = attrs.field(factory=DatabaseOptions)
    catch_up_interval: float = 2.0
    notice_capacity: int = 1024


class PgBackend:
    """The PostgreSQL store of one daemon (see the module doc). Use :func:`open_pg_backend`."""

    def __init__(self, url: str, owner: Owner, options: BackendOptions | None = None) -> None:
        self.url = url
        self.owner = owner
        self.options = options or BackendOptions()
        self.database = Database(url, self.options.database)
        self.leases = LeaseCounters()
        self.listener = Listener(url, self.options.notice_capacity)
        self._watches: dict[str, set[_Watch]] = {}
        self._nursery: trio.Nursery | None = None
        self.notified = 0

    # -- sessions ------------------------------------------------------------------------------

    def set_url(self, url: str) -> None:
        """Where this daemon's clients connect (told to clients of other daemons)."""
        self.owner = attrs.evolve(self.owner, url=url)

    def opener(self, session_id: str, seed: SessionSeed | None = None) -> StoreOpener:
        """What starts the store of ``session_id`` (from ``seed`` if it is not stored yet)."""

        async def open_store(
            nursery: trio.Nursery, options: StoreOptions | None
        ) -> SessionStoreHandle:
            return await open_pg_store(
                nursery,
                self.database,
                session_id,
                owner=self.owner,
                terms=self.options.terms,
                seed=seed,
                options=options,
                counters=self.leases,
            )

        return open_store

    async def find(self, session_id: str) -> str | None:
        """The cwd of a stored session, ``None`` if there is none."""
        row = await self.database.run(
            lambda conn: conn.execute(sql.FIND, {"session_id": session_id}).fetchone()
        )
        return None if row is None else str(row[0])

    async def list_infos(self) -> list[SessionInfo]:
        """Every stored session, most recently modified first (``allMessagesText`` is empty:
        it would mean reading every message)."""
        rows = await self.database.run(lambda conn: conn.execute(sql.LIST).fetchall())
        return [info_of(row) for row in rows]

    async def delete(self, session_id: str) -> bool:
        """Delete a session and its entries; whether it existed."""
        count = await self.database.run(
            lambda conn: conn.execute(sql.DELETE, {"session_id": session_id}).rowcount
        )
        return bool(count)

    async def last_seq(self, session_id: str) -> int:
        """The sequence number of a session's last entry."""
        row = await self.database.run(
            lambda conn: conn.execute(sql.LOAD_HEADER, {"session_id": session_id}).fetchone()
        )
        if row is None:
            raise PgSessionNotFoundError(f"Session not found: {session_id}")
        return int(row[1])

    async def export_session(self, session_id: str) -> bytes:
        """The session as pi's JSONL file, byte for byte as it was imported or written."""
        return await self.database.run(lambda conn: export_session(conn, session_id))

    async def import_session(self, data: bytes, *, origin: str = "<input>") -> str:
        """Store a pi JSONL session (refused if its id is taken); returns its id."""
        return await self.database.run(lambda conn: import_session(conn, data, origin=origin))

    # -- watching -----------------------------------------------------------------------------

    @asynccontextmanager
    async def watch(
        self, session_id: str, since: int, capacity: int = 256
    ) -> AsyncIterator[trio.MemoryReceiveChannel[WatchedEntry]]:
        """The entries of ``session_id`` after sequence number ``since``, as they are
        committed by whichever daemon writes it (a full channel holds only this watch)."""
        assert self._nursery is not None, "the backend is not running"
        send, receive = trio.open_memory_channel[WatchedEntry](capacity)
        watch = _Watch(session_id, since, send)
        self._watches.setdefault(session_id, set()).add(watch)
        self._nursery.start_soon(self._follow, watch)
        try:
            async with receive:
                yield receive
        finally:
            watch.scope.cancel()
            self._forget(watch)

    def _forget(self, watch: _Watch) -> None:
        watches = self._watches.get(watch.session_id)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self._watches[watch.session_id]

    async def _follow(self, watch: _Watch) -> None:
        interval = self.options.catch_up_interval
        with watch.scope:
            try:
                async with watch.send:
                    while True:
                        try:
                            rows = await self.database.run(
                                lambda conn: conn.execute(
                                    sql.ENTRIES_SINCE,
                                    {
                                        "session_id": watch.session_id,
                                        "since": watch.seq,
                                        "limit": CATCH_UP_BATCH,
                                    },
                                ).fetchall()
                            )
                        except SessionError:
                            rows = []  # unavailable: the next round catches up
                        for seq, payload in rows:
                            await watch.send.send(WatchedEntry(int(seq), payload.encode()))
                            watch.seq = int(seq)
                        if len(rows) == CATCH_UP_BATCH:
                            continue
                        with trio.move_on_after(interval):
                            await watch.wake.wait()
                        watch.wake = trio.Event()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass  # the watcher went away
            finally:
                self._forget(watch)

    async def _dispatch(self) -> None:
        async for notice in self.listener.notices:
            self.notified += 1
            if isinstance(notice, Reconnected):
                for watches in self._watches.values():
                    for watch in watches:
                        watch.wake.set()
            elif isinstance(notice, Appended):
                for watch in self._watches.get(notice.session_id, ()):
                    if notice.seq > watch.seq:
                        watch.wake.set()

    async def wait_availability_change(self) -> bool:
        """Wait until the database goes away or comes back; returns whether it is available."""
        return await self.database.wait_change()

    # -- metrics ------------------------------------------------------------------------------

    def metric_values(self) -> list[tuple[str, str, str, float]]:
        """``(name, kind, help, value)`` of the pool, lease and listener metrics."""
        pool = self.database.pool_stats()
        counters = self.database.counters
        leases = self.leases
        values: list[tuple[str, str, str, float]] = [
            (
                "pitrio_pg_available",
                "gauge",
                "Whether the session database is reachable.",
                1.0 if self.database.available else 0.0,
            ),
            (
                "pitrio_pg_pool_size",
                "gauge",
                "Connections open in the pool.",
                pool.get("pool_size", 0),
            ),
            (
                "pitrio_pg_pool_available",
                "gauge",
                "Idle connections in the pool.",
                pool.get("pool_available", 0),
            ),
            ("pitrio_pg_pool_max", "gauge", "The pool's largest size.", pool.get("pool_max", 0)),
            (
                "pitrio_pg_pool_requests_waiting",
                "gauge",
                "Queries waiting for a connection.",
                pool.get("requests_waiting", 0),
            ),
            (
                "pitrio_pg_threads_busy",
                "gauge",
                "Worker threads running queries.",
                self.database.limiter.borrowed_tokens,
            ),
            ("pitrio_pg_queries_total", "counter", "Queries run.", counters.queries),
            (
                "pitrio_pg_query_seconds_total",
                "counter",
                "Time spent in queries.",
                counters.query_seconds,
            ),
            (
                "pitrio_pg_connection_errors_total",
                "counter",
                "Queries that failed to reach the database.",
                counters.connection_errors,
            ),
            (
                "pitrio_pg_outages_total",
                "counter",
                "Times the database became unreachable.",
                counters.outages,
            ),
            ("pitrio_pg_leases_held", "gauge", "Session leases this daemon holds.", leases.held),
            (
                "pitrio_pg_leases_acquired_total",
                "counter",
                "Session leases taken.",
                leases.acquired,
            ),
            (
                "pitrio_pg_leases_taken_over_total",
                "counter",
                "Leases taken from a daemon that had not released them.",
                leases.taken_over,
            ),
            (
                "pitrio_pg_leases_refused_total",
                "counter",
                "Sessions not opened because another daemon holds them.",
                leases.refused,
            ),
            (
                "pitrio_pg_leases_lost_total",
                "counter",
                "Leases found taken over by another daemon while held.",
                leases.lost,
            ),
            ("pitrio_pg_lease_renewals_total", "counter", "Lease renewals.", leases.renewals),
            (
                "pitrio_pg_notifications_total",
                "counter",
                "Append notifications received.",
                self.notified,
            ),
            (
                "pitrio_pg_notifications_dropped_total",
                "counter",
                "Append notifications dropped (caught up later).",
                self.listener.dropped,
            ),
            (
                "pitrio_pg_watches",
                "gauge",
                "Sessions of other daemons being followed.",
                sum(len(watches) for watches in self._watches.values()),
            ),
        ]
        return values

    # -- life ---------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Open the pool, check the schema, listen; until cancelled (then close it all)."""
        await self.database.open()
        try:
            await self.database.require_schema()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.listener.run)
                nursery.start_soon(self._dispatch)
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            await self.database.close()


@asynccontextmanager
async def open_pg_backend(
    url: str, owner: Owner | None = None, options: BackendOptions | None = None
) -> AsyncIterator[PgBackend]:
    """A running :class:`PgBackend` for the block."""
    backend = PgBackend(url, owner or Owner.this_process(), options)
    async with trio.open_nursery() as nursery:
        await nursery.start(backend.run)
        try:
            yield backend
        finally:
            nursery.cancel_scope.cancel()


# -- export and import (in a worker thread) --------------------------------------------------


def export_session(conn: Connection, session_id: str) -> bytes:
    """The session's JSONL text (see :meth:`PgBackend.export_session`)."""
    with conn.transaction():
        row = conn.execute(sql.LOAD_HEADER, {"session_id": session_id}).fetchone()
        if row is None:
            raise PgSessionNotFoundError(f"Session not found: {session_id}")
        header, last_seq = row
        cursor = conn.execute(sql.LOAD_ENTRIES, {"session_id": session_id, "upto": last_seq})
        return session_bytes(header, (payload for _, payload in cursor))


def import_session(conn: Connection, data: bytes, *, origin: str) -> str:
    """Store a pi JSONL session without taking its lease (see :meth:`PgBackend.import_session`).

    The file is read with the file store's parser: a file with errors is refused, an older
    version is migrated (as opening it for writing would), torn lines are left out.
    """
    parsed = parse_session_bytes(data, origin=origin)
    parsed.raise_for_errors()
    if parsed.header is None:
        raise SessionError(f"{origin}: no session header")
    # The header line as the file store keeps it (a migration rewrites entries, not it).
    row = HeaderRow.of(parsed.header, parsed.header_raw)
    with conn.transaction():
        params: dict[str, Any] = {**row.params(), "owner": None, "owner_url": None, "duration": 0}
        created = conn.execute(sql.INSERT_SESSION, params).fetchone()
        if created is None:
            raise SessionError(f"{origin}: session {parsed.header.id} is already stored")
        if parsed.entries:
            params = append_params(parsed.header.id, int(created[0]), 1, parsed.entries)
            if conn.execute(sql.APPEND, params).fetchone() is None:
                raise SessionError(f"{origin}: storing the entries failed")
    return parsed.header.id
