"""The on-disk record of tool process groups, and the reaping of a killed owner's groups."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pitrio.actors.procfs import is_live, start_time
from pitrio.actors.tool_executor import ledger
from pitrio.actors.tool_executor.ledger import GroupLedger, reap_orphans

OWNER = r"""
import subprocess, sys, time
from pathlib import Path
from pitrio.actors.tool_executor.ledger import record_groups_in, ledger
record_groups_in(Path(sys.argv[1]))
child = subprocess.Popen(["sleep", "300"], start_new_session=True)
ledger().record(child.pid)
print(child.pid, flush=True)
time.sleep(300)
"""


def _wait_ended(pidfd: int, seconds: float = 5.0) -> bool:
    """Whether the process behind ``pidfd`` ends within ``seconds``. A pidfd, not a pid: the
    orphan is reaped by init, and its number may then be another process's at once."""
    readable, _, _ = select.select([pidfd], [], [], seconds)
    return bool(readable)


@contextlib.contextmanager
def _orphan(pid: int) -> Iterator[int]:
    """A pidfd of the test's orphan; it is killed at the end through it, never by number (a
    reused number could be any process's on the machine: another test's, say)."""
    pidfd = os.pidfd_open(pid)
    try:
        yield pidfd
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        os.close(pidfd)


def test_a_killed_owners_groups_are_reaped_and_a_live_owners_kept(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    with _orphan(pgid) as orphan:
        try:
            assert reap_orphans(tmp_path) == []  # the owner runs: its group is left alone
            assert is_live(pgid)
            owner.kill()
            owner.wait()
            assert reap_orphans(tmp_path) == [pgid]
            assert _wait_ended(orphan)
            assert list(tmp_path.iterdir()) == []  # the record is gone too
        finally:
            owner.kill()
            owner.wait()


def test_a_reused_pid_is_not_killed(tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        started = start_time(bystander.pid)
        assert started is not None
        # A record from a dead owner naming this pid, but made for an older process.
        (tmp_path / f"999999999-1-{bystander.pid}").write_text(str(started - 1))
        assert reap_orphans(tmp_path) == []
        assert is_live(bystander.pid)
        assert list(tmp_path.iterdir()) == []
    finally:
        bystander.kill()
        bystander.wait()


def test_recording_and_forgetting(tmp_path: Path) -> None:
    ledger = GroupLedger(tmp_path / "groups")
    ledger.record(os.getpid())
    (record,) = (tmp_path / "groups").iterdir()
    assert record.read_text() == str(start_time(os.getpid()))
    ledger.forget(os.getpid())
    assert list((tmp_path / "groups").iterdir()) == []
    assert reap_orphans(tmp_path / "missing") == []


UNRECORDED_OWNER = r"""
import subprocess, sys, time
from pathlib import Path
from pitrio.actors.tool_executor.ledger import record_groups_in
record_groups_in(Path(sys.argv[1]))
# Killed before it could record the group: only the inherited marker names its owner.
child = subprocess.Popen(["sleep", "300"], start_new_session=True)
print(child.pid, flush=True)
time.sleep(300)
"""


def test_a_group_the_owner_never_recorded_is_found_by_its_environment(tmp_path: Path) -> None:
    owner = subprocess.Popen(
        [sys.executable, "-c", UNRECORDED_OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    with _orphan(pgid) as orphan:
        try:
            assert list(tmp_path.iterdir()) == []  # no record was written
            assert pgid not in reap_orphans(tmp_path)  # the owner still runs
            owner.kill()
            owner.wait()
            assert not _wait_ended(orphan, 0)  # the orphan outlived its owner
            assert pgid in reap_orphans(tmp_path)
            assert _wait_ended(orphan)
        finally:
            owner.kill()
            owner.wait()


def test_orphans_of_another_record_directory_are_left_alone(tmp_path: Path) -> None:
    # The marker names the owner's record directory: a daemon reaps only the orphans of owners
    # that recorded where it does, not those of another agent directory's (or a test's) owner.
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    owner = subprocess.Popen(
        [sys.executable, "-c", UNRECORDED_OWNER, str(theirs)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    with _orphan(pgid) as orphan:
        try:
            owner.kill()
            owner.wait()
            assert pgid not in reap_orphans(mine)  # another directory's orphan
            assert not _wait_ended(orphan, 0)  # still running
            assert pgid in reap_orphans(theirs)  # its own directory's successor reaps it
            assert _wait_ended(orphan)
        finally:
            owner.kill()
            owner.wait()


def test_an_orphan_that_ends_during_the_scan_is_not_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scan of every process's environment takes a while; a group found in it that ends
    before the kill may have left its number to a stranger, so it is not signalled. The orphan
    is made to end just after the scan saw it; every ``killpg`` is recorded."""
    owner = subprocess.Popen(
        [sys.executable, "-c", UNRECORDED_OWNER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    signalled: list[int] = []
    real_scan = ledger._marked_orphans

    def scan_then_end(scope: str) -> object:
        found = real_scan(scope)
        assert pgid in found  # seen by the scan, alive
        signal.pidfd_send_signal(orphan, signal.SIGKILL)
        assert _wait_ended(orphan)
        return found

    def killpg(number: int, signum: int) -> None:
        signalled.append(number)

    with _orphan(pgid) as orphan:
        try:
            owner.kill()
            owner.wait()
            monkeypatch.setattr(ledger, "_marked_orphans", scan_then_end)
            monkeypatch.setattr(ledger.os, "killpg", killpg)
            assert reap_orphans(tmp_path) == []
            assert signalled == []
        finally:
            owner.kill()
            owner.wait()
