"""The PostgreSQL store against a real server (a private cluster, see ``pg_cluster.py``).

Conformance: the behaviour of the store's handle (appends, lazy creation, events, the tree,
projection, fork and clone, one writer) runs against the file store and the PostgreSQL store
alike. Then what only the database store has: migrations, byte-exact export/import of pi's
fixtures, leases across daemons (take-over after expiry, a paused owner's late append refused
by its fence), fan-out by notification and by catch-up, and a database restart mid-append.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio

from pitrio.actors.session_store import (
    SessionSeed,
    SessionStoreHandle,
    StoreOptions,
    create_store,
    new_header,
    open_store,
    start_seeded_store,
    start_store,
)
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.errors import (
    EntryNotFoundError,
    ReadOnlySessionError,
    SessionError,
    SessionNotFoundError,
    StaleFenceError,
    collapse_groups,
)
from pitrio.messages.agent import user_message
from pitrio.messages.entries import MessageEntry
from pitrio.messages.events import EntryAppended
from tests.actors.pg_cluster import fresh_database, shared_cluster
from tests.actors.test_session_store_actor import CWD, assistant
from tests.shared_dir import SESSIONS as FIXTURES
from tests.stray_cancel import no_stray_cancel


def pg_modules() -> Any:
    """The PostgreSQL store's modules (imported here: psycopg is an optional dependency)."""
    pytest.importorskip("psycopg")
    from pitrio.actors.session_store.postgres import backend, database, errors, lease, store

    return attrs.make_class(
        "Modules", ["backend", "database", "errors", "lease", "store"], frozen=True
    )(backend, database, errors, lease, store)


# -- two stores, one test suite ----------------------------------------------------------------


Start = Callable[[trio.Nursery], Awaitable[SessionStoreHandle]]


class Backend:
    """How the conformance tests make and reopen sessions, per store."""

    name: str

    def new(self, options: StoreOptions | None = None) -> Start:
        raise NotImplementedError

    def reopen(self, store: SessionStoreHandle) -> Start:
        raise NotImplementedError

    def seeded(self, seed: SessionSeed) -> Start:
        raise NotImplementedError

    def rival(self, store: SessionStoreHandle) -> Start:
        """The same session opened for writing by another process (or daemon)."""
        return self.reopen(store)


@attrs.define
class FileBackend(Backend):
    directory: Path
    name: str = "file"

    def new(self, options: StoreOptions | None = None) -> Start:
        return lambda nursery: create_store(
            nursery, CWD, session_dir_override=str(self.directory), options=options
        )

    def reopen(self, store: SessionStoreHandle) -> Start:
        path = store.path
        assert path is not None
        return lambda nursery: open_store(nursery, path)

    def seeded(self, seed: SessionSeed) -> Start:
        return lambda nursery: start_seeded_store(nursery, seed)


@attrs.define
class PgBackendUnderTest(Backend):
    backend: Any
    name: str = "postgres"

    def new(self, options: StoreOptions | None = None) -> Start:
        header = new_header(CWD)
        seed = SessionSeed(header=header, entries=(), path=None)
        opener = self.backend.opener(header.id, seed)
        return lambda nursery: opener(nursery, options)

    def reopen(self, store: SessionStoreHandle) -> Start:
        opener = self.backend.opener(store.header.id)
        return lambda nursery: opener(nursery, None)

    def seeded(self, seed: SessionSeed) -> Start:
        opener = self.backend.opener(seed.header.id, seed)
        return lambda nursery: opener(nursery, None)

    def rival(self, store: SessionStoreHandle) -> Start:
        mods = pg_modules()
        database = self.backend.database
        return lambda nursery: mods.store.open_pg_store(
            nursery, database, store.header.id, owner=mods.lease.Owner.this_process()
        )


@asynccontextmanager
async def running_backend(url: str, **options: Any) -> AsyncIterator[Any]:
    mods = pg_modules()
    terms = mods.lease.LeaseTerms(**options.pop("terms", {}))
    backend_options = mods.backend.BackendOptions(terms=terms, **options)
    async with mods.backend.open_pg_backend(url, options=backend_options) as backend:
        with no_stray_cancel():
            yield backend


@pytest.fixture(params=["file", "postgres"])
async def store_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    if request.param == "file":
        yield FileBackend(tmp_path)
        return
    pg_modules()
    shared_cluster()
    async with running_backend(fresh_database()) as backend:
        yield PgBackendUnderTest(backend)


@asynccontextmanager
async def running(start: Start) -> AsyncIterator[SessionStoreHandle]:
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            store = await start(nursery)
            with no_stray_cancel():
                yield store
            await store.aclose()


async def persisted(store: SessionStoreHandle) -> bool:
    return (await store.status()).persisted


# -- conformance -----------------------------------------------------------------------------


async def test_appends_chain_and_survive_a_reopen(store_backend: Backend) -> None:
    async with running(store_backend.new()) as store:
        model = await store.append_model_change("faux", "faux-1", lazy=True)
        assert not await persisted(store)  # lazy: kept in memory until an acknowledged append
        first = await store.append_message(user_message("hello", timestamp=1))
        assert await persisted(store)  # issue 21: stored before its append returns
        answer = await store.append_message(assistant())
        assert isinstance(answer, MessageEntry) and len(answer.id) == 8
        assert [first.parent_id, answer.parent_id] == [model.id, first.id]
        await store.append_session_info("  named  ")
        context = await store.context()
    async with running(store_backend.reopen(store)) as again:
        assert again.header == store.header
        assert [e.id for e in await again.entries()][:3] == [model.id, first.id, answer.id]
        assert await again.session_name() == "named"
        reopened = await again.context()
        assert reopened.messages.materialize() == context.messages.materialize()
        assert reopened.model == context.model


async def test_a_session_with_only_lazy_entries_is_not_stored(store_backend: Backend) -> None:
    async with running(store_backend.new()) as store:
        await store.append_model_change("faux", "faux-1", lazy=True)
        await store.append_thinking_level_change("off", lazy=True)
    try:
        async with running(store_backend.reopen(store)) as again:
            assert await again.entries() == []  # the file store: a new session at that path
        assert store_backend.name == "file"
    except SessionNotFoundError:
        assert store_backend.name == "postgres"  # the database: no such session


async def test_a_first_prompt_is_stored_once_acknowledged(store_backend: Backend) -> None:
    # Issue 21: without an assistant message (pi's moment for the file), the prompt whose
    # append returned (and was announced) is stored, with the lazy entries before it.
    async with running(store_backend.new()) as store:
        events = await store.subscribe()
        model = await store.append_model_change("faux", "faux-1", lazy=True)
        first = await store.append_message(user_message("only a question", timestamp=1))
        assert [(await events.receive()).entry for _ in range(2)] == [model, first]
    async with running(store_backend.reopen(store)) as again:
        assert [entry.id for entry in await again.entries()] == [model.id, first.id]


async def test_not_lazy_stores_at_the_first_append(store_backend: Backend) -> None:
    async with running(store_backend.new(StoreOptions(lazy_create=False))) as store:
        await store.append_message(user_message("q", timestamp=1))
        assert await persisted(store)


async def test_entry_appended_events_in_order_after_commit(store_backend: Backend) -> None:
    async with running(store_backend.new(StoreOptions(lazy_create=False))) as store:
        events = await store.subscribe(16)
        written = [await store.append_message(user_message(f"m{i}", timestamp=i)) for i in range(3)]
        seen: list[EntryAppended] = []
        with trio.fail_after(5):
            while len(seen) < 3:
                seen.append(await events.receive())
        assert [event.entry.id for event in seen] == [entry.id for entry in written]


async def test_concurrent_appends_are_all_kept_in_order(store_backend: Backend) -> None:
    async with running(store_backend.new(StoreOptions(lazy_create=False))) as store:
        await store.append_message(assistant("first"))
        results: dict[int, str] = {}

        async def one(i: int) -> None:
            results[i] = (await store.append_message(user_message(f"c{i}", timestamp=i))).id

        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(one, i)
        ids = [entry.id for entry in await store.entries()]
    async with running(store_backend.reopen(store)) as again:
        stored = [entry.id for entry in await again.entries()]
    assert stored == ids and sorted(stored[1:]) == sorted(results.values())
    parents = [entry.parent_id for entry in await store_entries(store_backend, store)]
    assert parents[1:] == stored[:-1]  # one chain: every append at the leaf of the one before


async def store_entries(backend: Backend, store: SessionStoreHandle) -> list[Any]:
    async with running(backend.reopen(store)) as again:
        return list(await again.entries())


async def test_branches_labels_and_contexts(store_backend: Backend) -> None:
    async with running(store_backend.new()) as store:
        q1 = await store.append_message(user_message("one", timestamp=1))
        a1 = await store.append_message(assistant("a1"))
        await store.append_message(user_message("two", timestamp=2))
        await store.branch(a1.id)
        other = await store.append_message(user_message("other", timestamp=3))
        summary = await store.branch_with_summary(q1.id, "summary of the rest")
        assert (summary.parent_id, summary.from_id) == (q1.id, other.id)
        await store.append_label_change(a1.id, "kept")
        with pytest.raises(EntryNotFoundError):
            await store.append_label_change("nope", "x")
        at_other = await store.context_at(other.id)
        leaf = await store.leaf_id()
    async with running(store_backend.reopen(store)) as again:
        assert await again.labels() == {a1.id: "kept"}
        assert (await again.context_at(other.id)).messages.materialize() == (
            at_other.messages.materialize()
        )
        assert await again.leaf_id() == leaf  # the last entry appended (a label)
        assert next(child.id for child in await again.children(a1.id)) != other.id


async def test_fork_and_clone_seed_new_sessions(store_backend: Backend) -> None:
    async with running(store_backend.new()) as store:
        await store.append_message(user_message("first", timestamp=1))
        await store.append_message(assistant("a"))
        second = await store.append_message(user_message("second", timestamp=2))
        fork = await store.fork(second.id)
        clone = await store.clone()
    assert fork.selected_text == "second"
    async with running(store_backend.seeded(fork.seed)) as forked:
        assert await persisted(forked)  # it holds an assistant message: written at once
        assert [e.id for e in await forked.entries()] == [e.id for e in fork.seed.entries]
    async with running(store_backend.reopen(forked)) as again:
        assert len(await again.entries()) == 2
    async with running(store_backend.seeded(clone.seed)) as cloned:
        assert len(await cloned.entries()) == 3


async def test_a_stale_fence_is_refused_and_a_second_writer_too(store_backend: Backend) -> None:
    async with running(store_backend.new(StoreOptions(lazy_create=False))) as store:
        await store.append_message(assistant())
        fence = (await store.status()).fence
        assert fence is not None
        with pytest.raises(StaleFenceError):
            await store.append(
                MessageEntry(id="", parent_id=None, timestamp="", message=assistant()),
                fence=fence + 1,
            )
        with pytest.raises(SessionError) as refused:
            async with running(store_backend.rival(store)):
                pass
        assert refused.value.retryable  # the other writer may go away
    async with running(store_backend.rival(store)) as again:  # released at close
        assert (await again.status()).fence is not None


# -- migrations ------------------------------------------------------------------------------


async def test_migrations_are_versioned_and_idempotent() -> None:
    mods = pg_modules()
    url = shared_cluster().new_database()  # empty, not from the template
    database = mods.database.Database(url)
    await database.open()
    try:
        assert await database.schema_version() == 0
        with pytest.raises(mods.errors.SchemaError, match="pitrio db migrate"):
            await database.require_schema()
        applied = await database.migrate()
        assert [m.version for m in applied] == [1]
        assert await database.migrate() == []
        await database.require_schema()
    finally:
        await database.close()


# -- export and import -----------------------------------------------------------------------


REFERENCES = ("id", "parentId", "firstKeptEntryId", "targetId", "fromId")


def without_ids(data: bytes) -> list[Any]:
    lines = [orjson.loads(line) for line in data.splitlines()]
    return [lines[0]] + [
        {k: v for k, v in line.items() if k not in REFERENCES} for line in lines[1:]
    ]


def tree_shape(nodes: list[Any]) -> list[Any]:
    return [(node.entry.id, node.label, tree_shape(node.children)) for node in nodes]


async def migrated_by_the_file_store(fixture: Path, directory: Path) -> bytes:
    """What the file store makes of an older-version file when it opens it for writing."""
    copy = trio.Path(directory / fixture.name)
    await copy.write_bytes(await trio.Path(fixture).read_bytes())
    async with running(lambda nursery: open_store(nursery, Path(copy))):
        pass
    return await copy.read_bytes()


async def test_pi_fixtures_round_trip_byte_for_byte(tmp_path: Path) -> None:
    fixtures = sorted(FIXTURES.glob("*.jsonl"))
    assert len(fixtures) > 10, FIXTURES
    migrated = 0
    async with running_backend(fresh_database()) as backend:
        for fixture in fixtures:
            data = fixture.read_bytes()
            session_id = await backend.import_session(data, origin=str(fixture))
            exported = await backend.export_session(session_id)
            if parse_session_bytes(data, origin=fixture.name).migrated:
                # An older version is migrated on import, exactly as the file store does.
                # Migration gives v1 entries random ids: compare everything but the ids.
                migrated += 1
                expected = await migrated_by_the_file_store(fixture, tmp_path)
                assert without_ids(exported) == without_ids(expected), fixture.name
            else:
                assert exported == data, fixture.name
            # The export is a session file again: the file store reads it without a problem.
            assert not parse_session_bytes(exported, origin=fixture.name).problems
            assert await backend.delete(session_id)  # some fixtures share a session id
        # Opened as a live session, a fixture gives what the file store gives.
        source = FIXTURES / "kitchen_sink.jsonl"
        header_id = await backend.import_session(source.read_bytes(), origin=str(source))
        async with trio.open_nursery() as nursery:
            from_db = await backend.opener(header_id)(nursery, None)
            from_file = await open_store(nursery, source, read_only=True)
            assert tree_shape(await from_db.tree()) == tree_shape(await from_file.tree())
            db_context = (await from_db.context()).messages.materialize()
            assert db_context == (await from_file.context()).messages.materialize()
            await from_db.append_message(user_message("more", timestamp=5))
            nursery.cancel_scope.cancel()
        exported = await backend.export_session(header_id)
        assert exported.startswith(source.read_bytes())
        assert orjson.loads(exported.splitlines()[-1])["message"]["content"][0]["text"] == "more"
        with pytest.raises(SessionError, match="already stored"):
            await backend.import_session(source.read_bytes(), origin=str(source))
    assert migrated >= 1  # the legacy fixtures took the migration path


# -- leases across daemons -------------------------------------------------------------------


async def test_a_paused_owner_is_taken_over_and_its_late_append_refused() -> None:
    mods = pg_modules()
    url = fresh_database()
    short = {"terms": {"duration": 0.6, "renew_every": 0.15}}
    async with running_backend(url, **short) as daemon_a, running_backend(url, **short) as daemon_b:
        header = new_header(CWD)
        seed = SessionSeed(header=header, entries=(), path=None)
        store_a = mods.store.PgSessionStore(
            daemon_a.database,
            header.id,
            owner=daemon_a.owner,
            terms=daemon_a.options.terms,
            seed=seed,
            options=StoreOptions(lazy_create=False),
        )
        late: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            with collapse_groups():
                async with trio.open_nursery() as a_nursery:
                    handle_a = await start_store(a_nursery, store_a)
                    kept = [
                        await handle_a.append_message(user_message(f"a{i}", timestamp=i))
                        for i in range(3)
                    ]
                    # Renewed while it runs: after twice the lease's duration B is refused.
                    await trio.sleep(1.2)
                    with pytest.raises(mods.errors.SessionOwnedElsewhereError) as owned:
                        await daemon_b.opener(header.id)(nursery, None)
                    assert owned.value.owner == daemon_a.owner.id
                    assert owned.value.retryable
                    # A pauses (stops renewing); once its lease has expired, B takes over.
                    store_a.renewing = False
                    with trio.fail_after(5):
                        while True:
                            try:
                                handle_b = await daemon_b.opener(header.id)(nursery, None)
                                break
                            except mods.errors.SessionOwnedElsewhereError:
                                await trio.sleep(0.1)
                    assert [e.id for e in await handle_b.entries()] == [e.id for e in kept]
                    fence_a = (await handle_a.status()).fence
                    assert (await handle_b.status()).fence == fence_a + 1
                    assert daemon_b.leases.taken_over == 1
                    taken = await handle_b.append_message(user_message("b", timestamp=9))
                    # A wakes up and appends: its fence is stale, the database refuses it
                    # and A's store turns read-only (issue 36: a lease lost for any reason;
                    # it used to stop, fail-stop), refusing what follows without a query.
                    try:
                        await handle_a.append_message(user_message("late", timestamp=10))
                    except ReadOnlySessionError as exc:
                        late.append(exc)
                    queries = daemon_a.database.counters.queries
                    with pytest.raises(ReadOnlySessionError):
                        await handle_a.append_message(user_message("later", timestamp=11))
                    assert daemon_a.database.counters.queries == queries
                    assert store_a.counters.lost == 1
                    # Found by the refused append: the daemon that holds it now, named.
                    moved = await handle_a.lease_moved()
                    assert moved.owner == daemon_b.owner.id
                    a_nursery.cancel_scope.cancel()
            nursery.cancel_scope.cancel()
        exported = await daemon_b.export_session(header.id)
    assert late and "refused" in str(late[0]) and "read-only" in str(late[0])
    ids = [orjson.loads(line)["id"] for line in exported.splitlines()[1:]]
    assert ids == [e.id for e in kept] + [taken.id]  # nothing lost, nothing twice


# -- fan-out ---------------------------------------------------------------------------------


async def test_a_watch_gets_appends_by_notification_and_by_catch_up() -> None:
    pg_modules()
    url = fresh_database()
    async with (
        running_backend(url) as writer,
        running_backend(url, catch_up_interval=0.3) as reader,
    ):
        header = new_header(CWD)
        seed = SessionSeed(header=header, entries=(), path=None)
        async with trio.open_nursery() as nursery:
            store = await writer.opener(header.id, seed)(nursery, StoreOptions(lazy_create=False))
            first = await store.append_message(user_message("one", timestamp=1))
            async with reader.watch(header.id, 0) as entries:
                with trio.fail_after(5):
                    got = await entries.receive()  # already stored: caught up at once
                assert (got.seq, orjson.loads(got.raw)["id"]) == (1, first.id)
                second = await store.append_message(user_message("two", timestamp=2))
                with trio.fail_after(1):  # notified: well before the catch-up interval
                    got = await entries.receive()
                assert (got.seq, orjson.loads(got.raw)["id"]) == (2, second.id)
                # An entry committed without a notification still arrives, by catch-up.
                await writer.database.run(
                    lambda conn: conn.execute(
                        "INSERT INTO pitrio_entries (session_id, seq, entry_id, type, payload)"
                        " VALUES (%s, 3, 'silent01', 'custom', %s::json)",
                        (header.id, '{"type":"custom","id":"silent01"}'),
                    )
                )
                with trio.fail_after(3):
                    got = await entries.receive()
                assert got.seq == 3
            nursery.cancel_scope.cancel()


# -- connection loss -------------------------------------------------------------------------


@asynccontextmanager
async def new_pg_store(
    *, lazy_create: bool
) -> AsyncIterator[tuple[Any, SessionStoreHandle, trio.Nursery]]:
    """A new session's store on a fresh database of the shared cluster."""
    pg_modules()
    async with running_backend(fresh_database()) as backend:
        header = new_header(CWD)
        seed = SessionSeed(header=header, entries=(), path=None)
        async with trio.open_nursery() as nursery:
            options = StoreOptions(lazy_create=lazy_create)
            with no_stray_cancel():
                yield backend, await backend.opener(header.id, seed)(nursery, options), nursery
            nursery.cancel_scope.cancel()


async def appended_through_a_restart(
    backend: Any, nursery: trio.Nursery, append: Callable[[], Awaitable[Any]]
) -> Any:
    """Stop the cluster like a crash, ``append()`` while it is down (not acknowledged then),
    start it again; the entry, once acknowledged."""
    cluster = shared_cluster()
    await trio.to_thread.run_sync(cluster.stop, "immediate")
    during: list[Any] = []
    acknowledged = trio.Event()

    async def append_while_down() -> None:
        during.append(await append())
        acknowledged.set()

    nursery.start_soon(append_while_down)
    with trio.fail_after(10):
        assert await backend.database.wait_change() is False
    assert not during  # not acknowledged while the database is away
    await trio.to_thread.run_sync(cluster.start)
    with trio.fail_after(15):
        await acknowledged.wait()
    return during[0]


async def test_appends_wait_through_a_database_restart_and_nothing_is_lost() -> None:
    async with new_pg_store(lazy_create=False) as (backend, store, nursery):
        before = [await store.append_message(user_message(f"b{i}", timestamp=i)) for i in range(3)]
        during = await appended_through_a_restart(
            backend, nursery, lambda: store.append_message(user_message("during", timestamp=7))
        )
        after = await store.append_message(user_message("after", timestamp=8))
        assert backend.database.available
        assert backend.database.counters.outages >= 1
        exported = await backend.export_session(store.header.id)
    ids = [orjson.loads(line)["id"] for line in exported.splitlines()[1:]]
    assert ids == [e.id for e in before] + [during.id, after.id]


async def test_lazy_creation_waits_through_a_database_restart_and_nothing_is_lost() -> None:
    # A session's first entries are stored with its row (lazy creation): a database down at
    # that moment pauses them as it pauses appends; the store used to fail at once, the
    # session's tree crashed, and a run its client had seen settle was gone (chaos run).
    async with new_pg_store(lazy_create=True) as (backend, store, nursery):
        first = await store.append_model_change("faux", "faux-1", lazy=True)
        assert not await persisted(store)  # kept in memory until an acknowledged append
        during = await appended_through_a_restart(  # the row is made with it
            backend, nursery, lambda: store.append_message(user_message("hi", timestamp=2))
        )
        assert await persisted(store)
        exported = await backend.export_session(store.header.id)
    ids = [orjson.loads(line)["id"] for line in exported.splitlines()[1:]]
    assert ids == [first.id, during.id]
