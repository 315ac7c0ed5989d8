"""An idle store keeps no writer task (issue 38: 10,000 idle sessions in one daemon): the writer
starts when something is queued and ends once nothing is queued or waits for a timed sync."""

from __future__ import annotations

import time
from pathlib import Path

import trio
import trio.testing

from pitrio.actors.session_store import StoreOptions, open_store
from pitrio.messages.agent import user_message
from tests.actors.test_host_idle_memory import task_names
from tests.actors.test_session_store_actor import assistant, lines, running


def writers() -> int:
    """The store writer tasks of this run."""
    return sum(n for name, n in task_names().items() if name.endswith("SessionStore._writer"))


async def writer_gone(within: float = 30.0) -> None:
    """Return once no store writer task is left (waiting, at most ``within`` real seconds,
    for a worker thread's result to reach the writer)."""
    give_up = time.monotonic() + within
    await trio.testing.wait_all_tasks_blocked()
    while writers() and time.monotonic() < give_up:
        await trio.lowlevel.checkpoint()


def texts(path: Path) -> list[str]:
    return [line["message"]["content"][0]["text"] for line in lines(path)[1:]]


async def test_the_writer_runs_only_while_something_is_queued(tmp_path: Path) -> None:
    options = StoreOptions(fsync="never")
    path = tmp_path / "s.jsonl"
    async with running(open_store, path, options=options) as store:
        assert writers() == 0  # opened: nothing to write
        for text in ("reply", "1", "2"):
            if text == "reply":
                await store.append_message(assistant())
            else:
                await store.append_message(user_message(text, timestamp=1))
            await trio.testing.wait_all_tasks_blocked()
            assert writers() == 0  # written: nothing left to do
        await store.flush()
        await trio.testing.wait_all_tasks_blocked()
        status = await store.status()
        assert writers() == 0 and status.syncs == 1 and status.entries == 3
    assert texts(path) == ["reply", "1", "2"]


async def test_the_writer_stays_for_a_timed_sync_then_ends(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    options = StoreOptions(fsync="batch", batch_interval=5.0)
    path = tmp_path / "s.jsonl"
    async with running(open_store, path, options=options) as store:
        await store.append_message(assistant())
        syncs = (await store.status()).syncs
        await store.append_message(user_message("1", timestamp=1))
        assert writers() == 1  # written, not synced: it waits for the batch's deadline
        while (await store.status()).syncs == syncs:  # noqa: ASYNC110 (fsync: a thread)
            await trio.sleep(0.5)
        # Synced: nothing left to do, the writer ends as the fsync's thread hands its result
        # back. The count is raised in that thread, before the hand-back: wait for it (real
        # time, the thread's; no mock time passes while this task stays runnable).
        await writer_gone()
        assert writers() == 0
        await store.append_message(user_message("2", timestamp=2))  # started again
        await store.flush()
    assert texts(path) == ["reply", "1", "2"]
