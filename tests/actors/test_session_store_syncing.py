"""When a batch is synced (:mod:`pitrio.actors.session_store.syncing`, pure)."""

from __future__ import annotations

import math

from pitrio.actors.session_store.syncing import SyncClock


def test_always_syncs_every_batch_and_never_leaves_data_dirty() -> None:
    clock = SyncClock()
    assert clock.must_sync("always", False, 0.0)
    assert clock.written(True, "always", 0.0, 1.0) == SyncClock()


def test_batch_sets_its_deadline_at_the_first_unsynced_write_only() -> None:
    clock = SyncClock().written(False, "batch", 10.0, 2.0)
    assert clock == SyncClock(dirty=True, deadline=12.0)
    assert clock.written(False, "batch", 11.5, 2.0) == clock  # load does not push it back
    assert not clock.must_sync("batch", False, 11.9) and not clock.due(11.9)
    assert clock.must_sync("batch", False, 12.0) and clock.due(12.0)
    assert clock.must_sync("batch", True, 10.5)  # a flush syncs at once
    assert clock.written(True, "batch", 12.0, 2.0) == SyncClock()


def test_never_has_no_deadline_and_syncs_only_when_asked() -> None:
    clock = SyncClock().written(False, "never", 5.0, 2.0)
    assert clock == SyncClock(dirty=True, deadline=math.inf)
    assert not clock.due(1e9) and not clock.must_sync("never", False, 1e9)
    assert clock.must_sync("never", True, 6.0)
    assert not SyncClock().due(1e9)  # nothing unsynced: nothing is due
