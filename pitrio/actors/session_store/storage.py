"""Blocking file operations of the session store; the actor runs them through ``trio.to_thread``.

* reading streams the file line by line into the parser, with the cyclic garbage collector
  paused: loading allocates tens of thousands of objects that form no cycles, and collections
  triggered on the way would walk them again and again;
* new files appear atomically: written to a temporary file, flushed to disk, then linked
  into place (never over an existing file), so a crash cannot leave half a header;
* rewrites (migrations, repairs) go through a temporary file, fsync and rename;
* appends go to a descriptor opened with ``O_APPEND`` for the batch (and checked to be the
  file first opened), each batch in one ``write`` (repeated
  only if the kernel takes part of it), then an optional ``fsync``; where the fsync is to
  come a moment later, the batch's writeback can be started at once
  (:meth:`AppendFile.start_writeback`), so the fsync then waits only for the journal.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import gc
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pitrio.actors.session_store.file_format import ParsedSession, parse_lines
from pitrio.actors.session_store.filemark import SUFFIX_BYTES, FileMark
from pitrio.actors.session_store.paths import file_kind, open_session_file
from pitrio.actors.session_store.preparsed import read_offered
from pitrio.errors import SessionError, SessionFileReplacedError

if TYPE_CHECKING:
    from pitrio.actors.session_store.lease import Lease


_FREEZE_LOADS = [False]
"""Whether ``gc_paused(lasting=True)`` freezes what it made (see :func:`freeze_bulk_loads`)."""


def freeze_bulk_loads() -> None:
    """This process hosts one session (RPC mode): from now on, what a lasting bulk load makes
    (a session file's entries, a resumed transcript decoded for the first turn: ~150,000
    objects on 48,000 messages) is moved out of the collector's sight when the load ends, as
    the start's objects are. It lives as long as the context; the next young collection
    walked all of it, then the one after (24 + 39-48 ms of the first turn after resuming a
    20,000-turn session, issue 38). What reference counting frees is freed all the same; the
    cost is that cyclic garbage waiting in the collector's generations at that moment stays
    until the process ends, so only loads made once per session ask for it (never a turn's),
    and a process serving many sessions does not call this."""
    _FREEZE_LOADS[0] = True


@contextlib.contextmanager
def collector_paused(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off for a block (reference counting still frees), and
    with ``freeze`` what the block made moved out of the collector's sight when it completes
    (``gc.freeze``; not when it raises: what a failed block made is mostly garbage). The one
    way pitrio pauses the collector: a bulk load's (:func:`gc_paused`) and RPC mode's start
    (everything it makes lives as long as the process, issue 38)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if enabled:
            gc.enable()


def gc_paused(*, lasting: bool = False) -> contextlib.AbstractContextManager[None]:
    """The collector paused for a bulk load. ``lasting``: what the load makes lives as long
    as the session, and is frozen where :func:`freeze_bulk_loads` was called."""
    return collector_paused(freeze=lasting and _FREEZE_LOADS[0])


READ_BUFFER = 1 << 20
"""The read buffer of a session file being loaded. With the default (a 4 KB block) a 1 MB
file takes 256 reads, and the worker thread gives up the GIL on each one and waits for it
again behind the event loop (up to the interpreter's switch interval, 5 ms, when the loop is
busy); 1 MB reads it in one or two (DESIGN-NOTES, issue 27, reopen). The lines are the same.
It is also the size of the blocks the parser splits into lines (issue 38)."""


def read_session(path: Path, *, decode_all: bool = False) -> ParsedSession | None:
    """Parse a session file; ``None`` if it does not exist. Raises
    :class:`~pitrio.errors.SessionPathError` for a path that is not a regular file.

    The result's :attr:`~ParsedSession.mark` says what was read (the bytes parsed, not the
    file's size now: another writer may append meanwhile, and its lines are then news)."""
    file = open_session_file(path, buffering=READ_BUFFER)
    if file is None:
        return None
    with file, gc_paused(lasting=True):
        # Parsed by a child process meanwhile (RPC mode's start; see .preparsed), else here.
        offered = None if decode_all else read_offered(file, str(path), READ_BUFFER)
        if offered is None:
            blocks = iter(functools.partial(file.read, READ_BUFFER), b"")
            parsed = parse_lines(blocks, origin=str(path), decode_all=decode_all)
            size = file.tell()
        else:
            parsed, size = offered
        fd = file.fileno()
        start = max(0, size - SUFFIX_BYTES)
        parsed.mark = FileMark(size, os.fstat(fd).st_mtime_ns, os.pread(fd, size - start, start))
        return parsed


def _fsync_dir(directory: Path) -> None:
    # Makes a rename or link durable; some file systems refuse to open directories.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_temp(path: Path, data: bytes) -> Path:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return temp


def create_file(path: Path, data: bytes) -> None:
    """Create ``path`` holding ``data``, durably; raises ``FileExistsError`` if it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path, data)
    try:
        os.link(temp, path)
    except FileExistsError:
        raise
    except OSError:
        # No hard links here: an exclusive create checks existence, the rename publishes.
        if path.exists():
            raise FileExistsError(path) from None
        os.replace(temp, path)
    else:
        temp.unlink()
    finally:
        temp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def replace_file(path: Path, data: bytes) -> None:
    """Replace the content of ``path`` atomically and durably (temp file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = _write_temp(path, data)
    try:
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created if missing) and fsync it."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[..., int] | None:
    """Linux's ``sync_file_range`` (not in :mod:`os`), or ``None`` where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint)
    function.restype = ctypes.c_int
    call: Callable[..., int] = function
    return call


_START_WRITEBACK = _sync_file_range()


class AppendFile:
    """The session file of its one writer, opened for each batch rather than held.

    A live session keeps no descriptor of its file between batches (its lease keeps the one
    it needs), so a daemon's open files are one per session, not two. Each batch opens the
    path again (``O_APPEND``, without blocking or taking a terminal), checks on the new
    descriptor that it is still the regular file first opened (device and inode), and closes
    it when the batch is done (:meth:`held`); a later fsync through another descriptor flushes
    the same file. A path removed or replaced meanwhile raises
    :class:`~pitrio.errors.SessionFileReplacedError` before anything is written. Counts writes
    and fsyncs (for tests/status).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self.syncs = 0
        self._fd: int | None = None
        self._depth = 0
        self._closed = False
        fd = self._open(identity=None)
        try:
            info = os.fstat(fd)
            self._identity = (info.st_dev, info.st_ino)
        finally:
            os.close(fd)
        self.mark = FileMark(info.st_size, info.st_mtime_ns, b"")
        """What this writer knows the file holds (:mod:`.foreign`); its owner may give a
        better one (the bytes parsed, with the suffix read). Checked before every batch."""

    def _open(self, identity: tuple[int, int] | None) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(self.path, flags)
        except OSError as exc:
            if identity is None:
                raise
            if isinstance(exc, FileNotFoundError):
                raise SessionFileReplacedError(
                    errno.ENOENT, f"{self.path}: the session file was removed since it was opened"
                ) from exc
            # A FIFO without a reader refuses a non-blocking writer (ENXIO): say what is there.
            try:
                mode = os.stat(self.path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise SessionFileReplacedError(
                    errno.EINVAL, f"{self.path}: not a session file: {file_kind(mode)}"
                ) from exc
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise SessionFileReplacedError(
                    errno.EINVAL, f"{self.path}: not a session file: {file_kind(info.st_mode)}"
                )
            if identity is not None and (info.st_dev, info.st_ino) != identity:
                raise SessionFileReplacedError(
                    errno.ESTALE,
                    f"{self.path}: another file was put in place of the session file since "
                    "it was opened; not appending to it",
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def held(self) -> Iterator[int]:
        """The file's descriptor for the calls inside the block (nested blocks share it)."""
        if self._closed:
            raise ValueError(f"{self.path}: file closed")
        if self._fd is None:
            self._fd = self._open(self._identity)
        self._depth += 1
        try:
            yield self._fd
        finally:
            self._depth -= 1
            if self._depth == 0:
                fd, self._fd = self._fd, None
                os.close(fd)

    def write(self, data: bytes) -> None:
        """Append ``data`` (one ``write`` call unless the kernel takes only part of it)."""
        with self.held() as fd:
            _write_all(fd, data)
        self.writes += 1

    def size(self) -> int:
        """The file's current size."""
        with self.held() as fd:
            return os.fstat(fd).st_size

    def check_mark(self) -> None:
        """Raise :class:`FileChanged` (with what the file holds from the mark's suffix on) if
        its size or time is not the mark's: one ``fstat`` (a ``stat`` of the name outside a
        batch, checked to be the same file), nothing read when they agree."""
        if self._fd is not None:
            info = os.fstat(self._fd)
        else:
            try:
                info = os.stat(self.path)
            except FileNotFoundError as exc:
                raise SessionFileReplacedError(
                    errno.ENOENT, f"{self.path}: the session file was removed since it was opened"
                ) from exc
            if (info.st_dev, info.st_ino) != self._identity:
                raise SessionFileReplacedError(
                    errno.ESTALE,
                    f"{self.path}: another file was put in place of the session file since "
                    "it was opened; not appending to it",
                )
        mark = self.mark
        if not mark.unchanged(info.st_size, info.st_mtime_ns):
            raise FileChanged(*self._read_from(mark.read_from))

    def _read_from(self, offset: int) -> tuple[int, int, bytes]:
        """Size, time and the bytes from ``offset`` to the end, through a descriptor of its
        own (the batch's is write-only), checked to be the same file."""
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self._identity:
                raise SessionFileReplacedError(
                    errno.ESTALE,
                    f"{self.path}: another file was put in place of the session file since "
                    "it was opened; not appending to it",
                )
            chunks = []
            position = offset
            while True:
                chunk = os.pread(fd, 1 << 20, position)
                if not chunk:
                    break
                chunks.append(chunk)
                position += len(chunk)
            return position, info.st_mtime_ns, b"".join(chunks)
        finally:
            os.close(fd)

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes, best effort (after a failed write)."""
        with contextlib.suppress(OSError, ValueError), self.held() as fd:
            os.ftruncate(fd, size)

    def start_writeback(self, offset: int, length: int) -> None:
        """Start writing ``length`` bytes from ``offset`` to the disk without waiting for it
        (Linux; a no-op elsewhere): a later :meth:`sync` then waits for the journal only.

        Measured on this VM's ext4: the call ~33 us, an fsync 50 us or more after it ~130
        against ~195 us without it. Advisory: a failure here is left to the fsync to report.
        """
        if _START_WRITEBACK is not None and length > 0:
            with self.held() as fd:
                _START_WRITEBACK(fd, offset, length, _SYNC_FILE_RANGE_WRITE)

    def sync(self) -> None:
        """Flush what was written to stable storage."""
        with self.held() as fd:
            os.fsync(fd)
        self.syncs += 1

    def close(self) -> None:
        """No more batches (idempotent); a batch in progress keeps its descriptor to its end."""
        self._closed = True


def write_batch(
    file: AppendFile,
    lease: Lease | None,
    data: bytes,
    sync: bool,
    *,
    start_writeback: bool = False,
) -> int:
    """Append one batch of lines: the lease's fence checked, one write, maybe one fsync.
    Returns where the batch starts in the file. A failed write or fsync cuts the batch off
    again, so the file holds exactly the entries whose appends returned."""
    if lease is not None:
        lease.check()
    with file.held() as fd:  # one open for the batch's calls
        file.check_mark()  # another writer's lines: the store reads them in first
        start = file.mark.size
        try:
            file.write(data)
            if start_writeback:
                file.start_writeback(start, len(data))
        except OSError:
            # A full disk may have taken part of the batch: cut it off (shrinking needs no
            # space).
            file.truncate(start)
            raise
        # The size is counted, not read: a line another writer adds from now on is news at
        # the next batch. Its time is read (the write set it).
        file.mark = file.mark.after(data, os.fstat(fd).st_mtime_ns)
        if sync:
            sync_batch(file, start)
    return start


class FileChanged(SessionError):
    """The session file is not as its writer left it: ``size`` bytes now, modified at
    ``mtime_ns``, holding ``data`` from the mark's suffix on (the store judges it)."""

    def __init__(self, size: int, mtime_ns: int, data: bytes) -> None:
        super().__init__(f"the session file changed: {size} bytes")
        self.size = size
        self.mtime_ns = mtime_ns
        self.data = data


def sync_batch(file: AppendFile, start: int) -> None:
    """The fsync of the batch written from ``start``: a failure cuts the batch off as well."""
    with file.held():
        try:
            file.sync()
        except OSError:
            file.truncate(start)
            raise
