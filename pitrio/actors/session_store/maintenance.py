"""``check`` and ``repair`` of one session file (``pitrio sessions check|repair FILE``).

Blocking file I/O. ``repair`` takes the session's lease, so it never runs under a live writer;
it writes the bad lines to ``FILE.rejected`` (appended, fsynced) *before* replacing the session
file (temp file, fsync, rename), so a crash in between duplicates lines rather than losing any.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from pitrio.actors.session_store.file_check import check_session_bytes, plan_repair
from pitrio.actors.session_store.file_format import Problem
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.paths import check_session_path, open_session_file
from pitrio.actors.session_store.storage import (
    append_durably,
    create_file,
    read_session,
    replace_file,
)
from pitrio.errors import SessionFileError

REJECTED_SUFFIX = ".rejected"


def rejected_path(path: Path) -> Path:
    """Where ``repair`` moves the bad lines of ``path``: ``<name>.rejected`` beside it."""
    return path.with_name(path.name + REJECTED_SUFFIX)


def check_file(path: Path) -> list[Problem]:
    """Every problem of a session file, in line order (raises ``OSError`` if unreadable,
    :class:`~pitrio.errors.SessionPathError` if it is not a regular file)."""
    return check_session_bytes(_read(path), origin=str(path))


def _read(path: Path) -> bytes:
    file = open_session_file(path)
    if file is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    with file:
        return file.read()


@attrs.frozen
class RepairReport:
    """What ``repair`` did: the lines it moved (number, bytes) and every problem it saw."""

    path: Path
    rejected_path: Path
    moved: tuple[tuple[int, bytes], ...]
    rewritten: bool
    problems: tuple[Problem, ...]


def repair_file(path: Path, *, take_over: bool = False) -> RepairReport:
    """Move torn and malformed lines of ``path`` to ``FILE.rejected``; keep the rest as is.

    Raises :class:`~pitrio.errors.SessionLockedError` while a live writer holds the session,
    :class:`~pitrio.errors.SessionFileError` for a file without a valid header.
    """
    check_session_path(path)  # before the lease: its lock file is made beside the path
    lease = Lease.acquire(path, take_over=take_over)
    try:
        data = _read(path)
        plan = plan_repair(data, origin=str(path))
        target = rejected_path(path)
        rewritten = plan.kept != data
        if plan.rejected:
            append_durably(target, b"".join(raw + b"\n" for _, raw in plan.rejected))
        if rewritten:
            lease.check()
            replace_file(path.resolve(), plan.kept)  # through a link: its target
        return RepairReport(path, target, plan.rejected, rewritten, plan.problems)
    finally:
        lease.release()


BACKUP_SUFFIX = ".bak"


def backup_path(path: Path, version: int) -> Path:
    """Where a migration keeps the original of ``path``: ``<name>.v<version>.bak`` beside it
    (``.1.bak``, ``.2.bak``, ... if that is taken: an older backup is never replaced)."""
    first = path.with_name(f"{path.name}.v{version}{BACKUP_SUFFIX}")
    candidate, number = first, 0
    while os.path.lexists(candidate):
        number += 1
        candidate = path.with_name(f"{path.name}.v{version}.{number}{BACKUP_SUFFIX}")
    return candidate


def rewrite_migrated(path: Path, data: bytes, version: int) -> Path:
    """Replace a session file by its migration ``data``, keeping the original: returns where.

    The backup is the original file itself (a hard link to it, else a copy, made before the
    rename), so the original bytes survive a crash at any point. A symbolic link is resolved
    first: its target is rewritten and the link stays a link.
    """
    real = path.resolve()
    backup = backup_path(real, version)
    try:
        os.link(real, backup)
    except OSError:
        create_file(backup, real.read_bytes())
    try:
        replace_file(real, data)
    except BaseException:
        backup.unlink(missing_ok=True)  # the original is still in place: no second copy
        raise
    return backup


def probe_session_file(path: Path) -> None:
    """Raise what opening ``path`` as a session would raise about the file, reading only.

    For a caller about to give up something to open it (a switch stops the current session
    first): a path that is not a regular file, a file that is not a pi session, a file with
    errors. A missing or empty file passes (a new session starts there, as in pi).
    """
    parsed = read_session(path)
    if parsed is None or parsed.empty:
        return
    parsed.raise_for_errors()
    if parsed.header is None:
        raise SessionFileError(str(path), 1, "not a pi session file: no session header")
