"""One live writer per session file: a lease in a lock file beside it (pi has none: #8300, #8848).

The lock file ``<session>.jsonl.lock`` holds a small JSON record: the holder's ``pid`` and
``host``, a ``fence`` counter that grows by one with every acquisition, when it was acquired and
whether it was released. It exists only while the session has a writer, or after one that died:
a clean release removes it (issue 21: pi's users see the session directory), so the counter
lives as long as a run of writers that did not close cleanly, and a fresh file starts it again.

Mutual exclusion comes from an exclusive ``flock`` on the lock file, held for as long as the
lease: the kernel drops it when the holder dies, however it dies, so a dead holder's lease is
taken over at once (with the counter increased) and a live holder's is refused with an error
naming it. A record left unreleased by a process on *another* host is not taken over unless
the caller insists (``take_over``): its liveness cannot be checked from here. The file is
removed only by the holder of its ``flock``; one who locks a file that was removed meanwhile
(its name now points at another file, or at none) drops it and starts again on the new one.

The fence guards against a writer that lost its lease without knowing (a forced take-over, a
shared file system): before each write the store re-reads the record through its own
descriptor and refuses to write if the fence is no longer its own, or if the lock file's name
no longer leads to that descriptor's file (:class:`~pitrio.errors.StaleFenceError`).

Everything here is blocking file I/O: the store calls it through ``trio.to_thread``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
import stat
import time
from pathlib import Path
from typing import Any

import attrs
import orjson

from pitrio.actors.procfs import ENDED_STATES, proc_stat, start_time
from pitrio.actors.session_store.paths import file_kind
from pitrio.errors import SessionLockedError, SessionPathError, StaleFenceError
from pitrio.messages.entries import iso_now

LOCK_SUFFIX = ".lock"
_RECORD_MAX = 4096
_HOLDER_WAIT_TRIES = 50
_HOLDER_WAIT_S = 0.002
_REOPEN_TRIES = 100  # a file removed under us each time by as many clean closes: give up


def lock_path(session_path: Path) -> Path:
    """The lock file of a session file: ``<name>.lock`` beside it."""
    return session_path.with_name(session_path.name + LOCK_SUFFIX)


@attrs.frozen
class LeaseRecord:
    """What a lock file says: who holds (or last held) the lease, and its fence."""

    pid: int | None = None
    host: str | None = None
    fence: int = 0
    acquired_at: str | None = None
    released: bool = True
    started: int | None = None

    @classmethod
    def parse(cls, data: bytes) -> LeaseRecord:
        """Read a record; an empty or unreadable one is a released lease with fence 0."""
        try:
            value = orjson.loads(data) if data.strip() else {}
        except orjson.JSONDecodeError:
            value = {}
        if not isinstance(value, dict):
            value = {}

        def get(key: str, kind: type[Any]) -> Any:
            found = value.get(key)
            return found if isinstance(found, kind) and not isinstance(found, bool) else None

        fence = get("fence", int)
        released = value.get("released")
        return cls(
            pid=get("pid", int),
            host=get("host", str),
            fence=fence if fence is not None and fence >= 0 else 0,
            acquired_at=get("acquiredAt", str),
            released=released if isinstance(released, bool) else True,
            started=get("started", int),
        )

    def to_bytes(self) -> bytes:
        """The record as the lock file stores it."""
        return orjson.dumps(
            {
                "pid": self.pid,
                "host": self.host,
                "fence": self.fence,
                "acquiredAt": self.acquired_at,
                "released": self.released,
                "started": self.started,
            }
        )

    def holder(self) -> str:
        """``pid 123 on host h`` for messages."""
        return f"pid {self.pid} on host {self.host}"


def pid_alive(pid: int, started: int | None = None) -> bool:
    """Whether process ``pid`` exists on this host and has not ended (a zombie has), and, if
    ``started`` is known, is the same process rather than a later one that reused the pid."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    fields = proc_stat(pid)
    if fields is not None and fields and fields[0] in ENDED_STATES:
        # A zombie has closed its files (its flock is gone) but keeps its pid until its
        # parent reaps it, which a killed parent never does: a worker of a SIGKILLed
        # ``serve --workers`` acceptor stayed one, and the next daemon refused its sessions.
        return False
    if started is not None:
        now = start_time(pid)
        return now is None or now == started
    return True


def _read_record(fd: int) -> LeaseRecord:
    return LeaseRecord.parse(os.pread(fd, _RECORD_MAX, 0))


def _write_record(fd: int, record: LeaseRecord) -> None:
    data = record.to_bytes() + b"\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


class Lease:
    """A held lease on one session file; :meth:`release` when done."""

    def __init__(self, path: Path, fd: int, fence: int, *, locked: bool) -> None:
        self.path = path
        self.fence = fence
        self._fd: int | None = fd
        self._locked = locked
        # What the fence check compares the name against, taken once: an open file's device
        # and inode never change (the check runs before every write batch).
        opened = os.fstat(fd)
        self._identity = (opened.st_dev, opened.st_ino)
        self._name = os.fspath(path)
        # The lock file's bytes last found to carry our fence: the same bytes read again
        # carry it still, without parsing them again (issue 38: two checks a turn).
        self._ours = b""

    @classmethod
    def acquire(
        cls, session_path: Path, *, take_over: bool = False, host: str | None = None
    ) -> Lease:
        """Take the lease of ``session_path`` or raise :class:`SessionLockedError`.

        With ``take_over`` a lease held by a live process (here, or one that cannot be
        checked on another host) is taken anyway; that holder's next write is then refused
        by the fence.
        """
        path = lock_path(session_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        me = host or socket.gethostname()
        fd, locked = _open_locked(path)
        try:
            record = _read_record(fd)
            if not take_over:
                if not locked:
                    raise _locked_error(session_path, _holder_record(fd, record))
                if not record.released:
                    if record.host not in (None, me):
                        raise _locked_error(session_path, record, unverifiable=True)
                    # The lock is free, so its holder died or closed it; one that is still
                    # alive writes without the lock (a forced take-over): refuse it too.
                    holder = record.pid
                    alive = holder is not None and pid_alive(holder, record.started)
                    if alive and holder != os.getpid():
                        raise _locked_error(session_path, record)
            fence = record.fence + 1
            pid = os.getpid()
            _write_record(
                fd,
                LeaseRecord(
                    pid=pid,
                    host=me,
                    fence=fence,
                    acquired_at=iso_now(),
                    released=False,
                    started=start_time(pid),
                ),
            )
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, fence, locked=locked)

    def current(self) -> LeaseRecord:
        """The record as the lock file says now."""
        if self._fd is None:
            raise StaleFenceError(f"{self.path}: the lease was released")
        return _read_record(self._fd)

    def check(self) -> None:
        """Raise :class:`StaleFenceError` unless the lock file still carries our fence and
        is still the file at the lock file's name."""
        if self._fd is None:
            raise StaleFenceError(f"{self.path}: the lease was released")
        data = os.pread(self._fd, _RECORD_MAX, 0)
        if data != self._ours:
            record = LeaseRecord.parse(data)
            if record.fence != self.fence:
                raise StaleFenceError(
                    f"{self.path}: lease {self.fence} is stale: {record.holder()} "
                    f"holds lease {record.fence}; this writer must stop"
                )
            self._ours = data
        try:
            named = os.stat(self._name)
        except FileNotFoundError:
            named = None
        if named is None or (named.st_dev, named.st_ino) != self._identity:
            raise StaleFenceError(
                f"{self.path}: lease {self.fence} is stale: the lock file was removed or "
                "replaced; this writer must stop"
            )

    def release(self) -> None:
        """End the lease: remove the lock file if it is still ours (else leave the record of
        whoever holds it now), and drop the lock.

        Only the holder of the ``flock`` removes the file: then nobody else can be writing
        under it, except a forced take-over, whose record (unreleased) is left alone. A
        holder without the lock (that take-over) marks its record released instead.
        """
        fd = self._fd
        if fd is None:
            return
        try:
            record = _read_record(fd)
            ours = record.fence == self.fence
            if self._locked and (ours or record.released) and _names(self.path, fd):
                self.path.unlink()
            elif ours:
                _write_record(fd, attrs.evolve(record, released=True))
        finally:
            self.close()

    def close(self) -> None:
        """Drop the lock without touching the record (what a crash does)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            if self._locked:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still leads to the file open as ``fd`` (not removed, not replaced)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _open_lock_file(path: Path) -> int:
    """Open (or create) a lock file that is a regular file of its own, never through a link.

    The record is written into whatever the name opens, so a lock name that is a symbolic link
    (to ``/etc/passwd``, say, as root), a device or a FIFO is refused, naming the path, before
    a byte is written or a read could block (issue 21)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SessionPathError(str(path), "not a lock file: a symbolic link") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO):
            kind = file_kind(os.lstat(path).st_mode)
            raise SessionPathError(str(path), f"not a lock file: {kind}") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise SessionPathError(str(path), f"not a lock file: {file_kind(mode)}")
    return fd


def _open_locked(path: Path) -> tuple[int, bool]:
    """Open (or create) the lock file and try its ``flock``: the descriptor, and whether it is
    locked. A file removed between the open and the lock (its holder closed cleanly) is
    dropped for the one now at that name: a lock on a removed file excludes nobody."""
    for _ in range(_REOPEN_TRIES):
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise
            return fd, False  # held: the caller reads whose it is
        except BaseException:
            os.close(fd)
            raise
        if _names(path, fd):
            return fd, True
        os.close(fd)
    raise OSError(errno.EAGAIN, f"{path}: the lock file keeps being removed; try again")


def _holder_record(fd: int, record: LeaseRecord) -> LeaseRecord:
    """The record of a holder that has the lock; it may be a moment from writing it."""
    for _ in range(_HOLDER_WAIT_TRIES):
        if not record.released:
            break
        time.sleep(_HOLDER_WAIT_S)  # in a worker thread: the holder writes right after locking
        record = _read_record(fd)
    return record


def read_lease(session_path: Path) -> LeaseRecord | None:
    """The lock record of a session file, if it has one (for status and errors; a session
    nobody writes has none)."""
    try:
        return LeaseRecord.parse(lock_path(session_path).read_bytes())
    except FileNotFoundError:
        return None


def _locked_error(
    session_path: Path, record: LeaseRecord, *, unverifiable: bool = False
) -> SessionLockedError:
    since = f" since {record.acquired_at}" if record.acquired_at else ""
    why = " (on another host: its liveness cannot be checked)" if unverifiable else ""
    return SessionLockedError(
        f"{session_path} is being written by {record.holder()} (lease {record.fence}{since})"
        f"{why}; open it read-only, or stop that process",
        pid=record.pid,
        host=record.host,
        fence=record.fence,
    )
