"""The PostgreSQL session store: the file store's actor and handle, with rows for lines.

:class:`PgSessionStore` is a :class:`~pitrio.actors.session_store.actor.SessionStore`: the
same commands, the same tree, projection and group-committing writer task, the same
:class:`~pitrio.actors.session_store.actor.SessionStoreHandle`, so the session actor and the
host use it unchanged. What differs is where a batch goes and how one writer is ensured:

* **Opening** takes the session's lease (the fence grows by one), then reads the header and
  every entry and builds the tree with the file store's own parser (the rows hold pi's exact
  JSON lines). A lease held by a live daemon is refused with
  :class:`SessionOwnedElsewhereError`, naming it.
* **A batch** is one statement (:data:`~.sql.APPEND`): conditional on the fence and on the
  sequence number continuing, it inserts the entries, updates the listing fields and notifies
  other daemons, all committed together. An append returns once committed (PostgreSQL's
  durability). A refused batch (the fence moved) fails its appends with
  :class:`StaleFenceError` and stops the actor (fail-stop, as the file store).
* **Connection loss** does not fail a batch: it is retried until the database is back (the
  run that appends simply waits, see :mod:`.database`). If the connection broke during the
  commit, the retry first reads the session's sequence number to learn whether it committed.
* **New sessions** are written lazily as files are: the row and every entry so far appear with
  the first append that is not ``lazy`` (one transaction, before that append returns), and
  the lease is taken then.
* **The lease** is renewed every :attr:`LeaseTerms.renew_interval` by the database's
  :class:`~.keeper.LeaseKeeper`, a thread with a connection of its own, so no work of the
  session's on the event loop can delay it (issue 36). A lease lost for any reason (the
  keeper's renewal refused, an append refused because the fence moved) turns the store
  read-only at once: every later batch is refused before it reaches the database (the keeper's
  flag is read in the batch's worker thread just before its statement, so a loss seen there
  stops it even while the loop is busy), and the session is told (``session_read_only``).
  Closing releases it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio

from pitrio.actors._actor import Reply
from pitrio.actors.session_store.actor import SessionStore
from pitrio.actors.session_store.commands import (
    SessionSeed,
    StoreOptions,
    StoreStatus,
    _Pending,
    _Source,
)
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.handle import SessionStoreHandle
from pitrio.actors.session_store.postgres import sql
from pitrio.actors.session_store.postgres.database import Connection, Database
from pitrio.actors.session_store.postgres.errors import (
    LeaseMovedError,
    PgSessionNotFoundError,
    SessionOwnedElsewhereError,
)
from pitrio.actors.session_store.postgres.keeper import HeldLease
from pitrio.actors.session_store.postgres.lease import LeaseCounters, LeaseTerms, Owner
from pitrio.actors.session_store.postgres.rows import HeaderRow, append_params, session_bytes
from pitrio.actors.session_store.projection import Projection
from pitrio.actors.session_store.start import start_store
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.syncing import SyncClock
from pitrio.actors.session_store.tree import IdFactory, SessionTree, random_entry_id
from pitrio.errors import ReadOnlySessionError, SessionError, StaleFenceError
from pitrio.messages.codec import encode
from pitrio.messages.events import SessionReadOnly

log = logging.getLogger("pitrio.session_store.postgres")


class PgSessionStore(SessionStore):
    """One session in PostgreSQL (see the module doc). Start it with :func:`open_pg_store`."""

    def __init__(
        self,
        database: Database,
        session_id: str,
        *,
        owner: Owner,
        terms: LeaseTerms | None = None,
        seed: SessionSeed | None = None,
        read_only: bool = False,
        take_over: bool = False,
        options: StoreOptions | None = None,
        new_id: IdFactory = random_entry_id,
        counters: LeaseCounters | None = None,
    ) -> None:
        source = _Source(
            "seed",
            None,
            read_only=read_only,
            cwd=seed.header.cwd if seed is not None else None,
            header=seed.header if seed is not None else None,
            entries=seed.entries if seed is not None else (),
        )
        super().__init__(source, options=options, new_id=new_id)
        self.database = database
        self.session_id = session_id
        self.owner = owner
        self.terms = terms or LeaseTerms()
        self._seed = seed
        self._take_over = take_over or self.options.take_over
        self._fence: int | None = None
        self._seq = 0  # the sequence number of the last entry committed
        self._persisted = False
        self._commits = 0
        self.counters = counters or LeaseCounters()
        self._held: HeldLease | None = None
        self._renewing = True
        self._moved: SessionOwnedElsewhereError | None = None
        """Who took the lease, once another daemon has."""
        self._moved_waiting: list[Reply[SessionOwnedElsewhereError]] = []

    @property
    def renewing(self) -> bool:
        """Renew the lease while running (tests turn it off to play a paused daemon)."""
        return self._renewing

    @renewing.setter
    def renewing(self, value: bool) -> None:
        self._renewing = value
        if self._held is not None:
            self._held.renewing = value

    @property
    def origin(self) -> str:
        """How problems name this session (where a file store names its file)."""
        return f"postgresql:{self.session_id}"

    @property
    def fence(self) -> int | None:
        """The fence of this store's lease (``None`` while it holds none)."""
        return self._fence

    @property
    def persisted(self) -> bool:
        """Whether the session's row exists (lazy creation, as a file)."""
        return self._persisted

    def _written(self) -> bool:
        return self._persisted

    # -- start ---------------------------------------------------------------------------------

    async def started(self) -> None:
        """Take the lease and load the session (or start from the seed); the writer starts
        when something is queued."""
        loaded = await self._load()
        if not loaded:
            if self._seed is None:
                raise PgSessionNotFoundError(f"Session not found: {self.session_id}")
            self.tree = SessionTree(self.header, self._seed.entries, new_id=self._new_id)
            self._wants_file = self.tree.has_assistant()
            if not self.read_only and (self._wants_file or not self.options.lazy_create):
                await self._create_row()
        self.projection = Projection(self.tree.path())

    async def _load(self) -> bool:
        """Lease (unless read-only) and content of an existing row; ``False`` if there is none."""
        if not self.read_only:
            acquired = await self.database.run(self._acquire)
            if acquired is None:
                return False
            self._lease_taken(*acquired)
        loaded = await self.database.run(self._read)
        if loaded is None:
            return False
        header, payloads, last_seq = loaded
        parsed = parse_session_bytes(session_bytes(header, payloads), origin=self.origin)
        if self.options.strict:
            parsed.raise_for_errors()
        if parsed.header is None:
            raise SessionError(f"{self.origin}: the stored header is not a session header")
        self.problems = tuple(parsed.problems)
        for problem in parsed.problems:
            log.warning("%s", problem.describe(self.origin))
        self.header = parsed.header
        self.cwd = self.cwd or parsed.header.cwd
        self.tree = SessionTree(parsed.header, parsed.entries, new_id=self._new_id)
        self._wants_file = self.tree.has_assistant()
        self._seq = last_seq
        self._persisted = True
        return True

    def _acquire(self, conn: Connection) -> tuple[int, bool] | None:
        params = {
            "session_id": self.session_id,
            "owner": self.owner.id,
            "owner_url": self.owner.url,
            "duration": self.terms.duration,
            "take_over": self._take_over,
        }
        row = conn.execute(sql.ACQUIRE, params).fetchone()
        if row is not None:
            previous = row[1]
            return int(row[0]), previous is not None and previous != self.owner.id
        holder = conn.execute(sql.LEASE_HOLDER, params).fetchone()
        if holder is None:
            return None  # no such session
        owner, url, fence, expires_in = holder
        self.counters.refused += 1
        raise SessionOwnedElsewhereError(
            self.session_id,
            owner=owner or "?",
            url=url,
            fence=int(fence),
            expires_in=float(expires_in or 0.0),
        )

    def _read(self, conn: Connection) -> tuple[str, list[str], int] | None:
        with conn.transaction():
            row = conn.execute(sql.LOAD_HEADER, {"session_id": self.session_id}).fetchone()
            if row is None:
                return None
            header, last_seq = row
            cursor = conn.execute(
                sql.LOAD_ENTRIES, {"session_id": self.session_id, "upto": last_seq}
            )
            payloads = [payload for _, payload in cursor]
        return header, payloads, int(last_seq)

    # -- writing -------------------------------------------------------------------------------

    async def _create_row(self) -> None:
        """Lazy creation's moment: the row, its lease and every entry so far, in one commit."""
        entries = list(self.tree.entries)
        header = HeaderRow.of(self.header, encode(self.header))

        attempts = 0

        def create(conn: Connection) -> int:
            nonlocal attempts
            attempts += 1
            params = {
                **header.params(),
                "owner": self.owner.id,
                "owner_url": self.owner.url,
                "duration": self.terms.duration,
            }
            if attempts > 1:
                # The previous attempt lost its connection: it may have committed (the row is
                # ours, with every entry), as an append's retry checks.
                state = conn.execute(sql.APPEND_STATE, {"session_id": self.session_id}).fetchone()
                if (
                    state is not None
                    and state[2] == self.owner.id
                    and int(state[1]) >= len(entries)
                ):
                    return int(state[0])
            with conn.transaction():
                row = conn.execute(sql.INSERT_SESSION, params).fetchone()
                if row is None:
                    raise SessionError(f"{self.origin}: a session with this id already exists")
                if entries:
                    self._insert(conn, int(row[0]), 1, entries)
                return int(row[0])

        # Retried like an append: a database restart while a session's first entries are
        # being stored must pause them, not crash the tree and lose them (found by the chaos
        # run: first prompts settled for their clients, then gone).
        self._lease_taken(await self.database.run(create, retry=True), False)
        self._seq = len(entries)
        self._persisted = True
        self._commits += 1

    def _insert(
        self, conn: Connection, fence: int, first_seq: int, entries: Sequence[StoredEntry]
    ) -> None:
        params = append_params(self.session_id, fence, first_seq, entries)
        row = conn.execute(sql.APPEND, params).fetchone()
        if row is None:
            state = conn.execute(sql.APPEND_STATE, params).fetchone()
            raise self._refusal(conn, fence, first_seq, state)

    def _refusal(self, conn: Connection, fence: int, first_seq: int, state: Any) -> StaleFenceError:
        if state is None:
            return StaleFenceError(f"{self.origin}: the session was deleted")
        current, last_seq, owner = state
        if int(current) != fence:
            return LeaseMovedError(
                f"{self.origin}: append with lease {fence} refused, the lease is {current} "
                f"(held by {owner or 'nobody'})",
                self._holder(conn),
            )
        return StaleFenceError(
            f"{self.origin}: append at sequence {first_seq} refused, the session is at "
            f"{last_seq}: another writer appended"
        )

    def _holder(self, conn: Connection) -> SessionOwnedElsewhereError | None:
        """The daemon holding the session now, when it is another one (after a refusal)."""
        row = conn.execute(sql.LEASE_HOLDER, {"session_id": self.session_id}).fetchone()
        if row is None or row[0] is None or row[0] == self.owner.id:
            return None
        owner, url, fence, expires_in = row
        return SessionOwnedElsewhereError(
            self.session_id,
            owner=owner,
            url=url,
            fence=int(fence),
            expires_in=float(expires_in or 0.0),
        )

    async def _commit(self, batch: list[_Pending]) -> None:
        entries = [item.stored for item in batch if item.stored is not None]
        if not self._persisted:
            if (
                entries
                and not self.read_only
                and (self._wants_file or not self.options.lazy_create)
            ):
                await self._create_row()
            return
        if not entries:
            return  # a flush: every commit is already durable
        fence, held = self._fence, self._held
        assert fence is not None
        if held is not None and held.lost is not None:  # seen by the keeper, not told yet
            raise self._lease_lost(held.lost, held.moved)
        first_seq = self._seq + 1
        last_seq = self._seq + len(entries)
        attempts = 0

        def append(conn: Connection) -> None:
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                # The previous attempt lost its connection: it may have committed.
                state = conn.execute(sql.APPEND_STATE, {"session_id": self.session_id}).fetchone()
                if state is not None and int(state[0]) == fence and int(state[1]) >= last_seq:
                    return
            # Here too, in the worker thread: a loss the keeper saw while the loop was busy
            # (its callback still waiting for the loop) stops the batch.
            if held is not None and held.lost is not None:
                raise StaleFenceError(f"{self.origin}: {held.lost}")
            self._insert(conn, fence, first_seq, entries)

        try:
            await self.database.run(append, retry=True)
        except StaleFenceError as exc:  # the fence moved (the database or the keeper says)
            moved = exc.moved if isinstance(exc, LeaseMovedError) else None
            raise self._lease_lost(_reason(str(exc), self.origin), moved) from exc
        self._seq = last_seq
        self._commits += 1

    async def _sync(self) -> None:
        self._sync_clock = SyncClock()  # every commit is durable: nothing to sync

    # -- the lease -----------------------------------------------------------------------------

    def _lease_taken(self, fence: int, taken_over: bool) -> None:
        """Held from now on: the keeper renews it (on the loop: it takes the loop's token)."""
        self._fence = fence
        self.counters.held += 1
        self.counters.acquired += 1
        if taken_over:
            self.counters.taken_over += 1  # from a daemon that did not release it (expired)
        self._held = self.database.keeper.hold(
            self.session_id,
            fence,
            self.owner.id,
            duration=self.terms.duration,
            interval=self.terms.renew_interval,
            on_lost=self._lease_lost,
            counters=self.counters,
        )
        self._held.renewing = self._renewing

    def _lease_lost(
        self, reason: str, moved: SessionOwnedElsewhereError | None = None
    ) -> ReadOnlySessionError:
        """The lease is gone (on the loop): read-only at once, and the session is told; when
        another daemon took it (``moved``), whoever waits for that (:class:`WatchLease`: the
        host, which hands the session over) is told too."""
        held = self._held
        if moved is None and held is not None:
            moved = held.moved  # the keeper's thread found who holds it now
        if moved is not None and self._moved is None:
            self._moved = moved
            waiting, self._moved_waiting = self._moved_waiting, []
            for reply in waiting:
                reply.set(moved)
        if self.failure is None:
            self.failure = ReadOnlySessionError(
                f"{self.origin}: {reason}. The session is read-only from now on: nothing "
                "more is written by this daemon; every entry acknowledged before is stored"
            )
            self.counters.lost += 1
            log.error("%s", self.failure)
            self._listeners.notify(SessionReadOnly(error=str(self.failure)))
        if held is not None and held.lost is None:
            held.lost = reason  # found by an append: the keeper stops renewing it
        return self.failure

    def _watch_lease(self, reply: Reply[SessionOwnedElsewhereError]) -> None:
        """Answer ``reply`` once another daemon has taken the lease (at once if it has)."""
        if self._moved is not None:
            reply.set(self._moved)
        else:
            self._moved_waiting.append(reply)

    def _close(self) -> None:
        # In a worker thread, however the store ends: give the lease back so another daemon
        # need not wait for it to expire. A database that is down lets it expire instead.
        fence, self._fence = self._fence, None
        held, self._held = self._held, None
        if held is not None:
            self.database.keeper.drop(held)
        if fence is None:
            return
        self.counters.held -= 1
        if self.database.closed:
            return
        try:
            self.database.call(
                lambda conn: conn.execute(
                    sql.RELEASE, {"session_id": self.session_id, "fence": fence}
                )
            )
        except Exception as exc:
            log.warning("%s: could not release the lease: %s", self.origin, exc)

    # -- state ---------------------------------------------------------------------------------

    def status(self) -> StoreStatus:
        """A snapshot of this store (``writes``: commits; there are no fsyncs of ours)."""
        return StoreStatus(
            path=None,
            read_only=self.read_only,
            persisted=self._persisted,
            fence=self._fence,
            entries=len(self.tree),
            leaf_id=self.tree.leaf_id,
            writes=self._commits,
            syncs=0,
            migrated=False,
            problems=self.problems,
            write_error=None if self.failure is None else str(self.failure),
            location=self.origin,
        )


def _reason(text: str, origin: str) -> str:
    """An error's text without the origin it starts with (the failure names it once)."""
    prefix = f"{origin}: "
    return text[len(prefix) :] if text.startswith(prefix) else text


async def open_pg_store(
    nursery: trio.Nursery,
    database: Database,
    session_id: str,
    *,
    owner: Owner,
    terms: LeaseTerms | None = None,
    seed: SessionSeed | None = None,
    read_only: bool = False,
    take_over: bool = False,
    options: StoreOptions | None = None,
    counters: LeaseCounters | None = None,
) -> SessionStoreHandle:
    """Start the store of session ``session_id``: the stored session (its lease taken unless
    ``read_only``), else a new one from ``seed`` (written with its first acknowledged append),
    else :class:`PgSessionNotFoundError`."""
    store = PgSessionStore(
        database,
        session_id,
        owner=owner,
        terms=terms,
        seed=seed,
        read_only=read_only,
        take_over=take_over,
        options=options,
        counters=counters,
    )
    return await start_store(nursery, store)
