"""``check`` and ``repair`` of one session file (``pitrio sessions check|repair FILE``).

Blocking file I/O. ``repair`` takes the session's lease, so it never runs under a live writer;
it writes the bad lines to ``FILE.rejected`` (appended, fsynced) *before* replacing the session
file (temp file, fsync, rename), so a crash in between duplicates lines rather than losing any.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from pitrio.actors.session_store.file_format import Problem, check_session_bytes, plan_repair
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.storage import append_durably, replace_file

REJECTED_SUFFIX = ".rejected"


def rejected_path(path: Path) -> Path:
    """Where ``repair`` moves the bad lines of ``path``: ``<name>.rejected`` beside it."""
    return path.with_name(path.name + REJECTED_SUFFIX)


def check_file(path: Path) -> list[Problem]:
    """Every problem of a session file, in line order (raises ``OSError`` if unreadable)."""
    return check_session_bytes(path.read_bytes(), origin=str(path))


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
    lease = Lease.acquire(path, take_over=take_over)
    try:
        data = path.read_bytes()
        plan = plan_repair(data, origin=str(path))
        target = rejected_path(path)
        rewritten = plan.kept != data
        if plan.rejected:
            append_durably(target, b"".join(raw + b"\n" for _, raw in plan.rejected))
        if rewritten:
            lease.check()
            replace_file(path, plan.kept)
        return RepairReport(path, target, plan.rejected, rewritten, plan.problems)
    finally:
        lease.release()
