"""The session file of a live store: opened per batch, never held between them (issue 27).

A daemon holding 10,000 sessions must not keep two descriptors each (the hard limit here is
20,000). Every hostile node is made in the test's temporary directory, never the machine's.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
import trio

from pitrio.actors.session_store import SessionStore, StoreOptions, start_store
from pitrio.actors.session_store.commands import FsyncPolicy
from pitrio.actors.session_store.storage import AppendFile, sync_batch, write_batch
from pitrio.errors import ReadOnlySessionError, SessionFileReplacedError
from pitrio.messages.agent import user_message
from tests.actors.test_session_store_actor import assistant

HEADER = (
    b'{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}'
)


def open_descriptors_of(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    target = os.path.realpath(path)
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == target:
                count += 1
        except OSError:
            continue  # closed while listing (the listing's own descriptor)
    return count


def texts(path: Path) -> list[str]:
    out = []
    for line in path.read_bytes().splitlines()[1:]:
        value = orjson.loads(line)
        if value["type"] == "message":
            out.append(value["message"]["content"][0]["text"])
    return out


@pytest.mark.parametrize("fsync", ["always", "batch", "never"])
async def test_a_live_store_holds_no_descriptor_of_its_file_between_batches(
    tmp_path: Path, fsync: FsyncPolicy
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    async with trio.open_nursery() as nursery:
        store = await start_store(
            nursery, SessionStore.opening(path, options=StoreOptions(fsync=fsync))
        )
        await store.append_message(user_message("one", timestamp=1))
        await store.append_message(assistant("two"))
        assert open_descriptors_of(path) == 0
        await store.append_message(user_message("three", timestamp=3))
        await store.flush()
        assert open_descriptors_of(path) == 0
        await store.aclose()
    assert texts(path) == ["one", "two", "three"]


async def test_a_file_put_in_place_of_the_session_is_never_written(tmp_path: Path) -> None:
    """Renamed over between two batches: the append fails naming the path, the store turns
    read-only, and the other file is left as it was (a held descriptor would have gone on
    writing to the old, unlinked file, and the entries would have been lost unseen)."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    async with trio.open_nursery() as nursery:
        store = await start_store(nursery, SessionStore.opening(path))
        await store.append_message(user_message("kept", timestamp=1))
        other = tmp_path / "other"
        other.write_bytes(b"someone else's file\n")
        os.replace(other, path)
        with pytest.raises(ReadOnlySessionError) as failed:
            await store.append_message(user_message("lost?", timestamp=2))
        assert isinstance(failed.value.__cause__, SessionFileReplacedError)
        assert str(path) in str(failed.value)
        assert "another file was put in place" in str(failed.value)
        with pytest.raises(ReadOnlySessionError):
            await store.append_message(user_message("later", timestamp=3))
        await store.aclose()
    assert path.read_bytes() == b"someone else's file\n"


async def test_a_removed_session_file_is_reported_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    async with trio.open_nursery() as nursery:
        store = await start_store(nursery, SessionStore.opening(path))
        await store.append_message(user_message("kept", timestamp=1))
        path.unlink()
        with pytest.raises(ReadOnlySessionError, match="was removed since it was opened"):
            await store.append_message(user_message("after", timestamp=2))
        await store.aclose()
    assert not path.exists()


def test_a_fifo_or_device_swapped_in_is_refused_without_blocking(tmp_path: Path) -> None:
    """Opened without blocking and checked on the descriptor: a FIFO with no reader does not
    hang the writer, and neither it nor a device node (made here, never the machine's) is
    written."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    file = AppendFile(path)
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(SessionFileReplacedError, match="not a session file"):
        write_batch(file, None, b"{}\n", False)
    path.unlink()
    os.mknod(path, 0o020600, os.makedev(1, 3))  # a character device node of our own
    with pytest.raises(SessionFileReplacedError, match="not a session file"):
        write_batch(file, None, b"{}\n", True)


def test_a_batch_opens_the_file_once_and_nested_calls_share_it(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    opened: list[int] = []

    class CountingFile(AppendFile):
        def _open(self, identity: tuple[int, int] | None) -> int:
            fd = super()._open(identity)
            opened.append(fd)
            return fd

    file = CountingFile(path)
    opened.clear()
    start = write_batch(file, None, b'{"a":1}\n', True, start_writeback=True)
    assert start == len(HEADER) + 1
    assert len(opened) == 1 and (file.writes, file.syncs) == (1, 1)
    assert open_descriptors_of(path) == 0
    file.close()
    with pytest.raises(ValueError, match="closed"):
        file.write(b"x\n")
    assert path.read_bytes() == HEADER + b'\n{"a":1}\n'


def test_a_symbolic_link_swapped_in_is_followed_to_what_it_names(tmp_path: Path) -> None:
    """The rule of :func:`~pitrio.actors.session_store.paths.path_refusal` holds between
    batches too: a link is judged by what it leads to. To the session file itself (moved
    aside): the same file, still appended to. To another regular file, or to a node of our
    own: refused, and neither is written."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    file = AppendFile(path)
    moved = tmp_path / "moved.jsonl"
    os.replace(path, moved)
    path.symlink_to(moved)
    write_batch(file, None, b'{"a":1}\n', True)
    assert moved.read_bytes() == HEADER + b'\n{"a":1}\n'
    other = tmp_path / "other.jsonl"
    other.write_bytes(HEADER + b"\n")
    path.unlink()
    path.symlink_to(other)
    with pytest.raises(SessionFileReplacedError, match="another file was put in place"):
        write_batch(file, None, b'{"b":2}\n', True)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    path.unlink()
    path.symlink_to(fifo)
    with pytest.raises(SessionFileReplacedError, match="not a session file: a FIFO"):
        write_batch(file, None, b'{"c":3}\n', True)
    path.unlink()
    path.symlink_to(tmp_path / "nothing")
    with pytest.raises(SessionFileReplacedError, match="was removed since it was opened"):
        write_batch(file, None, b'{"d":4}\n', True)
    assert other.read_bytes() == HEADER + b"\n"
    assert moved.read_bytes() == HEADER + b'\n{"a":1}\n'
    assert (file.writes, file.syncs) == (1, 1)
    assert open_descriptors_of(moved) == 0


def test_a_deferred_fsync_after_a_swap_is_refused_and_leaves_the_other_file(
    tmp_path: Path,
) -> None:
    """Policy ``batch``: the fsync comes later, through a descriptor opened then. If another
    file was put in place meanwhile, that fsync is refused naming the path (the batch went to
    the file first opened, which no longer has the name), and the cut-back after a failed
    fsync does not touch the other file."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")
    file = AppendFile(path)
    start = write_batch(file, None, b'{"a":1}\n', False)
    assert (file.writes, file.syncs) == (1, 0)
    moved = tmp_path / "moved.jsonl"
    os.replace(path, moved)
    other = tmp_path / "other"
    other.write_bytes(b"someone else's file\n")
    os.replace(other, path)
    with pytest.raises(SessionFileReplacedError, match="another file was put in place") as failed:
        sync_batch(file, start)
    assert str(path) in str(failed.value)
    assert path.read_bytes() == b"someone else's file\n"
    assert moved.read_bytes() == HEADER + b'\n{"a":1}\n'
    assert file.syncs == 0
    assert open_descriptors_of(path) == 0 and open_descriptors_of(moved) == 0


def test_a_failed_write_is_cut_back_through_the_batch_s_descriptor(tmp_path: Path) -> None:
    """A write that fails after the kernel took part of the batch (a full disk) is cut back
    to where the batch started, on the descriptor the batch opened, which is then closed."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(HEADER + b"\n")

    class FullDisk(AppendFile):
        def write(self, data: bytes) -> None:
            with self.held() as fd:
                os.write(fd, data[:3])  # the torn part
            raise OSError(28, "No space left on device")

    file = FullDisk(path)
    with pytest.raises(OSError, match="No space left"):
        write_batch(file, None, b'{"a":1}\n', True)
    assert path.read_bytes() == HEADER + b"\n"
    assert (file.writes, file.syncs) == (0, 0)
    assert open_descriptors_of(path) == 0


def test_a_bulk_load_is_frozen_only_where_the_process_asked_for_it() -> None:
    # Issue 38: RPC mode (one session per process) freezes a resumed transcript's decoded
    # messages; a process serving many sessions leaves its collector alone.
    import gc

    from pitrio.actors.session_store import storage

    enabled = gc.isenabled()
    gc.enable()
    try:
        frozen = gc.get_freeze_count()
        with storage.gc_paused():
            assert not gc.isenabled()
            made = [[index] for index in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        storage.freeze_bulk_loads()
        with storage.gc_paused():  # a turn's: never frozen
            made += [[index] for index in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() == frozen
        with storage.gc_paused(lasting=True):
            made += [[index] for index in range(1000)]
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(made)
    finally:
        storage._FREEZE_LOADS[0] = False
        gc.unfreeze()
        if not enabled:
            gc.disable()
