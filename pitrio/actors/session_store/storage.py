"""Blocking file operations of the session store; the actor runs them through ``trio.to_thread``.

* reading streams the file line by line into the parser, with the cyclic garbage collector
  paused: loading allocates tens of thousands of objects that form no cycles, and collections
  triggered on the way would walk them again and again;
* new files appear atomically: written to a temporary file, flushed to disk, then linked
  into place (never over an existing file), so a crash cannot leave half a header;
* rewrites (migrations, repairs) go through a temporary file, fsync and rename;
* appends go to a descriptor opened with ``O_APPEND``, each batch in one ``write`` (repeated
  only if the kernel takes part of it), then an optional ``fsync``; where the fsync is to
  come a moment later, the batch's writeback can be started at once
  (:meth:`AppendFile.start_writeback`), so the fsync then waits only for the journal.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pitrio.actors.session_store.file_format import ParsedSession, parse_lines
from pitrio.actors.session_store.paths import open_session_file

if TYPE_CHECKING:
    from pitrio.actors.session_store.lease import Lease


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk load (reference counting still frees)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def read_session(path: Path, *, decode_all: bool = False) -> ParsedSession | None:
    """Parse a session file; ``None`` if it does not exist. Raises
    :class:`~pitrio.errors.SessionPathError` for a path that is not a regular file."""
    file = open_session_file(path)
    if file is None:
        return None
    with file, gc_paused():
        return parse_lines(file, origin=str(path), decode_all=decode_all)


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
    """The open session file of its one writer. Counts writes and fsyncs (for tests/status)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writes = 0
        self.syncs = 0
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND)

    def write(self, data: bytes) -> None:
        """Append ``data`` (one ``write`` call unless the kernel takes only part of it)."""
        assert self._fd is not None, "file closed"
        _write_all(self._fd, data)
        self.writes += 1

    def size(self) -> int:
        """The file's current size."""
        assert self._fd is not None, "file closed"
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        """Cut the file back to ``size`` bytes, best effort (after a failed write)."""
        assert self._fd is not None, "file closed"
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, size)

    def start_writeback(self, offset: int, length: int) -> None:
        """Start writing ``length`` bytes from ``offset`` to the disk without waiting for it
        (Linux; a no-op elsewhere): a later :meth:`sync` then waits for the journal only.

        Measured on this VM's ext4: the call ~33 us, an fsync 50 us or more after it ~130
        against ~195 us without it. Advisory: a failure here is left to the fsync to report.
        """
        assert self._fd is not None, "file closed"
        if _START_WRITEBACK is not None and length > 0:
            _START_WRITEBACK(self._fd, offset, length, _SYNC_FILE_RANGE_WRITE)

    def sync(self) -> None:
        """Flush what was written to stable storage."""
        assert self._fd is not None, "file closed"
        os.fsync(self._fd)
        self.syncs += 1

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


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
    start = file.size()
    try:
        file.write(data)
        if start_writeback:
            file.start_writeback(start, len(data))
    except OSError:
        # A full disk may have taken part of the batch: cut it off (shrinking needs no space).
        file.truncate(start)
        raise
    if sync:
        sync_batch(file, start)
    return start


def sync_batch(file: AppendFile, start: int) -> None:
    """The fsync of the batch written from ``start``: a failure cuts the batch off as well."""
    try:
        file.sync()
    except OSError:
        file.truncate(start)
        raise
