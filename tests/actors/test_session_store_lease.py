"""One live writer per session (pitrio/actors/session_store/lease.py), with real processes."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pitrio.actors.procfs import start_time
from pitrio.actors.session_store import lease as lease_module
from pitrio.actors.session_store.lease import (
    Lease,
    LeaseRecord,
    lock_path,
    read_lease,
)
from pitrio.errors import SessionLockedError, SessionPathError, StaleFenceError

HOLDER = """
import sys
from pathlib import Path
from pitrio.actors.session_store.lease import Lease
lease = Lease.acquire(Path(sys.argv[1]))
print(lease.fence, flush=True)
sys.stdin.read()
lease.release()
"""


@pytest.fixture
def session(tmp_path: Path) -> Path:
    return tmp_path / "s.jsonl"


def spawn_holder(session: Path) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(session)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, int(process.stdout.readline())


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_acquire_release_and_the_counter(session: Path) -> None:
    lease = Lease.acquire(session)
    assert lease.fence == 1
    record = read_lease(session)
    assert record is not None and not record.released
    assert record.pid == os.getpid() and record.host == socket.gethostname()
    assert record.started == start_time(os.getpid())
    assert lock_path(session).name == "s.jsonl.lock"
    lease.check()
    lease.close()  # what a crash does: the record stays, unreleased
    assert read_lease(session) == record
    again = Lease.acquire(session)  # taken over from the dead holder: the counter goes on
    assert again.fence == 2
    again.release()


def test_a_clean_release_removes_the_lock_file(session: Path) -> None:
    # Issue 21: pi's users see the session directory; a writer that closed leaves nothing.
    lease = Lease.acquire(session)
    assert lock_path(session).exists()
    lease.release()
    assert not lock_path(session).exists() and read_lease(session) is None
    assert list(session.parent.iterdir()) == []
    again = Lease.acquire(session)  # a fresh lock file: the counter starts again
    assert again.fence == 1
    again.release()
    assert not lock_path(session).exists()


def test_a_lock_file_removed_under_its_writer_makes_the_writer_stale(session: Path) -> None:
    # Someone deletes the lock file of a live writer: the next writer gets a new file (fence 1
    # again); the old one must not go on writing beside it with its equal fence.
    old = Lease.acquire(session)
    lock_path(session).unlink()
    new = Lease.acquire(session)
    assert new.fence == old.fence == 1
    new.check()
    with pytest.raises(StaleFenceError, match="lock file was removed or replaced"):
        old.check()
    old.release()  # not its file any more: the new holder's stays
    assert read_lease(session) is not None
    new.check()
    new.release()
    assert not lock_path(session).exists()


def test_a_file_removed_between_open_and_lock_is_not_a_lease(
    session: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The holder closes cleanly (removes the file) just after a newcomer opened it: the
    # newcomer's lock on the removed file must not count, or a third writer could create a
    # new file and lock that too.
    first = Lease.acquire(session)
    real_flock = lease_module.fcntl.flock
    calls = 0

    def flock(fd: int, operation: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            first.release()  # its own flock calls happen inside: count only this one
        real_flock(fd, operation)

    monkeypatch.setattr(lease_module.fcntl, "flock", flock)
    second = Lease.acquire(session)
    monkeypatch.undo()
    second.check()  # the lock file at the name is the one it locked
    with pytest.raises(SessionLockedError, match=f"pid {os.getpid()} "):
        Lease.acquire(session)
    second.release()
    assert not lock_path(session).exists()


def test_a_second_writer_is_told_who_holds_it(session: Path) -> None:
    lease = Lease.acquire(session)
    try:
        with pytest.raises(SessionLockedError) as caught:
            Lease.acquire(session)
        error = caught.value
        assert error.pid == os.getpid() and error.host == socket.gethostname() and error.fence == 1
        assert f"is being written by pid {os.getpid()} on host {socket.gethostname()}" in str(error)
        assert "lease 1" in str(error) and "read-only" in str(error)
    finally:
        lease.release()


def test_another_process_holding_it_is_refused(
    session: Path, holders: list[subprocess.Popen[str]]
) -> None:
    process, fence = spawn_holder(session)
    holders.append(process)
    with pytest.raises(SessionLockedError, match=f"pid {process.pid} "):
        Lease.acquire(session)
    assert process.stdin is not None
    process.stdin.close()
    assert process.wait() == 0
    assert not lock_path(session).exists()  # released cleanly: nothing left behind
    lease = Lease.acquire(session)
    assert lease.fence == fence == 1
    lease.release()


def test_a_dead_holders_lease_is_taken_over(
    session: Path, holders: list[subprocess.Popen[str]]
) -> None:
    process, fence = spawn_holder(session)
    holders.append(process)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    record = read_lease(session)
    assert record is not None and not record.released and record.pid == process.pid
    lease = Lease.acquire(session)
    assert lease.fence == fence + 1
    lease.release()


def test_a_holder_killed_and_not_yet_reaped_does_not_hold_the_lease(
    session: Path, holders: list[subprocess.Popen[str]]
) -> None:
    # A zombie (dead, its pid kept until its parent reaps it) has let go of its flock: a
    # worker of a SIGKILLed `serve --workers` acceptor stays one, as nobody reaps it.
    process, fence = spawn_holder(session)
    holders.append(process)
    os.kill(process.pid, signal.SIGKILL)
    os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped
    assert (Path(f"/proc/{process.pid}/stat").read_text().split(") ")[1][0]) == "Z"
    lease = Lease.acquire(session)
    assert lease.fence == fence + 1
    lease.release()


def write_record(session: Path, **fields: object) -> None:
    lock_path(session).write_bytes(LeaseRecord(**fields).to_bytes())  # type: ignore[arg-type]


def test_unreleased_record_of_a_live_process_without_the_lock_is_refused(session: Path) -> None:
    # e.g. a writer that was forced in (take_over) while another held the lock
    parent = os.getppid()
    write_record(session, pid=parent, host=socket.gethostname(), fence=4, released=False)
    with pytest.raises(SessionLockedError, match=f"pid {parent} "):
        Lease.acquire(session)


def test_a_reused_pid_does_not_hold_the_lease(session: Path) -> None:
    parent = os.getppid()
    started = start_time(parent)
    assert started is not None
    write_record(
        session, pid=parent, host=socket.gethostname(), fence=4, released=False, started=started + 1
    )
    lease = Lease.acquire(session)
    assert lease.fence == 5
    lease.release()


def test_a_lease_from_another_host_is_not_guessed_at(session: Path) -> None:
    write_record(session, pid=1, host="elsewhere", fence=7, released=False)
    with pytest.raises(SessionLockedError, match="another host") as caught:
        Lease.acquire(session)
    assert caught.value.host == "elsewhere"
    lease = Lease.acquire(session, take_over=True)
    assert lease.fence == 8
    lease.release()


def test_take_over_makes_the_old_holder_stale(session: Path) -> None:
    old = Lease.acquire(session)
    new = Lease.acquire(session, take_over=True)
    assert new.fence == old.fence + 1
    new.check()
    with pytest.raises(StaleFenceError, match=r"lease 1 is stale: .* holds lease 2"):
        old.check()
    old.release()  # does not clear the new holder's record
    record = read_lease(session)
    assert record is not None and record.fence == 2 and not record.released
    new.release()


def test_a_check_that_passed_does_not_vouch_for_a_record_rewritten_since(session: Path) -> None:
    """Each check reads the lock file again: a record rewritten in place after checks that
    passed (another fence, in as many bytes) makes the next check fail, and the writer's own
    record written back makes it pass again."""
    lease = Lease.acquire(session)
    lease.check()
    lease.check()
    ours = lock_path(session).read_bytes()
    other = ours.replace(b'"fence":1', b'"fence":7')
    assert other != ours and len(other) == len(ours)
    with open(lock_path(session), "r+b") as file:  # the same file, as a take-over writes it
        file.write(other)
    with pytest.raises(StaleFenceError, match=r"lease 1 is stale: .* holds lease 7"):
        lease.check()
    with open(lock_path(session), "r+b") as file:
        file.write(ours)
    lease.check()
    lease.release()


def test_an_unreadable_record_counts_as_released(session: Path) -> None:
    lock_path(session).write_bytes(b"\x00garbage")
    lease = Lease.acquire(session)
    assert lease.fence == 1
    lease.release()
    assert not lock_path(session).exists()


def _untouched(path: Path) -> tuple[int, int, int, int]:
    seen = os.lstat(path)
    return seen.st_mode, seen.st_ino, seen.st_size, seen.st_mtime_ns


@pytest.mark.parametrize("kind", ["symlink", "fifo", "device", "directory", "socket"])
def test_a_lock_name_that_is_not_a_regular_file_is_refused_untouched(
    session: Path, tmp_path: Path, kind: str
) -> None:
    """The record is written into whatever the lock name opens: as root, a lock name linked
    to a file elsewhere would have that file overwritten. Every such name is refused, naming
    the path, and nothing is written or left blocking (issue 21). The nodes are the test's
    own, made in a temporary directory."""
    lock = lock_path(session)
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"precious\n")
    holder = None
    if kind == "symlink":
        lock.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "device":
        os.mknod(lock, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    elif kind == "directory":
        lock.mkdir()
    else:
        holder = socket.socket(socket.AF_UNIX)
        holder.bind(str(lock))
    before = _untouched(lock), _untouched(target)
    try:
        with pytest.raises(SessionPathError) as refused:
            Lease.acquire(session)
    finally:
        if holder is not None:
            holder.close()
    assert str(lock) in str(refused.value) and "not a lock file" in str(refused.value)
    assert (_untouched(lock), _untouched(target)) == before
    assert target.read_bytes() == b"precious\n"
