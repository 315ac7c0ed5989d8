"""Child process groups of a session's tools, and how to end one so nothing survives.

Every command a tool runs gets its own process group (``start_new_session``), so the command,
its children and their children can be signalled together. Ending a group: ``SIGTERM`` to the
group, a short grace for it to exit, then ``SIGKILL`` to whatever is left, and the leader is
reaped. :class:`ProcessGroups` remembers the groups a session started that may still have
members (a command that left ``server &`` behind) so the session's end can end them too.

A group is signalled by number, and a number is free for a new process once the group's last
member is gone and its leader reaped (``pid_max`` is often 32,768: a busy machine wraps it in
minutes). So a group is never signalled once its number may belong to another: while its
leader is unreaped (a zombie still holds its number, and so its group's) :func:`terminate_group`
does not reap it, and a group whose leader is reaped is signalled only while no process has
that number (:func:`_pinned`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Protocol

import trio

from pitrio.actors.procfs import ENDED_STATES, proc_stat, start_time
from pitrio.actors.tool_executor.ledger import ledger
from pitrio.messages.ostext import check_environment, check_os_text, check_os_texts

KILL_GRACE_S = 0.5
"""How long a group gets between ``SIGTERM`` and ``SIGKILL``."""

_POLL_S = 0.01

_LINUX = sys.platform.startswith("linux")


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False if the group no longer exists."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed credentials: nothing more we may do to it
        return False
    return True


def _live_members(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is alive (zombies do not count).

    On Linux the process table is read, since orphaned zombies awaiting their reaper still
    answer ``kill(0)``; elsewhere ``kill(0)`` is the best available answer.
    """
    if not _signal_group(pgid, 0):
        return False
    if not sys.platform.startswith("linux"):
        return True
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True
    for pid in pids:
        fields = proc_stat(int(pid))  # None: it ended while we looked
        if fields and len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in ENDED_STATES:
            return True
    return False


async def group_alive(pgid: int) -> bool:
    """:func:`_live_members` off the event loop (it reads the process table)."""
    return await trio.to_thread.run_sync(_live_members, pgid)


def _pinned(pgid: int, leader: Leader | None) -> Callable[[], bool]:
    """Whether number ``pgid`` is still its group's, asked at each signal: while ``leader``
    (given, on Linux) is unreaped, always; otherwise while no process has that pid. A reaped
    leader's pid is not given out while a member of its group lives; once a process has it,
    the group is gone. Without ``/proc`` (not Linux) that cannot be read: assumed."""
    if leader is not None and _LINUX and _holds_its_pid(leader):
        return lambda: True
    return lambda: start_time(pgid) is None


def _holds_its_pid(leader: Leader) -> bool:
    """Whether ``leader`` is still an unreaped child of ours (so its pid is its own)."""
    if isinstance(leader, SpawnedProcess) and leader.reaped:
        return False  # reaped long ago, its pid may be a newer child's by now
    return _unreaped(leader.pid)


def _unreaped(pid: int) -> bool:
    """Whether ``pid`` is a child of ours not yet reaped (running, or a zombie); it is not
    reaped here."""
    try:
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


async def _wait_group_gone(pgid: int, deadline: float, ours: Callable[[], bool]) -> bool:
    """Poll until the group has no live member (or is no longer ``ours``) or ``deadline``
    passes; True if it is gone."""
    # The kernel has no "group became empty" notification to wait on, so poll the table.
    with trio.move_on_at(deadline):
        while ours() and await group_alive(pgid):  # noqa: ASYNC110
            await trio.sleep(_POLL_S)
        return True
    return False


class Leader(Protocol):
    """What :func:`terminate_group` needs of a group's leader (``trio.Process`` has it)."""

    pid: int

    @property
    def returncode(self) -> int | None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...


class SpawnedProcess:
    """A command started on the event loop's thread, its output merged into one pipe.

    ``trio.lowlevel.open_process`` starts every process from a worker thread: the hop and the
    wait for the interpreter lock cost more than the spawn itself (``vfork`` and ``exec``, a
    few hundred microseconds; issue 7: the bash turn). Here the spawn blocks the loop for that
    long instead, and the exit is awaited on a pidfd (Linux 5.3+), as trio does.
    """

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        stdout: trio.lowlevel.FdStream,
        stderr: trio.lowlevel.FdStream | None = None,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        """stderr's own pipe (:func:`spawn_split`); ``None`` when merged into stdout."""
        self._pidfd: int | None = os.pidfd_open(popen.pid)
        self._wait_lock = trio.Lock()

    @property
    def returncode(self) -> int | None:
        """The exit status once it has exited (negative: the signal that ended it)."""
        return self._popen.poll()

    @property
    def reaped(self) -> bool:
        """Whether it was reaped (its pid given back); it is not reaped by asking."""
        return self._popen.returncode is not None

    def kill(self) -> None:
        """``SIGKILL`` the process itself (its group is :func:`terminate_group`'s business)."""
        if self._popen.returncode is None:
            self._popen.kill()

    async def wait(self) -> int:
        """Wait for the exit and reap the process; returns its exit status."""
        async with self._wait_lock:
            if self._pidfd is not None:
                try:
                    await trio.lowlevel.wait_readable(self._pidfd)
                finally:
                    if self._popen.poll() is not None:
                        os.close(self._pidfd)
                        self._pidfd = None
        code = self._popen.returncode
        assert code is not None
        return code


def can_spawn_inline() -> bool:
    """Whether :func:`spawn_merged` can be used here (pidfds exist)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


async def open_merged(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None
) -> SpawnedProcess | trio.Process:
    """Start ``argv`` in its own process group (so it can be ended with all its children),
    stdin from ``/dev/null``, stdout and stderr merged in one pipe: on the loop's thread
    where pidfds exist (:func:`spawn_merged`), else through trio. ``env=None``: ours.

    Raises :class:`~pitrio.errors.UnencodableTextError` for an argument, ``cwd`` or environment
    entry the OS cannot take (callers check what clients and models gave first, strictly and
    with their own names; here names the OS gave, bytes kept by ``surrogateescape``, pass)."""
    return await _open(argv, cwd=cwd, env=env, split=False)


async def open_split(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None
) -> SpawnedProcess | trio.Process:
    """:func:`open_merged` with stdout and stderr on pipes of their own (``.stdout``,
    ``.stderr``), for a reader that tells them apart (the user's ``bash``, as pi 1.6.0)."""
    return await _open(argv, cwd=cwd, env=env, split=True)


async def _open(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None, split: bool
) -> SpawnedProcess | trio.Process:
    check_os_texts(argv, "argument", from_os=True)
    check_os_text(cwd, "cwd", from_os=True)
    if env is not None:
        check_environment(env, from_os=True)
    if can_spawn_inline():
        await trio.lowlevel.checkpoint_if_cancelled()
        return _spawn(argv, cwd=cwd, env=env, split=split)
    return await trio.lowlevel.open_process(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if split else subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )


def spawn_merged(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None
) -> SpawnedProcess:
    """Start ``argv`` in its own process group, stdin from ``/dev/null``, stdout and stderr
    into one pipe (see :class:`SpawnedProcess`). Raises ``OSError`` if it cannot start."""
    return _spawn(argv, cwd=cwd, env=env, split=False)


def spawn_split(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None = None
) -> SpawnedProcess:
    """:func:`spawn_merged` with stdout and stderr on pipes of their own."""
    return _spawn(argv, cwd=cwd, env=env, split=True)


def _spawn(
    argv: Sequence[str], *, cwd: str, env: Mapping[str, str] | None, split: bool
) -> SpawnedProcess:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe() if split else (None, out_write)
    reads = [fd for fd in (out_read, err_read) if fd is not None]
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except BaseException:
        for fd in reads:
            os.close(fd)
        raise
    finally:
        os.close(out_write)
        if split:
            os.close(err_write)
    try:
        stdout = trio.lowlevel.FdStream(out_read)
        stderr = None if err_read is None else trio.lowlevel.FdStream(err_read)
        return SpawnedProcess(popen, stdout, stderr)
    except BaseException:
        for fd in reads:
            with contextlib.suppress(OSError):  # one a stream already owns may be closed
                os.close(fd)
        popen.kill()
        popen.wait()
        raise


async def terminate_group(
    pgid: int, leader: Leader | None = None, *, grace: float = KILL_GRACE_S
) -> None:
    """End group ``pgid``: ``SIGTERM``, up to ``grace`` seconds, then ``SIGKILL``; reap ``leader``.

    The grace is one deadline for the leader and the rest of the group together: a group that
    ignores ``SIGTERM`` gets its ``SIGKILL`` ``grace`` seconds after it, not twice that.
    ``leader``, if not reaped yet, is reaped only once the group is empty and no signal is
    left to send, so the number cannot pass to another group while it is signalled. A group
    whose leader was reaped (or not given) is signalled only while no process has its number.
    Call it shielded when cleaning up after a cancellation.
    """
    ours = _pinned(pgid, leader)
    # Linux only: elsewhere a zombie leader cannot be told from a live member (kill(0) is all
    # there is), so the leader is reaped first, as it always was there.
    reap_first = leader is not None and not _LINUX
    if ours() and _signal_group(pgid, signal.SIGTERM):
        deadline = trio.current_time() + grace
        if leader is not None and reap_first:
            with trio.move_on_at(deadline):
                await leader.wait()
        if not await _wait_group_gone(pgid, deadline, ours) and ours():
            _signal_group(pgid, signal.SIGKILL)
            await _wait_group_gone(pgid, trio.current_time() + grace, ours)
    if leader is not None:
        if leader.returncode is None:  # reaps it if it exited: no signal to the group follows
            leader.kill()  # the leader escaped the group signal (it cannot, but be sure)
        await leader.wait()


class ProcessGroups:
    """The process groups a session's tools started that may still have members.

    Owned by the session's tool executor; tool bodies add and drop groups synchronously. Each
    group is kept with its leader, so that its number is signalled only while it is still the
    group's (:func:`_pinned`): a number that passed to a newer process is forgotten.
    """

    def __init__(self) -> None:
        self._groups: dict[int, Leader | None] = {}

    def add(self, pgid: int, leader: Leader | None = None) -> None:
        """Track a newly started group and its leader (``pid`` ``pgid``). Without the leader,
        the group is signalled only while no process has its number: once the leader has been
        reaped (given one that is still running, it would never be)."""
        self._groups[pgid] = leader
        if (record := ledger()) is not None:
            record.record(pgid)

    def discard(self, pgid: int) -> None:
        """Stop tracking a group that is known to be empty."""
        self._groups.pop(pgid, None)
        if (record := ledger()) is not None:
            record.forget(pgid)

    def tracked(self) -> frozenset[int]:
        """The groups currently tracked."""
        return frozenset(self._groups)

    def prune(self) -> None:
        """Forget groups with no process left, or whose number another process now has (so a
        reused id is never signalled later)."""
        # The probe first: it is all an emptied group costs (after every command), and a
        # probe delivers nothing, to a stranger or anyone.
        gone = {
            pgid
            for pgid, leader in self._groups.items()
            if not _signal_group(pgid, 0) or not _pinned(pgid, leader)()
        }
        for pgid in gone:
            self.discard(pgid)

    async def terminate_all(self, *, grace: float = KILL_GRACE_S) -> None:
        """End every tracked group (concurrently) and forget them all."""
        groups, self._groups = self._groups, {}
        async with trio.open_nursery() as nursery:
            for pgid, leader in groups.items():
                nursery.start_soon(partial(terminate_group, pgid, leader, grace=grace))
        if (record := ledger()) is not None:
            for pgid in groups:
                record.forget(pgid)
