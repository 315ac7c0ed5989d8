"""A record on disk of the process groups tools started, so a process killed with SIGKILL
leaves nothing running once the next one starts (issue 10: no orphan process).

A process that records (the daemon) writes one small file per live group,
``<directory>/<owner pid>-<owner start>-<pgid>``, holding the group leader's start time, and
removes it when the group is gone. SIGKILL gives no chance to clean up, so the next process
calls :func:`reap_orphans` before it serves: every file whose owner is no longer running
names a group to kill, unless the pid was reused since (the leader's start time differs).
Start times are the kernel's (``/proc/<pid>/stat`` field 22, in clock ticks since boot), which
two processes with the same pid cannot share.
"""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path

from pitrio.actors.procfs import ENDED_STATES, proc_stat, start_time


def _running(pid: int, started: str) -> bool:
    """Whether ``pid`` is the process that started at ``started`` and still runs (a zombie
    waiting for its parent to reap it has ended)."""
    fields = proc_stat(pid)
    if fields is None or len(fields) <= 19:
        return False
    return fields[0] not in ENDED_STATES and fields[19].decode() == started


OWNER_VARIABLE = "PITRIO_TOOL_OWNER"
"""Set in every tool process's environment to ``<owner pid>-<owner start>-<scope>``: a
process that inherits it can be found even when its owner was killed before it wrote the
group's record (a tool's shell may start its command before the owner has recorded the group).
``<scope>`` names the record directory (:func:`ledger_scope`), so a process reaps only the
orphans of owners that recorded where it does: other agent directories' processes (another
daemon, a test running beside it) are not its to kill."""


def ledger_scope(directory: Path) -> str:
    """A short name of a record directory, the same for every process that records there."""
    resolved = os.path.realpath(directory)
    try:  # the C module itself: hashlib would load OpenSSL first (start-up cost)
        from _blake2 import blake2b
    except ImportError:  # pragma: no cover - another Python
        from hashlib import blake2b
    return blake2b(os.fsencode(resolved), digest_size=6).hexdigest()


class GroupLedger:
    """This process's groups, one file each under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._owner = f"{os.getpid()}-{start_time(os.getpid())}"
        self._marker = f"{self._owner}-{ledger_scope(directory)}"

    @property
    def owner(self) -> str:
        """This process as a record names it (``<pid>-<start time>``)."""
        return self._owner

    @property
    def marker(self) -> str:
        """What its tool processes carry in :data:`OWNER_VARIABLE`."""
        return self._marker

    def _path(self, pgid: int) -> Path:
        return self.directory / f"{self._owner}-{pgid}"

    def record(self, pgid: int) -> None:
        """Note a newly started group (its leader's pid is ``pgid``)."""
        with contextlib.suppress(OSError):  # a missing record costs a reap, not correctness
            self._path(pgid).write_text(str(start_time(pgid) or ""))

    def forget(self, pgid: int) -> None:
        """The group is gone (or was ended by this process)."""
        with contextlib.suppress(OSError):
            self._path(pgid).unlink()


def _marked_orphans(scope: str) -> dict[int, list[tuple[int, str]]]:
    """Process groups of processes whose environment names an owner of ``scope`` that no
    longer runs: each with those processes (pid and start time)."""
    marker = OWNER_VARIABLE.encode() + b"="
    groups: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        for variable in environ.split(b"\0"):
            if not variable.startswith(marker):
                continue
            parts = variable[len(marker) :].decode(errors="replace").split("-")
            if len(parts) != 3 or parts[2] != scope:
                break  # another directory's owner (or an older format): not ours
            owner, started = parts[0], parts[1]
            pid = int(entry.name)
            since = start_time(pid)
            if owner.isdigit() and not _running(int(owner), started) and since is not None:
                with contextlib.suppress(OSError):
                    groups.setdefault(os.getpgid(pid), []).append((pid, str(since)))
            break
    return groups


def _still_in(pgid: int, members: list[tuple[int, str]]) -> bool:
    """Whether one of ``members`` (pid, start time) still runs in group ``pgid``: then the
    number is still that group's (no new process gets a number a live member's group has)."""
    for pid, started in members:
        with contextlib.suppress(OSError):
            if _running(pid, started) and os.getpgid(pid) == pgid:
                return True
    return False


def reap_orphans(directory: Path) -> list[int]:
    """Kill (SIGKILL) the groups of tool processes whose owner no longer runs: those recorded
    under ``directory`` (removing the records) and those whose environment names such an
    owner; the groups killed."""
    killed: list[int] = []
    for pgid, members in _marked_orphans(ledger_scope(directory)).items():
        if pgid in (os.getpgid(0), 0, 1):
            continue  # never our own group (a daemon started by a killed one's shell)
        # The scan read all of /proc since it saw them: a group that ended meanwhile may have
        # left its number to a stranger. Checked again just before the signal.
        if not _still_in(pgid, members):
            continue
        try:
            os.killpg(pgid, signal.SIGKILL)
            killed.append(pgid)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        names = [path.name for path in directory.iterdir()]
    except OSError:
        return killed
    for name in names:
        parts = name.split("-")
        if len(parts) != 3 or not all(part.isdigit() or part == "None" for part in parts):
            continue
        owner, owner_start, pgid = int(parts[0]), parts[1], int(parts[2])
        if _running(owner, owner_start):
            continue
        path = directory / name
        try:
            recorded = path.read_text().strip()
        except OSError:
            continue
        leader = start_time(pgid)
        # A leader with another start time means the pid was reused: not ours to kill. A
        # leader that exited may have left members behind: the group id cannot have been
        # reused while they live, so signalling it is safe.
        if pgid not in killed and (leader is None or str(leader) == recorded):
            try:
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        with contextlib.suppress(OSError):
            path.unlink()
    return killed


_ledger: GroupLedger | None = None


def record_groups_in(directory: Path | None) -> None:
    """Record this process's tool groups under ``directory`` from now on (``None``: stop),
    and mark the processes it starts from now on (:data:`OWNER_VARIABLE`, inherited through
    the environment). Process-wide on purpose: the groups are this OS process's children,
    whichever session started them."""
    global _ledger
    _ledger = None if directory is None else GroupLedger(directory)
    if _ledger is None:
        os.environ.pop(OWNER_VARIABLE, None)
    else:
        os.environ[OWNER_VARIABLE] = _ledger.marker


def ledger() -> GroupLedger | None:
    """The process's ledger, if recording."""
    return _ledger
