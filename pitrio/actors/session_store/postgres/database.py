"""The database from trio: psycopg's synchronous driver in worker threads, one pool.

psycopg's async side runs on asyncio only, so every query runs in a worker thread
(``trio.to_thread.run_sync``) behind a :class:`trio.CapacityLimiter` as large as the pool:
a query never waits for a thread while holding a connection, and trio's own thread budget
is left to the rest of the daemon. Connections come from a ``psycopg_pool.ConnectionPool``
in autocommit mode (a statement is a transaction unless a caller opens one).

Connection loss. A query that fails because the server cannot be reached (refused, reset,
restarted, no connection within ``acquire_timeout``) marks the database *unavailable*; with
``retry`` it is tried again after a growing pause (0.1 s doubling to 2 s) until it succeeds,
so the caller (a session's append) simply waits, and the database is *available* again after
the first success. Watchers of :meth:`Database.wait_change` are told both ways. Without
``retry`` the caller gets :class:`StoreUnavailableError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import attrs
import psycopg
import psycopg_pool
import trio

from pitrio.actors.session_store.postgres import schema, sql
from pitrio.actors.session_store.postgres.errors import SchemaError, StoreUnavailableError
from pitrio.actors.session_store.postgres.keeper import LeaseKeeper

log = logging.getLogger("pitrio.session_store.postgres")

T = TypeVar("T")
Connection = psycopg.Connection[Any]

RETRY_FIRST = 0.1
RETRY_MAX = 2.0


@attrs.frozen(kw_only=True)
class DatabaseOptions:
    """Pool size and timeouts."""

    max_connections: int = 8
    min_connections: int = 1
    acquire_timeout: float = 5.0
    """How long a query waits for a connection before the database counts as unavailable."""
    connect_timeout: int = 5


def is_connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means "the server could not be reached", not "the query was wrong"."""
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg.OperationalError):
        # An OperationalError may also be a query cancelled by the server; those carry a
        # SQLSTATE of class 57 (operator intervention: shutdown, admin shutdown) or none.
        state = getattr(exc, "sqlstate", None)
        return state is None or state.startswith(("57", "08"))
    return isinstance(exc, psycopg.InterfaceError)


@attrs.define
class DatabaseCounters:
    """What ``/metrics`` shows about the database."""

    queries: int = 0
    query_seconds: float = 0.0
    connection_errors: int = 0
    outages: int = 0
    retries: int = 0


class Database:
    """A connection pool and the thread limiter in front of it (see the module doc)."""

    def __init__(self, url: str, options: DatabaseOptions | None = None) -> None:
        self.url = url
        self.options = options or DatabaseOptions()
        self.limiter = trio.CapacityLimiter(self.options.max_connections)
        self.available = True
        self.outage: str | None = None
        self.counters = DatabaseCounters()
        self._changed = trio.Event()
        self._pool: psycopg_pool.ConnectionPool[Connection] | None = None
        self.keeper = LeaseKeeper(url, connect_timeout=self.options.connect_timeout)
        """Renews the leases of this database's sessions off the event loop (:mod:`.keeper`)."""

    # -- life --------------------------------------------------------------------------------

    async def open(self) -> None:
        """Create the pool (connections are made in the background; a server that is down
        now is not an error yet: the first query waits or fails)."""
        pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            self.url,
            min_size=self.options.min_connections,
            max_size=self.options.max_connections,
            kwargs={"autocommit": True, "connect_timeout": self.options.connect_timeout},
            timeout=self.options.acquire_timeout,
            open=False,
            name="pitrio",
        )
        await trio.to_thread.run_sync(lambda: pool.open(wait=False))
        self._pool = pool

    async def close(self) -> None:
        """Close every connection (shielded: it runs when the daemon is going down)."""
        pool, self._pool = self._pool, None
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(self.keeper.stop)
            if pool is not None:
                await trio.to_thread.run_sync(lambda: pool.close(timeout=2.0))

    @property
    def closed(self) -> bool:
        """Whether the pool is closed (or was never opened)."""
        return self._pool is None

    @property
    def pool(self) -> psycopg_pool.ConnectionPool[Connection]:
        """The pool (open)."""
        assert self._pool is not None, "the database is not open"
        return self._pool

    # -- queries -----------------------------------------------------------------------------

    def call(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` with a pooled connection in *this* thread (for worker threads)."""
        with self.pool.connection(timeout=self.options.acquire_timeout) as conn:
            return work(conn)

    async def run(self, work: Callable[[Connection], T], *, retry: bool = False) -> T:
        """Run ``work(connection)`` in a worker thread; see the module doc for ``retry``.

        ``work`` may be run again after a connection error with ``retry``: it must find out
        itself whether an earlier attempt committed (appends do, by sequence number).
        """
        delay = RETRY_FIRST
        while True:
            started = time.perf_counter()
            try:
                result = await trio.to_thread.run_sync(self.call, work, limiter=self.limiter)
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                self.counters.connection_errors += 1
                self._set_available(False, f"{type(exc).__name__}: {exc}".strip())
                if not retry:
                    raise StoreUnavailableError(
                        f"The session database is unavailable: {self.outage}"
                    ) from exc
                self.counters.retries += 1
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            finally:
                self.counters.queries += 1
                self.counters.query_seconds += time.perf_counter() - started
            self._set_available(True, None)
            return result

    # -- availability ------------------------------------------------------------------------

    def _set_available(self, available: bool, reason: str | None) -> None:
        if available == self.available:
            return
        self.available = available
        self.outage = reason
        if available:
            log.warning("the session database is back")
        else:
            self.counters.outages += 1
            log.error("the session database is unavailable: %s", reason)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_change(self) -> bool:
        """Wait until the database becomes available or unavailable; returns which."""
        await self._changed.wait()
        return self.available

    def pool_stats(self) -> dict[str, int]:
        """psycopg_pool's statistics (sizes, waiting requests, errors), or nothing if closed."""
        return {} if self._pool is None else self._pool.get_stats()

    # -- schema ------------------------------------------------------------------------------

    async def schema_version(self) -> int:
        """The database's schema version (0: never migrated)."""
        return await self.run(schema_version)

    async def require_schema(self) -> None:
        """Raise :class:`SchemaError` unless the schema is the one this pitrio needs."""
        version = await self.schema_version()
        if version < schema.SCHEMA_VERSION:
            raise SchemaError(
                f"The session database's schema is at version {version}, pitrio needs "
                f"{schema.SCHEMA_VERSION}: run `pitrio db migrate --store URL` first"
            )
        if version > schema.SCHEMA_VERSION:
            raise SchemaError(
                f"The session database's schema is at version {version}, newer than this "
                f"pitrio knows ({schema.SCHEMA_VERSION}): upgrade pitrio"
            )

    async def migrate(self) -> list[schema.Migration]:
        """Apply the migrations the database lacks; returns those applied."""
        return await self.run(migrate)


def schema_version(conn: Connection) -> int:
    """The schema version of the database behind ``conn``."""
    row = conn.execute(sql.SCHEMA_TABLE_EXISTS, {"name": schema.SCHEMA_TABLE}).fetchone()
    if row is None or not row[0]:
        return 0
    version = conn.execute(sql.SCHEMA_VERSION_QUERY).fetchone()
    return int(version[0]) if version is not None else 0


def migrate(conn: Connection) -> list[schema.Migration]:
    """Apply the missing migrations in one transaction under an advisory lock."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (schema.ADVISORY_LOCK,))
        conn.execute(schema.CREATE_SCHEMA_TABLE.encode())
        applied = {row[0] for row in conn.execute(f"SELECT version FROM {schema.SCHEMA_TABLE}")}
        todo = schema.pending(applied)
        for migration in todo:
            for statement in migration.statements:
                conn.execute(statement.encode())
            conn.execute(
                f"INSERT INTO {schema.SCHEMA_TABLE} (version, name) VALUES (%s, %s)",
                (migration.version, migration.name),
            )
    return todo
