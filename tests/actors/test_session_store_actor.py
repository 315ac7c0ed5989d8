"""The SessionStore actor (pitrio/actors/session_store/actor.py) on real files.

Spec §4.6 (lazy creation), §4.7 (leaf), §4.12 (fork, clone), scenarios S90, S95, S125,
S144-S147, S156, S176-S179, S186, S187; group commit, fsync policies, the lease and crash
recovery of issue 3.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

from pitrio.actors.session.log import SessionLog
from pitrio.actors.session_store import (
    SessionStore,
    SessionStoreHandle,
    StoreOptions,
    create_store,
    open_store,
    start_seeded_store,
    start_store,
)
from pitrio.actors.session_store.actor import IDLE_SYNC_WAIT
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.lease import Lease, read_lease
from pitrio.actors.session_store.leased_file import LeasedFile
from pitrio.actors.session_store.storage import AppendFile
from pitrio.errors import (
    ActorStoppedError,
    EntryNotFoundError,
    ReadOnlySessionError,
    SessionError,
    SessionFileError,
    SessionLockedError,
    StaleFenceError,
    collapse_groups,
)
from pitrio.messages.agent import AssistantMessage, Usage, user_message
from pitrio.messages.content import TextContent
from pitrio.messages.entries import (
    BranchSummaryEntry,
    ContentReplacement,
    MessageEntry,
    SessionInfoEntry,
)
from pitrio.messages.events import EntryAppended
from tests.stray_cancel import no_stray_cancel

CWD = "/home/u/proj"


def assistant(text: str = "reply") -> AssistantMessage:
    return AssistantMessage(
        content=(TextContent(text=text),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="stop",
        timestamp=1_700_000_000_000,
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


@asynccontextmanager
async def running(make: Any, *args: Any, **kwargs: Any) -> AsyncIterator[SessionStoreHandle]:
    """Start a store with ``make(nursery, ...)`` and close it cleanly at the end."""
    async with trio.open_nursery() as nursery:
        store = await make(nursery, *args, **kwargs)
        with no_stray_cancel():
            yield store
        await store.aclose()


async def new_store(tmp_path: Path, **options: Any) -> Any:
    return (
        create_store,
        (CWD,),
        {
            "session_dir_override": str(tmp_path),
            "options": StoreOptions(**options),
        },
    )


# -- lazy creation and appends --------------------------------------------------------------------


async def test_file_appears_with_the_first_acknowledged_append(tmp_path: Path) -> None:
    # Issue 21: an append that returned is durable from the first entry on; only ``lazy``
    # ones (a new session's model and thinking level) wait in memory, as pi's all do.
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        path = store.path
        assert path is not None and path.parent == tmp_path
        assert path.name.endswith(f"_{store.header.id}.jsonl")
        events = await store.subscribe()
        model = await store.append_model_change("faux", "faux-1", lazy=True)
        level = await store.append_thinking_level_change("off", lazy=True)
        assert not path.exists()  # lazy entries only: nothing on disk (§4.6)
        assert (await store.status()).persisted is False
        with pytest.raises(trio.WouldBlock):
            events.receive_nowait()  # nor announced: they are not durable
        first = await store.append_message(user_message("hello", timestamp=1))
        assert path.exists()  # the first prompt is on disk before its append returns
        assert [(await events.receive()).entry for _ in range(3)] == [model, level, first]
        written = lines(path)
        assert written[0]["type"] == "session" and written[0]["id"] == store.header.id
        assert [line["id"] for line in written[1:]] == [model.id, level.id, first.id]
        assert [line["parentId"] for line in written[1:]] == [None, model.id, level.id]
        answer = await store.append_message(assistant())
        assert lines(path)[-1]["id"] == answer.id
        await store.append_session_info("  named  ")
        assert lines(path)[-1]["name"] == "named"
        assert await store.session_name() == "named"


async def test_a_session_with_only_lazy_entries_leaves_no_file(tmp_path: Path) -> None:
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        await store.append_model_change("faux", "faux-1", lazy=True)
        await store.append_thinking_level_change("off", lazy=True)
        await store.flush()
    assert os.listdir(tmp_path) == []


async def test_an_append_arriving_while_the_file_is_created_is_written_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lazy creation writes every entry so far; one appended while the lease is being taken
    is written once, after them (it used to go into the new file and again in its batch)."""
    taking, release = trio.Event(), trio.Event()
    take_lease = LeasedFile._take_lease

    async def held_take_lease(self: LeasedFile) -> None:
        taking.set()
        await release.wait()
        await take_lease(self)

    monkeypatch.setattr(LeasedFile, "_take_lease", held_take_lease)
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        path = store.path
        assert path is not None
        # Lazy: kept in memory, so the next append is the one that creates the file.
        first = await store.append_model_change("faux", "faux-1", lazy=True)
        entries: list[MessageEntry] = []

        async def append(message: Any) -> None:
            entries.append(await store.append_message(message))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, assistant())  # creates the file
            await taking.wait()
            nursery.start_soon(append, user_message("meanwhile", timestamp=2))
            await trio.testing.wait_all_tasks_blocked()  # the late append is in the tree now
            release.set()
        then = await store.append_message(assistant("after"))
        written = [line["id"] for line in lines(path)[1:]]
    by_role = {entry.message.role: entry.id for entry in entries}
    assert written == [first.id, by_role["assistant"], by_role["user"], then.id]
    parse_session_bytes(path.read_bytes(), origin=str(path)).raise_for_errors()


async def test_appends_return_the_written_entry(tmp_path: Path) -> None:
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        entry = await store.append_message(assistant())
        assert isinstance(entry, MessageEntry) and len(entry.id) == 8
        assert entry.parent_id is None and entry.timestamp.endswith("Z")
        assert await store.get_entry(entry.id) == entry
        assert await store.leaf_entry() == entry
        assert await store.get_entry("nope") is None


async def test_in_memory_store_never_writes(tmp_path: Path) -> None:
    async with running(create_store, CWD, persist=False) as store:
        assert store.path is None
        await store.append_message(assistant())
        await store.flush()
        status = await store.status()
        assert not status.persisted and status.entries == 1


async def test_not_lazy_creates_the_file_on_the_first_append(tmp_path: Path) -> None:
    options = StoreOptions(lazy_create=False)
    async with running(
        create_store, CWD, session_dir_override=str(tmp_path), options=options
    ) as store:
        await store.append_message(user_message("u", timestamp=1))
        assert store.path is not None and len(lines(store.path)) == 2


async def test_reopening_gives_the_same_session(tmp_path: Path) -> None:
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        await store.append_message(user_message("u", timestamp=1))
        answer = await store.append_message(assistant("a"))
        label = await store.append_label_change(answer.id, "mark")
        path = store.path
        before = (await store.context()).messages.materialize()
    assert path is not None
    async with running(open_store, path) as again:
        assert again.header.id == store.header.id
        assert await again.leaf_id() == label.id
        assert await again.label(answer.id) == "mark"
        assert (await again.context()).messages.materialize() == before
        assert [e.id for e in await again.entries()] == [e["id"] for e in lines(path)[1:]]


async def test_entry_appended_events_follow_durability_in_order(tmp_path: Path) -> None:
    async with running(create_store, CWD, session_dir_override=str(tmp_path)) as store:
        events = await store.subscribe()
        first = await store.append_message(user_message("u", timestamp=1))
        second = await store.append_message(assistant())
        got = [events.receive_nowait(), events.receive_nowait()]
        assert got == [EntryAppended(entry=first), EntryAppended(entry=second)]
        with pytest.raises(trio.WouldBlock):
            events.receive_nowait()
    with pytest.raises(trio.EndOfChannel):
        await events.receive()


# -- group commit and fsync policies ------------------------------------------------------------


class GatedFile(AppendFile):
    """An append file whose first write waits, in its worker thread, for the test's go."""

    gate: trio.MemoryReceiveChannel[None]
    entered: trio.MemorySendChannel[None]

    def write(self, data: bytes) -> None:
        if self.writes == 0:
            trio.from_thread.run(self.entered.send, None)
            trio.from_thread.run(self.gate.receive)
        super().write(data)


async def test_concurrent_appends_share_one_write_and_one_fsync(tmp_path: Path) -> None:
    go_send, go_receive = trio.open_memory_channel[None](1)
    entered_send, entered_receive = trio.open_memory_channel[None](1)

    def gated(path: Path) -> AppendFile:
        file = GatedFile(path)
        file.gate, file.entered = go_receive, entered_send
        return file

    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        seeding = SessionStore.opening(path, file_class=gated)
        store = await start_store(nursery, seeding)
        await store.append_message(assistant("creates the file"))  # created, not via write()
        results: list[MessageEntry] = []

        async def append(n: int) -> None:
            results.append(await store.append_message(user_message(f"m{n}", timestamp=n)))

        async with trio.open_nursery() as appenders:
            appenders.start_soon(append, 0)
            await entered_receive.receive()  # batch 1 (one append) is inside write()
            for n in range(1, 21):
                appenders.start_soon(append, n)
            await trio.testing.wait_all_tasks_blocked()  # all 20 queued behind it
            await go_send.send(None)
        status = await store.status()
        assert (status.writes, status.syncs) == (2, 2)
        await store.aclose()
    texts = [line["message"]["content"][0]["text"] for line in lines(path)[2:]]
    assert texts[0] == "m0" and sorted(texts) == sorted(f"m{n}" for n in range(21))
    # file order = the order the actor took them in: each one's parent is the line before
    ids = [line["id"] for line in lines(path)[1:]]
    assert [line["parentId"] for line in lines(path)[1:]] == [None, *ids[:-1]]
    assert {entry.id for entry in results} == set(ids[1:])


async def test_fsync_always_syncs_every_batch(tmp_path: Path) -> None:
    async with running(open_store, tmp_path / "s.jsonl") as store:
        await store.append_message(assistant())
        for n in range(3):
            await store.append_message(user_message(str(n), timestamp=n))
        status = await store.status()
        assert status.writes == 3 and status.syncs == 3


async def test_fsync_inline_syncs_every_batch_on_the_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = StoreOptions(sync_inline=True)
    async with running(open_store, tmp_path / "s.jsonl", options=options) as store:
        await store.append_message(assistant())  # creates the file (its own path)

        async def no_thread(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("an inline append used a worker thread")

        monkeypatch.setattr(trio.to_thread, "run_sync", no_thread)
        for n in range(3):
            await store.append_message(user_message(str(n), timestamp=n))
        status = await store.status()
        assert status.writes == 3 and status.syncs == 3
        monkeypatch.undo()
    assert [line["message"]["role"] for line in lines(tmp_path / "s.jsonl")[1:]] == [
        "assistant",
        "user",
        "user",
        "user",
    ]


async def test_an_inline_file_creation_lets_runnable_tasks_go_first(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The lazily created file's fsyncs wait (at most IDLE_SYNC_WAIT) until nothing else can
    run, as an inline append's do: the first prompt's model request goes out before them
    (issue 38)."""
    path = tmp_path / "s.jsonl"
    seen: list[bool] = []

    async def busy() -> None:
        for _ in range(50):
            seen.append(path.exists())
            await trio.lowlevel.checkpoint()

    async with running(open_store, path, options=StoreOptions(sync_inline=True)) as store:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append_message, assistant())
            nursery.start_soon(busy)
        assert path.exists()  # created once the loop fell idle
    assert seen == [False] * 50


async def test_fsync_batch_syncs_on_a_timer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    options = StoreOptions(fsync="batch", batch_interval=5.0)
    async with running(open_store, tmp_path / "s.jsonl", options=options) as store:
        await store.append_message(assistant())
        await store.append_message(user_message("1", timestamp=1))
        await store.append_message(user_message("2", timestamp=2))
        status = await store.status()
        assert (status.writes, status.syncs) == (2, 0)  # written to the OS, not synced yet
        await trio.sleep(4.9)
        assert (await store.status()).syncs == 0  # the timer runs from the last write
        # The fsync runs in a worker thread, which the mock clock does not wait for.
        while (await store.status()).syncs == 0:  # noqa: ASYNC110
            await trio.sleep(0.5)
        await trio.sleep(60)
        assert (await store.status()).syncs == 1  # nothing new: no more fsyncs
        await store.append_message(user_message("3", timestamp=3))
        await store.flush()
        assert (await store.status()).syncs == 2


async def test_fsync_batch_is_not_postponed_by_steady_load(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    options = StoreOptions(fsync="batch", batch_interval=5.0)
    async with running(open_store, tmp_path / "s.jsonl", options=options) as store:
        await store.append_message(assistant())  # creates the file (synced)
        for n in range(12):  # one append a second: the interval must still be honoured
            await store.append_message(user_message(str(n), timestamp=n))
            await trio.sleep(1.0)
        syncs = (await store.status()).syncs
        assert 2 <= syncs <= 3, syncs


async def test_fsync_never_only_syncs_on_flush(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    options = StoreOptions(fsync="never", batch_interval=1.0)
    async with running(open_store, tmp_path / "s.jsonl", options=options) as store:
        await store.append_message(assistant())
        await store.append_message(user_message("1", timestamp=1))
        await trio.sleep(30)
        assert (await store.status()).syncs == 0
        await store.flush()
        assert (await store.status()).syncs == 1


def test_unknown_fsync_policy_is_refused() -> None:
    with pytest.raises(ValueError, match=r"session\.fsync"):
        StoreOptions(fsync="sometimes")  # type: ignore[arg-type]


# -- the lease ------------------------------------------------------------------------------------


def assert_released(path: Path) -> None:
    """The store's lease was given back: no lock file is left beside the session (issue 21),
    and a new writer takes the session at once."""
    assert read_lease(path) is None
    assert not path.with_name(path.name + ".lock").exists()
    Lease.acquire(path).release()


async def test_a_second_writer_is_refused_and_a_reader_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    async with running(open_store, path) as store:
        await store.append_message(assistant())
        assert (await store.status()).fence == 1
        async with trio.open_nursery() as nursery:
            with pytest.raises(SessionLockedError, match=f"pid {os.getpid()} "):
                await open_store(nursery, path)
            reader = await open_store(nursery, path, read_only=True)
            assert len(await reader.entries()) == 1
            with pytest.raises(ReadOnlySessionError):
                await reader.append_message(assistant())
            await reader.aclose()
    assert_released(path)
    async with running(open_store, path) as again:  # a fresh lock file: the fence starts again
        assert (await again.status()).fence == 1


async def test_an_append_with_a_stale_fence_is_refused(tmp_path: Path) -> None:
    async with running(open_store, tmp_path / "s.jsonl") as store:
        await store.append_message(assistant())
        draft = MessageEntry(id="", parent_id=None, timestamp="", message=assistant())
        with pytest.raises(StaleFenceError, match="lease 7 refused"):
            await store.append(draft, fence=7)
        ok = await store.append(draft, fence=(await store.status()).fence)
        assert ok.parent_id is not None


async def test_a_writer_that_lost_its_lease_stops(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with pytest.raises(StaleFenceError), collapse_groups():
        async with trio.open_nursery() as nursery:
            store = await open_store(nursery, path)
            await store.append_message(assistant())
            thief = await trio.to_thread.run_sync(lambda: Lease.acquire(path, take_over=True))
            try:
                with pytest.raises(StaleFenceError, match="is stale"):
                    await store.append_message(user_message("after", timestamp=1))
                with pytest.raises(ActorStoppedError):
                    await store.append_message(user_message("again", timestamp=2))
            finally:
                thief.release()
    assert [line["type"] for line in lines(path)] == ["session", "message"]


class FullDiskFile(AppendFile):
    """An append file on a disk that fills up: after ``room`` bytes, a write takes what fits
    (as the kernel does) and the next one fails with ENOSPC."""

    room = 0

    def write(self, data: bytes) -> None:
        if len(data) > self.room:
            super().write(data[: self.room])  # the torn part a full disk leaves
            self.room = 0
            raise OSError(28, "No space left on device")
        self.room -= len(data)
        super().write(data)


@pytest.mark.parametrize("sync_inline", [False, True])
async def test_a_failed_write_turns_the_store_read_only_and_keeps_the_file_whole(
    tmp_path: Path, sync_inline: bool
) -> None:
    """A write error is not fail-stop: the batch's appends fail, the part of the batch that
    reached the file is cut off again, later appends are refused with the same text, reads,
    flush and close go on working."""

    def full_disk(path: Path) -> AppendFile:
        file = FullDiskFile(path)
        file.room = 300
        return file

    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        options = StoreOptions(sync_inline=sync_inline)
        opening = SessionStore.opening(path, file_class=full_disk, options=options)
        store = await start_store(nursery, opening)
        first = await store.append_message(assistant("creates the file"))
        kept = await store.append_message(user_message("fits", timestamp=1))
        size = path.stat().st_size
        expected = (
            f"{path}: writing the session failed: [Errno 28] No space left on device. The "
            "session is read-only from now on; every entry saved before is in the file."
        )
        with pytest.raises(ReadOnlySessionError) as failed:
            await store.append_message(user_message("x" * 1000, timestamp=2))
        assert str(failed.value) == expected
        assert path.stat().st_size == size  # the torn part is gone
        with pytest.raises(ReadOnlySessionError) as refused:
            await store.append_message(user_message("later", timestamp=3))
        assert str(refused.value) == expected
        assert isinstance(refused.value.__cause__, OSError)
        assert (await store.status()).write_error == expected
        await store.flush()  # nothing unsynced: no error
        await store.aclose()  # a clean close, the lease released
    assert [line.get("id") for line in lines(path)[1:]] == [first.id, kept.id]
    assert_released(path)


class FailingOnceFile(GatedFile):
    """The first write waits for the test's go, then fails; later writes would succeed."""

    def write(self, data: bytes) -> None:
        if self.writes == 0:
            trio.from_thread.run(self.entered.send, None)
            trio.from_thread.run(self.gate.receive)
            self.writes = -1  # failed once
            raise OSError(28, "No space left on device")
        super().write(data)


async def test_appends_queued_behind_a_failed_batch_are_refused_too(tmp_path: Path) -> None:
    """A batch gathered while the failing one was on its way is not written, even if it
    would fit: its entries follow ones the file does not have."""
    go_send, go_receive = trio.open_memory_channel[None](1)
    entered_send, entered_receive = trio.open_memory_channel[None](1)

    def failing(path: Path) -> AppendFile:
        file = FailingOnceFile(path)
        file.gate, file.entered = go_receive, entered_send
        return file

    path = tmp_path / "s.jsonl"
    outcomes: list[str] = []

    async def append(text: str) -> None:
        try:
            await store.append_message(user_message(text, timestamp=1))
        except ReadOnlySessionError as exc:
            outcomes.append(f"{text}: {exc}")

    async with trio.open_nursery() as nursery:
        store = await start_store(nursery, SessionStore.opening(path, file_class=failing))
        first = await store.append_message(assistant("creates the file"))
        async with trio.open_nursery() as appenders:
            appenders.start_soon(append, "fails")
            await entered_receive.receive()  # its batch is inside write()
            appenders.start_soon(append, "queued")
            await trio.testing.wait_all_tasks_blocked()
            await go_send.send(None)
        await store.aclose()
    assert sorted(outcome.split(":")[0] for outcome in outcomes) == ["fails", "queued"]
    assert all("No space left on device" in outcome for outcome in outcomes)
    assert [line.get("id") for line in lines(path)[1:]] == [first.id]


# -- opening files --------------------------------------------------------------------------------


async def test_missing_file_is_a_new_session_at_that_path(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "new.jsonl"
    async with running(open_store, path, cwd="/elsewhere") as store:
        assert store.path == path and store.header.cwd == "/elsewhere"
        first = await store.append_message(user_message("u", timestamp=1))
        assert [line["id"] for line in lines(path)[1:]] == [first.id]  # durable once returned
        await store.append_message(assistant())
    assert lines(path)[0]["id"] == store.header.id


async def test_empty_file_gets_a_header_and_keeps_it(tmp_path: Path) -> None:  # S144, S146, S147
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    async with running(open_store, path) as store:
        header = lines(path)
        assert len(header) == 1 and header[0]["id"] == store.header.id
    async with running(open_store, path) as again:
        assert again.header.id == store.header.id and again.path == path


async def test_a_file_with_a_malformed_middle_line_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    async with running(open_store, path) as store:
        await store.append_message(assistant())
        await store.append_message(user_message("u", timestamp=1))
    data = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join([data[0], b"not json", *data[1:]]) + b"\n")
    async with trio.open_nursery() as nursery:
        with pytest.raises(SessionFileError, match=rf"^{path}:2: malformed JSON"):
            await open_store(nursery, path)
        with pytest.raises(SessionFileError):
            await open_store(nursery, path, read_only=True)
        lenient = await open_store(
            nursery, path, read_only=True, options=StoreOptions(strict=False)
        )
        assert len(await lenient.entries()) == 2
        assert [p.kind for p in (await lenient.status()).problems] == ["malformed"]
        await lenient.aclose()


async def test_a_torn_tail_is_reported_kept_and_appended_after(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    async with running(open_store, path) as store:
        await store.append_message(assistant())
    torn = b'{"type":"message","id":"deadbeef","parentId":null,"timestamp":"2026-01-01T00:0'
    path.write_bytes(path.read_bytes() + torn)
    async with running(open_store, path) as store:
        status = await store.status()
        assert [(p.line, p.kind) for p in status.problems] == [(3, "torn")]
        assert status.entries == 1
        added = await store.append_message(user_message("after the crash", timestamp=2))
    data = path.read_bytes()
    assert torn + b"\n" + b'{"type":"message","id":"' + added.id.encode() in data
    parsed = parse_session_bytes(data, origin=str(path))
    assert [(p.line, p.kind, p.severity) for p in parsed.problems] == [(3, "torn", "warning")]
    assert [e.id for e in parsed.entries][-1] == added.id
    assert parsed.ends_clean


async def test_a_complete_last_line_without_newline_gets_one(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    async with running(open_store, path) as store:
        first = await store.append_message(assistant())
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    async with running(open_store, path) as store:
        second = await store.append_message(user_message("u", timestamp=1))
        assert second.parent_id == first.id
    parsed = parse_session_bytes(path.read_bytes(), origin=str(path))
    assert parsed.problems == [] and [e.id for e in parsed.entries] == [first.id, second.id]


# -- leaf moves, labels, contexts ------------------------------------------------------------------


async def test_branch_reset_and_branch_with_summary(tmp_path: Path) -> None:  # S95, S176-S179
    async with running(open_store, tmp_path / "s.jsonl") as store:
        one = await store.append_message(user_message("1", timestamp=1))
        two = await store.append_message(assistant("2"))
        three = await store.append_message(user_message("3", timestamp=3))
        with pytest.raises(EntryNotFoundError, match=r"^Entry nonexistent not found$"):
            await store.branch("nonexistent")
        with pytest.raises(EntryNotFoundError, match=r"^Entry nonexistent not found$"):
            await store.branch_with_summary("nonexistent", "s")
        summary = await store.branch_with_summary(one.id, "explored")
        assert isinstance(summary, BranchSummaryEntry)
        # ``fromId`` is the leaf the branch left (pi 1.6.0), not the point it continues from.
        assert (summary.parent_id, summary.from_id) == (one.id, three.id)
        assert [e.id for e in await store.children(one.id)] == [two.id, summary.id]
        root_summary = await store.branch_with_summary(None, "from the top")
        assert (root_summary.parent_id, root_summary.from_id) == (None, summary.id)
        await store.reset_leaf()
        no_leaf = await store.branch_with_summary(one.id, "nothing was left")
        assert (no_leaf.parent_id, no_leaf.from_id) == (one.id, "root")
        await store.branch(two.id)
        four = await store.append_message(user_message("4", timestamp=4))
        assert four.parent_id == two.id
        assert [e.id for e in await store.branch_entries()] == [one.id, two.id, four.id]
        await store.reset_leaf()
        assert await store.leaf_id() is None
        assert list((await store.context()).messages) == []
        root = await store.append_message(user_message("new root", timestamp=5))
        assert root.parent_id is None
        roots = await store.tree()
        assert [node.entry.id for node in roots] == [one.id, root_summary.id, root.id]


async def test_labels_need_an_existing_target(tmp_path: Path) -> None:  # S156
    async with running(open_store, tmp_path / "s.jsonl") as store:
        with pytest.raises(EntryNotFoundError, match=r"^Entry non-existent not found$"):
            await store.append_label_change("non-existent", "x")
        with pytest.raises(EntryNotFoundError):
            await store.append_context_edit("non-existent", None)
        one = await store.append_message(user_message("1", timestamp=1))
        await store.append_label_change(one.id, "checkpoint")
        assert await store.labels() == {one.id: "checkpoint"}


async def test_contexts_at_any_leaf(tmp_path: Path) -> None:  # S125
    async with running(open_store, tmp_path / "s.jsonl") as store:
        assert (await store.context_at("anything")).leaf_id is None
        one = await store.append_message(user_message("1", timestamp=1))
        two = await store.append_message(assistant("2"))
        at_one = await store.context_at(one.id)
        assert at_one.leaf_id == one.id and len(at_one.messages) == 1
        assert (await store.context_at("unknown")).leaf_id == two.id
        empty = await store.context_at(None)
        assert len(empty.messages) == 0 and empty.thinking_level == "off"
        await store.append_context_edit(two.id, ContentReplacement(content="edited"))
        messages = await store.context_messages()
        assert isinstance(messages, tuple) and messages[1].content == (TextContent(text="edited"),)  # type: ignore[union-attr]


async def test_the_handle_is_a_session_log(tmp_path: Path) -> None:
    # The session actor persists through this protocol (pitrio/actors/session/log.py).
    async with running(open_store, tmp_path / "s.jsonl") as store:
        log: SessionLog = store
        first = await log.append_message(assistant())
        await log.append_context_edit(first.id, None)
        assert await log.context_messages() == ()
        assert log.header.id == store.header.id and log.path == tmp_path / "s.jsonl"


# -- fork, clone ---------------------------------------------------------------------------------


async def test_fork_before_the_first_message_is_an_empty_session(tmp_path: Path) -> None:  # S90
    async with running(open_store, tmp_path / "s.jsonl") as store:
        one = await store.append_message(user_message("only question", timestamp=1))
        await store.append_message(assistant())
        with pytest.raises(SessionError, match=r"^Invalid entry ID for forking$"):
            await store.fork((await store.leaf_id()) or "")
        result = await store.fork(one.id)
        assert result.selected_text == "only question"
        seed = result.seed
        assert seed.entries == () and seed.header.parent_session == str(tmp_path / "s.jsonl")
        async with trio.open_nursery() as nursery:
            child = await start_seeded_store(nursery, seed)
            assert list((await child.context()).messages) == []
            assert child.path is not None and not child.path.exists()
            await child.aclose()


async def test_a_fork_without_assistant_is_written_lazily(tmp_path: Path) -> None:  # S186
    async with running(open_store, tmp_path / "s.jsonl") as store:
        one = await store.append_message(user_message("1", timestamp=1))
        await store.append_message(user_message("2", timestamp=2))
        await store.append_message(assistant())
        seed = (await store.fork(one.id, position="at")).seed
    assert [e.id for e in seed.entries] == [one.id]
    async with running(start_seeded_store, seed) as child:
        assert child.path is not None and not child.path.exists()
        await child.append_custom_entry("note", {"a": 1})
        await child.append_message(assistant())
        written = lines(child.path)
    assert [line["type"] for line in written].count("session") == 1
    ids = [line["id"] for line in written[1:]]
    assert len(set(ids)) == len(ids) == 3 and ids[0] == one.id


async def test_a_fork_with_an_assistant_is_written_at_once(tmp_path: Path) -> None:  # S187
    async with running(open_store, tmp_path / "s.jsonl") as store:
        await store.append_message(user_message("1", timestamp=1))
        two = await store.append_message(assistant())
        await store.append_label_change(two.id, "keep me")
        clone = await store.clone()
    async with running(start_seeded_store, clone.seed) as child:
        assert child.path is not None
        written = lines(child.path)
        assert [line["type"] for line in written] == ["session", "message", "message", "label"]
        assert written[0]["parentSession"] == str(tmp_path / "s.jsonl")
        assert await child.label(two.id) == "keep me"
        assert isinstance(await child.get_entry(written[3]["id"]), type(await child.leaf_entry()))


async def test_stopping_releases_and_syncs(tmp_path: Path) -> None:
    options = StoreOptions(fsync="batch", batch_interval=3600)
    path = tmp_path / "s.jsonl"
    async with running(open_store, path, options=options) as store:
        await store.append_message(assistant())
        await store.append_message(user_message("unsynced", timestamp=1))
        assert (await store.status()).syncs == 0
    assert_released(path)
    assert lines(path)[-1]["message"]["content"][0]["text"] == "unsynced"


async def test_names_are_stored_trimmed(tmp_path: Path) -> None:
    async with running(open_store, tmp_path / "s.jsonl") as store:
        info = await store.append_session_info("  Fork source ")
        assert isinstance(info, SessionInfoEntry) and info.name == "Fork source"


async def test_a_cancelled_store_releases_its_lease(tmp_path: Path) -> None:
    # A daemon cancelling a session must not leave it locked for other processes.
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path)
        await store.append_message(assistant())
        nursery.cancel_scope.cancel()
    assert_released(path)


async def test_a_failed_open_releases_its_lease(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The migration rewrite of a legacy file fails after the lease was taken.
    path = tmp_path / "legacy.jsonl"
    path.write_bytes(b'{"type":"session","id":"s","timestamp":"t","cwd":"/"}\n')

    def disk_full(target: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pitrio.actors.session_store.maintenance.replace_file", disk_full)
    with pytest.raises(OSError, match="No space left"), collapse_groups():
        async with trio.open_nursery() as nursery:
            await open_store(nursery, path)
    assert_released(path)
    assert path.read_bytes() == b'{"type":"session","id":"s","timestamp":"t","cwd":"/"}\n'


async def test_an_inline_fsync_waits_for_the_loop_to_fall_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # The fsync blocks the event loop, so it runs once no other task can (issue 7: it then
    # overlaps the model request in flight); a loop that never idles still gets it within
    # IDLE_SYNC_WAIT.
    log: list[str] = []
    options = StoreOptions(sync_inline=True)
    async with running(open_store, tmp_path / "s.jsonl", options=options) as store:
        await store.append_message(assistant())  # creates the file
        real_sync = AppendFile.sync

        def sync(self: AppendFile) -> None:
            log.append("sync")
            real_sync(self)

        monkeypatch.setattr(AppendFile, "sync", sync)

        async def busy(steps: int, jump: float = 0.0) -> None:
            for step in range(steps):
                log.append(f"busy {step}")
                autojump_clock.jump(jump)
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append_message, user_message("idle", timestamp=1))
            nursery.start_soon(busy, 5)
        assert log == [f"busy {step}" for step in range(5)] + ["sync"]

        log.clear()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(store.append_message, user_message("busy", timestamp=2))
            nursery.start_soon(busy, 50, IDLE_SYNC_WAIT / 4)
        assert "sync" in log and log.index("sync") < 10  # not after the busy task's 50 steps
    written = lines(tmp_path / "s.jsonl")[2:]
    assert [line["message"]["content"][0]["text"] for line in written] == ["idle", "busy"]


class RecordingFile(AppendFile):
    """An append file that logs writes, writeback starts and fsyncs; ``fail_sync`` makes the
    next fsync fail as a dying disk's does."""

    log: list[str]
    fail_sync = False

    def write(self, data: bytes) -> None:
        self.log.append(f"write {len(data)}")
        super().write(data)

    def start_writeback(self, offset: int, length: int) -> None:
        self.log.append(f"writeback {offset}+{length}")
        super().start_writeback(offset, length)

    def sync(self) -> None:
        self.log.append("sync")
        if self.fail_sync:
            raise OSError(5, "Input/output error")
        super().sync()


async def test_an_inline_sync_starts_the_writeback_before_waiting_and_a_failed_sync_cuts_off(
    tmp_path: Path,
) -> None:
    # The batch is written and its writeback started at once, the fsync (which stops the
    # loop) comes once the loop is idle and then waits for the journal only; if it fails,
    # the batch is cut off again as a failed write's is.
    files: list[RecordingFile] = []

    def recording(path: Path) -> AppendFile:
        file = RecordingFile(path)
        file.log = []
        files.append(file)
        return file

    path = tmp_path / "s.jsonl"
    options = StoreOptions(sync_inline=True)
    async with trio.open_nursery() as nursery:
        opening = SessionStore.opening(path, file_class=recording, options=options)
        store = await start_store(nursery, opening)
        await store.append_message(assistant("creates the file"))
        file = files[-1]
        file.log.clear()
        size = path.stat().st_size
        async with trio.open_nursery() as inner:
            inner.start_soon(store.append_message, user_message("hello", timestamp=1))
            await trio.testing.wait_all_tasks_blocked()
        written = path.stat().st_size - size
        assert file.log == [f"write {written}", f"writeback {size}+{written}", "sync"]

        # While the loop is busy the batch is already in the file (and on its way to the
        # disk), its fsync not yet run: that waits for the loop to fall idle.
        file.log.clear()
        size = path.stat().st_size
        seen: list[tuple[int, bool]] = []

        async def busy() -> None:
            for _ in range(5):
                seen.append((path.stat().st_size, "sync" in file.log))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as inner:
            inner.start_soon(store.append_message, user_message("again", timestamp=2))
            inner.start_soon(busy)
        assert any(grown > size and not synced for grown, synced in seen)
        assert file.log[-1] == "sync"

        file.fail_sync = True
        size = path.stat().st_size
        with pytest.raises(ReadOnlySessionError, match="Input/output error"):
            await store.append_message(user_message("lost", timestamp=3))
        assert path.stat().st_size == size  # the written batch is cut off again
        await store.aclose()
    assert [line["message"]["content"][0]["text"] for line in lines(path)[2:]] == [
        "hello",
        "again",
    ]
