"""A second writer appending to a session file a store holds (issue 36, item 3).

pi 1.6.0 appends with no lock. The store notices, before its next batch, that the file is
not as it left it; whole valid entries are taken in and the store continues from the file's
last entry (an ``entries_merged`` event says so); anything else turns it read-only with an
error naming the other writer. The other writer here is this test appending lines from
outside the store between two appends (``tests/interop/test_pi_session_manager_foreign.py``
has real pi 1.6.0 do it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.session_store import SessionStoreHandle, StoreOptions, open_store
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import user_message
from pitrio.messages.events import EntriesMerged
from tests.actors.test_session_store_actor import assistant


def foreign_line(entry_id: str, parent: str | None, text: str, role: str = "user") -> bytes:
    """A ``message`` entry as pi writes it (its own key order)."""
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}]}
    if role == "assistant":
        message.update(api="faux-api", provider="faux", model="faux-1", stopReason="stop")
        message["usage"] = {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        }
    message["timestamp"] = 1_700_000_000_500
    value = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:05.000Z",
        "message": message,
    }
    return orjson.dumps(value) + b"\n"


def append_outside(path: Path, data: bytes) -> None:
    """Another process's append: its own descriptor, ``O_APPEND``, no lock (as pi does)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def chain(path: Path) -> list[tuple[str, str | None]]:
    parsed = parse_session_bytes(path.read_bytes(), origin=str(path))
    assert parsed.errors == []
    return [(stored.id, stored.parent_id) for stored in parsed.entries]


async def started(nursery: trio.Nursery, path: Path, **options: Any) -> SessionStoreHandle:
    return await open_store(nursery, path, cwd="/p", options=StoreOptions(**options))


@pytest.mark.parametrize("sync_inline", [False, True])
async def test_entries_another_writer_appended_are_taken_in_before_the_next_batch(
    tmp_path: Path, sync_inline: bool
) -> None:
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path, sync_inline=sync_inline)
        watch = await store.watch_notices()
        first = await store.append_message(user_message("one", timestamp=1))
        second = await store.append_message(assistant("two"))
        append_outside(
            path,
            foreign_line("f0000001", second.id, "from pi")
            + foreign_line("f0000002", "f0000001", "pi's answer", role="assistant"),
        )
        third = await store.append_message(user_message("three", timestamp=2))
        assert third.parent_id == "f0000002"  # the reply says where it went, too
        event = watch.receive_nowait()
        assert isinstance(event, EntriesMerged)
        assert event.entry_ids == ("f0000001", "f0000002")
        assert event.leaf_id == third.id  # the leaf once the queued entry follows them
        assert "another writer appended 2 entries" in event.message
        assert await store.leaf_id() == third.id
        context = await store.context_messages()
        texts = [message.content[0].text for message in context]  # type: ignore[union-attr]
        assert texts == ["one", "two", "from pi", "pi's answer", "three"]
        assert await store.catch_up() == 1
        await store.aclose()
    assert chain(path) == [
        (first.id, None),
        (second.id, first.id),
        ("f0000001", second.id),
        ("f0000002", "f0000001"),
        (third.id, "f0000002"),
    ]


async def test_a_new_store_opened_on_the_merged_file_sees_one_chain(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path)
        await store.append_message(user_message("one", timestamp=1))
        await store.append_message(assistant("two"))
        leaf = await store.leaf_id()
        append_outside(path, foreign_line("f0000001", leaf, "from pi"))
        # Nothing to write: a catch-up takes the lines in all the same (a prompt's preflight).
        assert await store.catch_up() == 1
        assert await store.leaf_id() == "f0000001"
        assert await store.catch_up() == 1  # unchanged since: nothing read, nothing merged
        await store.append_message(user_message("three", timestamp=2))
        await store.aclose()
    async with trio.open_nursery() as nursery:
        again = await started(nursery, path)
        texts = [m.content[0].text for m in await again.context_messages()]  # type: ignore[union-attr]
        assert texts == ["one", "two", "from pi", "three"]
        await again.aclose()


async def test_lines_appended_between_reading_the_file_and_writing_are_news(
    tmp_path: Path,
) -> None:
    # The mark is what was parsed, so an append racing the open is caught too.
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path)
        await store.append_message(user_message("one", timestamp=1))
        await store.append_message(assistant("two"))
        leaf = await store.leaf_id()
        await store.aclose()
    from pitrio.actors.session_store.storage import read_session

    parsed = read_session(path)
    assert parsed is not None and parsed.mark is not None
    assert parsed.mark.size == path.stat().st_size
    append_outside(path, foreign_line("f0000001", leaf, "late"))
    assert parsed.mark.size < path.stat().st_size  # what a store opened from it would know


@pytest.mark.parametrize(
    ("change", "found"),
    [
        ("truncate", "cut from"),
        ("rewrite", "was rewritten"),
        ("orphan", "parent nowhere does not exist"),
        ("header", "a second session header"),
        ("torn", "unterminated"),
        ("undecodable", "does not decode"),
    ],
)
async def test_what_cannot_be_merged_turns_the_session_read_only_and_loses_nothing(
    tmp_path: Path, change: str, found: str
) -> None:
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path)
        await store.append_message(user_message("one", timestamp=1))
        await store.append_message(assistant("two"))
        data = path.read_bytes()
        if change == "truncate":
            path.write_bytes(data[:-20])  # same inode: pi's writeFileSync would do this
        elif change == "rewrite":
            path.write_bytes(data.replace(b'"two"', b'"TWO"') + foreign_line("f1", None, "x"))
        elif change == "orphan":
            append_outside(path, foreign_line("f0000001", "nowhere", "lost parent"))
        elif change == "header":
            append_outside(path, data.splitlines(keepends=True)[0])
        elif change == "undecodable":  # an assistant message without its model fields
            append_outside(path, foreign_line("f0000001", None, "x").replace(b"user", b"assistant"))
        else:
            append_outside(path, foreign_line("f0000001", None, "half")[:30])
        outside = path.read_bytes()
        with pytest.raises(ReadOnlySessionError) as refused:
            await store.append_message(user_message("three", timestamp=2))
        assert "another writer" in str(refused.value) and found in str(refused.value)
        assert "read-only" in str(refused.value)
        with pytest.raises(ReadOnlySessionError):  # and from now on
            await store.append_message(user_message("four", timestamp=3))
        with pytest.raises(ReadOnlySessionError):
            await store.catch_up()
        status = await store.status()
        assert status.write_error is not None and found in status.write_error
        await store.aclose()
    assert path.read_bytes() == outside  # neither side's bytes touched


async def test_a_touched_file_is_not_read_again(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path)
        await store.append_message(user_message("one", timestamp=1))
        await store.append_message(assistant("two"))
        os.utime(path, ns=(1, 1))  # only the time changed: the same bytes are there
        third = await store.append_message(user_message("three", timestamp=2))
        assert await store.catch_up() == 0
        await store.aclose()
    assert chain(path)[-1] == (third.id, chain(path)[-2][0])


async def test_a_batch_of_several_entries_follows_the_other_writers_as_one_chain(
    tmp_path: Path,
) -> None:
    # Appends made together are one batch; only its first entry changes parent.
    path = tmp_path / "s.jsonl"
    async with trio.open_nursery() as nursery:
        store = await started(nursery, path)
        await store.append_message(user_message("one", timestamp=1))
        two = await store.append_message(assistant("two"))
        append_outside(path, foreign_line("f0000001", two.id, "from pi"))
        writes = (await store.status()).writes
        results: dict[str, Any] = {}

        async def append(text: str) -> None:
            results[text] = await store.append_message(user_message(text, timestamp=2))

        async with trio.open_nursery() as appenders:
            for text in ("a", "b", "c"):
                appenders.start_soon(append, text)
        assert (await store.status()).writes - writes <= 2  # grouped, not one write each
        await store.aclose()
    ids = chain(path)
    assert ids[2] == ("f0000001", two.id)
    tail = ids[3:]
    assert tail[0][1] == "f0000001"
    assert [parent for _, parent in tail[1:]] == [entry_id for entry_id, _ in tail[:-1]]
    assert {entry_id for entry_id, _ in tail} == {entry.id for entry in results.values()}
    replies = {entry.id: entry.parent_id for entry in results.values()}
    assert replies == dict(tail)  # each reply names the parent it was written with
