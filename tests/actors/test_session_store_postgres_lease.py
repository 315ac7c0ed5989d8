"""The PostgreSQL lease under load (issue 36, item 2): a busy event loop cannot starve it, and a
lease lost for any reason turns the store read-only at once.

Short leases (0.6 s, renewed every 0.15 s). The session's own work is played by a CPU-bound
stretch on the store's event loop that never yields (a hook computing, a parser flooded with
deltas): 2.5 s, four times the lease. Meanwhile a rival daemon, in a plain thread with its own
connection, tries every 50 ms to take the session as a daemon does once a lease has expired.
With renewals on the event loop (before this issue) the rival takes it within the first second;
with the lease keeper's thread it never can.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.session_store import SessionSeed, StoreOptions, new_header
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import user_message
from pitrio.messages.events import SessionReadOnly
from tests.actors.pg_cluster import fresh_database
from tests.actors.test_session_store_postgres import CWD, pg_modules, running_backend

SHORT = {"duration": 0.6, "renew_every": 0.15}
BUSY_SECONDS = 2.5


class Rival(threading.Thread):
    """Another daemon trying to take the session over, off the loop under test."""

    def __init__(self, url: str, session_id: str, *, take_over: bool = False) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.session_id = session_id
        self.take_over = take_over
        self.attempts = 0
        self.tried_at: list[float] = []
        """When each attempt was made (seconds after the thread was made)."""
        self.taken_at: float | None = None
        self.fence: int | None = None
        self.stop = threading.Event()
        self.started_at = time.monotonic()

    def run(self) -> None:
        import psycopg

        from pitrio.actors.session_store.postgres import sql

        params = {
            "session_id": self.session_id,
            "owner": "rival",
            "owner_url": None,
            "duration": 30.0,
            "take_over": self.take_over,
        }
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.stop.is_set():
                self.attempts += 1
                self.tried_at.append(time.monotonic() - self.started_at)
                row = conn.execute(sql.ACQUIRE, params).fetchone()
                if row is not None:
                    self.taken_at = time.monotonic() - self.started_at
                    self.fence = int(row[0])
                    return
                self.stop.wait(0.05)


def busy(seconds: float) -> int:
    """CPU-bound work on the calling thread that never yields to the event loop."""
    end = time.monotonic() + seconds
    spins = 0
    while time.monotonic() < end:
        spins += sum(range(200))
    return spins


async def start_owner(daemon: Any, nursery: trio.Nursery) -> tuple[Any, str]:
    header = new_header(CWD)
    seed = SessionSeed(header=header, entries=(), path=None)
    store = await daemon.opener(header.id, seed)(nursery, StoreOptions(lazy_create=False))
    await store.append_message(user_message("before", timestamp=1))
    return store, header.id


async def test_a_loop_kept_busy_for_four_leases_does_not_lose_its_lease() -> None:
    pg_modules()
    url = fresh_database()
    async with running_backend(url, terms=SHORT) as daemon:
        async with trio.open_nursery() as nursery:
            store, session_id = await start_owner(daemon, nursery)
            fence = (await store.status()).fence
            renewals = daemon.leases.renewals
            rival = Rival(url, session_id)
            rival.start()
            busy(BUSY_SECONDS)  # the loop runs nothing else meanwhile
            rival.stop.set()
            await trio.to_thread.run_sync(rival.join)
            assert rival.taken_at is None, f"the rival took the session at {rival.taken_at:.2f} s"
            assert rival.attempts >= 10  # it kept trying, every 50 ms
            # Renewed while the loop was busy: about BUSY_SECONDS / 0.15 times.
            assert daemon.leases.renewals - renewals >= BUSY_SECONDS / 0.15 / 2
            after = await store.append_message(user_message("after", timestamp=2))
            status = await store.status()
            assert status.fence == fence and status.write_error is None
            await store.aclose()
        exported = await daemon.export_session(session_id)
    assert exported.count(b'"type":"message"') == 2 and after.id.encode() in exported


async def test_a_lease_taken_away_turns_the_store_read_only_at_once_and_says_so() -> None:
    pg_modules()
    url = fresh_database()
    async with running_backend(url, terms=SHORT) as daemon:
        async with trio.open_nursery() as nursery:
            store, session_id = await start_owner(daemon, nursery)
            notices = await store.watch_notices()
            rival = Rival(url, session_id, take_over=True)  # a forced take-over: fence + 1
            rival.start()
            await trio.to_thread.run_sync(rival.join)
            assert rival.fence is not None
            with trio.fail_after(5):  # the next renewal finds it, with no append needed
                notice = await notices.receive()
            assert isinstance(notice, SessionReadOnly)
            assert "lease" in notice.error and "read-only" in notice.error
            assert "another daemon holds the session now (rival" in notice.error
            queries = daemon.database.counters.queries
            with pytest.raises(ReadOnlySessionError, match="another daemon holds"):
                await store.append_message(user_message("late", timestamp=3))
            assert daemon.database.counters.queries == queries  # refused before any query
            assert daemon.leases.lost == 1
            status = await store.status()
            assert status.write_error is not None and "lease" in status.write_error
            # Who holds it now, for a host to hand the session over (a store alone stays
            # read-only: nothing else happens to it).
            with trio.fail_after(5):
                moved = await store.lease_moved()
            assert (moved.owner, moved.url, moved.fence) == ("rival", None, rival.fence)
            await store.aclose()
        exported = await daemon.export_session(session_id)
    assert b"late" not in exported


async def test_a_lease_lost_while_the_loop_is_busy_stops_the_next_batch() -> None:
    # The keeper sees the loss while the loop cannot run its callback; the batch queued right
    # after the busy stretch is refused all the same (the flag is read before the batch).
    pg_modules()
    url = fresh_database()
    async with running_backend(url, terms=SHORT) as daemon:
        async with trio.open_nursery() as nursery:
            store, session_id = await start_owner(daemon, nursery)
            rival = Rival(url, session_id, take_over=True)
            rival.start()
            busy(1.0)  # the rival takes over and the keeper's renewal is refused meanwhile
            assert rival.fence is not None
            with pytest.raises(ReadOnlySessionError, match="lease"):
                await store.append_message(user_message("late", timestamp=3))
            await store.aclose()
        exported = await daemon.export_session(session_id)
    assert b"late" not in exported


async def test_a_renewal_refused_after_the_store_let_the_lease_go_is_no_loss() -> None:
    # The store drops its lease from the keeper before releasing it; a renewal already under
    # way then finds the release, which must not read as another daemon taking it.
    pg_modules()
    from pitrio.actors.session_store.postgres.keeper import HeldLease, LeaseKeeper

    told: list[str] = []
    keeper = LeaseKeeper("postgresql://unused")
    held = keeper.hold("s", 1, "me", duration=0.6, interval=0.15, on_lost=told.append)
    keeper.drop(held)
    held.mark_lost("refused")
    keeper.stop()
    await trio.testing.wait_all_tasks_blocked()
    assert held.lost is None and told == []
    kept = HeldLease(
        "s",
        1,
        "me",
        duration=0.6,
        interval=0.15,
        on_lost=told.append,
        token=trio.lowlevel.current_trio_token(),
    )
    kept.mark_lost("refused")  # one still held: lost, and the store is told on its loop
    await trio.testing.wait_all_tasks_blocked()
    assert kept.lost == "refused" and told == ["refused"]
