"""A process group is signalled by number, and never once that number may be another's.

A group's number is free for a new process once its last member is gone and its leader is
reaped; on a busy machine (``pid_max`` 32,768) it is soon given out again, often to a new
session leader, whose group then has that number. The signals are observed through
``processes._signal_group`` (every ``killpg`` goes through it, the ``kill(0)`` probes too).
"""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path

import pytest
import trio

from pitrio.actors.direct_io import DirectReader
from pitrio.actors.tool_executor import processes
from pitrio.actors.tool_executor.processes import (
    ProcessGroups,
    can_spawn_inline,
    spawn_merged,
    terminate_group,
)

pytestmark = pytest.mark.skipif(not can_spawn_inline(), reason="needs pidfds (Linux 5.3+)")


def _reaped(pid: int) -> bool:
    """Whether our child ``pid`` was reaped (its number given back); it is not reaped here."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def _ended_within(seconds: float, pidfd: int) -> bool:
    """Whether the process behind ``pidfd`` ends within ``seconds`` (a pidfd, not a number:
    the check cannot be misled by a reused pid)."""
    readable, _, _ = select.select([pidfd], [], [], seconds)
    return bool(readable)


def record_signals(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """From now on, each signal sent to a group as ``(pgid, signal)``, probes (signal 0,
    which delivers nothing) left out; the signals are still sent."""
    sent: list[tuple[int, int]] = []
    real_signal_group = processes._signal_group

    def recording(pgid: int, signum: int) -> bool:
        if signum:
            sent.append((pgid, signum))
        return real_signal_group(pgid, signum)

    monkeypatch.setattr(processes, "_signal_group", recording)
    return sent


async def test_a_group_is_signalled_only_while_its_leader_holds_its_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader exits at ``SIGTERM``; a member ignores it, so the ``SIGKILL`` after the
    grace is needed. Every signal (and probe) to the group goes out while the leader is
    unreaped: had it been reaped, the group's number could already be a stranger's."""
    sent: list[tuple[int, bool]] = []
    real_signal_group = processes._signal_group
    # The member prints its pid once it ignores SIGTERM; the leader waits for it.
    script = "(trap '' TERM; exec sh -c 'echo $$; exec sleep 30') & wait"
    process = spawn_merged(["sh", "-c", script], cwd=str(tmp_path), env=dict(os.environ))

    def recording(pgid: int, signum: int) -> bool:
        assert pgid == process.pid
        sent.append((signum, _reaped(process.pid)))
        return real_signal_group(pgid, signum)

    monkeypatch.setattr(processes, "_signal_group", recording)
    reader = DirectReader(process.stdout.fileno(), 64)
    line = b""
    while not line.endswith(b"\n"):
        line += await reader.read()
    member = os.pidfd_open(int(line))
    try:
        with trio.fail_after(20):
            await terminate_group(process.pid, process, grace=0.3)
        assert process.returncode == -signal.SIGTERM  # the leader went at the SIGTERM
        assert _ended_within(5.0, member)  # the member at the SIGKILL
    finally:
        os.close(member)
        await process.stdout.aclose()
    assert [signum for signum, _ in sent if signum] == [signal.SIGTERM, signal.SIGKILL]
    assert [reaped for _, reaped in sent] == [False] * len(sent)


async def test_a_tracked_group_whose_number_another_process_has_is_not_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tracked group whose leader was reaped (a command that left ``server &`` behind)
    outlives its members; its number then goes to a new process. Neither a prune nor the
    session's end may signal that one. The stranger here is a real session leader, not our
    child, so the number is another process's as after a reuse (the reuse itself cannot be
    forced); the tracked group is given that number, as the reuse would leave it."""
    # setsid in a background job (not a group leader) does not fork: $! is the stranger,
    # its own session and group, left to init once the shell exits.
    spawner = spawn_merged(
        ["sh", "-c", "setsid sleep 30 & echo $!"], cwd=str(tmp_path), env=dict(os.environ)
    )
    reader = DirectReader(spawner.stdout.fileno(), 64)
    line = b""
    while not line.endswith(b"\n"):
        line += await reader.read()
    assert await spawner.wait() == 0
    await spawner.stdout.aclose()
    number = int(line)
    stranger = os.pidfd_open(number)  # watched, and killed at the end, never by number
    try:
        with trio.fail_after(10):  # setsid runs before it execs sleep
            while os.getpgid(number) != number:  # noqa: ASYNC110
                await trio.sleep(0.01)
        sent = record_signals(monkeypatch)
        groups = ProcessGroups()
        groups.add(number)  # its leader long reaped: the number is free, as far as we know
        groups.prune()
        assert (sent, groups.tracked()) == ([], frozenset())
        groups.add(number)
        with trio.fail_after(20):
            await groups.terminate_all(grace=0.2)
        assert (sent, groups.tracked()) == ([], frozenset())
        assert not _ended_within(0, stranger)  # never signalled
    finally:
        signal.pidfd_send_signal(stranger, signal.SIGKILL)
        os.close(stranger)


async def test_a_reaped_leader_whose_pid_a_newer_child_has_does_not_pin_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tracked group's leader reaped long ago; its pid has since gone to a newer child of
    ours (a tool's server, say), unreaped, so the kernel answers for that one. The group is
    not taken for the leader's: it is not signalled. The reuse is made up by giving the reaped
    leader the newer child's pid."""
    leader = spawn_merged(["true"], cwd=str(tmp_path), env=dict(os.environ))
    assert await leader.wait() == 0
    await leader.stdout.aclose()
    newer = spawn_merged(["sleep", "30"], cwd=str(tmp_path), env=dict(os.environ))
    try:
        leader.pid = newer.pid  # as if the number had come round to it
        sent = record_signals(monkeypatch)
        groups = ProcessGroups()
        groups.add(newer.pid, leader)
        with trio.fail_after(20):
            await groups.terminate_all(grace=0.2)
        assert (sent, newer.returncode) == ([], None)  # never signalled
    finally:
        newer.kill()
        await newer.wait()
        await newer.stdout.aclose()
