"""How a file store's session file comes to be open: read, leased, migrated, created.

Blocking functions, each run by the store actor in one worker thread; they own nothing of the
actor's and return what it keeps (:class:`OpenedFile`), so the actor applies the outcome in
one place. The decisions are pi's (spec §4.6): a missing file is a new session at that path
(the lease taken all the same: another process may name the same path), an empty one gets a
header, an older format is migrated and the original kept, a torn last line is never written
into.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from pitrio.actors.session_store.commands import new_header
from pitrio.actors.session_store.file_format import ParsedSession, Problem
from pitrio.actors.session_store.filemark import SUFFIX_BYTES
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.maintenance import rewrite_migrated
from pitrio.actors.session_store.storage import (
    AppendFile,
    append_durably,
    create_file,
    read_session,
)
from pitrio.actors.session_store.stored import StoredEntry
from pitrio.actors.session_store.tree import IdFactory, SessionTree
from pitrio.errors import SessionFileError
from pitrio.messages.codec import encode
from pitrio.messages.entries import SessionHeader

log = logging.getLogger("pitrio.session_store")


@attrs.frozen(kw_only=True)
class OpenedFile:
    """What opening a session file gave the store (its fields become the actor's)."""

    header: SessionHeader
    cwd: str
    tree: SessionTree
    problems: tuple[Problem, ...] = ()
    wants_file: bool = False
    migrated: bool = False
    backup: Path | None = None
    """Where a migration kept the original file."""
    lease: Lease | None = None
    file: AppendFile | None = None
    needs_newline: bool = False
    """The file ends in a torn line: the next batch starts on a fresh one."""


def open_session_file(
    path: Path,
    *,
    cwd: str,
    read_only: bool,
    take_over: bool,
    strict: bool,
    new_id: IdFactory,
    file_class: Callable[[Path], AppendFile],
) -> OpenedFile:
    """Open the session at ``path`` (blocking; see the module doc). ``cwd`` (may be empty)
    overrides the header's. The lease is released again if opening fails after it was
    taken (the store does not start)."""
    parsed: ParsedSession | None = read_session(path)
    lease: Lease | None = None
    try:
        if parsed is None or parsed.empty:
            header = new_header(cwd or str(Path.cwd()))
            file = None
            if not read_only:
                lease = Lease.acquire(path, take_over=take_over)
            if parsed is not None and not read_only:
                # Appended, not renamed over: the file (blank at most) stays the same inode,
                # reached through a symbolic link if that is how it was named.
                append_durably(path, encode(header) + b"\n")
                file = file_class(path)
            tree = SessionTree(header, new_id=new_id)
            return OpenedFile(
                header=header, cwd=cwd or header.cwd, tree=tree, lease=lease, file=file
            )
        if strict:
            parsed.raise_for_errors()
        if parsed.header is None:
            raise SessionFileError(str(path), 1, "no session header")
        for problem in parsed.problems:
            log.warning("%s", problem.describe(str(path)))
        header = parsed.header
        tree = SessionTree(header, parsed.entries, new_id=new_id, index=parsed.index)
        opened = OpenedFile(
            header=header,
            cwd=cwd or header.cwd,
            tree=tree,
            problems=tuple(parsed.problems),
            wants_file=tree.has_assistant(),
            migrated=parsed.migrated,
        )
        if read_only:
            return opened
        lease = Lease.acquire(path, take_over=take_over)
        return _opened_for_writing(path, parsed, opened, lease, file_class)
    except BaseException:
        if lease is not None:
            lease.release()
        raise


def _opened_for_writing(
    path: Path,
    parsed: ParsedSession,
    opened: OpenedFile,
    lease: Lease,
    file_class: Callable[[Path], AppendFile],
) -> OpenedFile:
    backup = None
    if parsed.migrated:
        # The rewrite keeps torn lines (at the end) rather than losing them.
        data = whole_file(opened.header, opened.tree.entries, parsed.header_raw, parsed.torn)
        backup = rewrite_migrated(path, data, parsed.version)
        log.warning(
            "%s: migrated from session format version %d to %d; the original is kept in %s",
            path,
            parsed.version,
            opened.header.version,
            backup,
        )
    file = file_class(path)
    if parsed.migrated:
        know_suffix(file, data)
    elif parsed.mark is not None:
        # What was parsed, not what the file holds now: lines another writer appended
        # since are taken in before the first batch (:mod:`.foreign`).
        file.mark = parsed.mark
    return attrs.evolve(
        opened,
        lease=lease,
        file=file,
        backup=backup,
        needs_newline=not parsed.migrated and not parsed.ends_clean,
    )


def create_session_file(
    path: Path, data: bytes, file_class: Callable[[Path], AppendFile]
) -> AppendFile:
    """Write ``data`` (header and entries) as the new file at ``path`` and open it for
    appending (blocking; lazy creation's moment, the lease already held)."""
    create_file(path, data)
    file = file_class(path)
    know_suffix(file, data)
    return file


def whole_file(
    header: SessionHeader,
    entries: Sequence[StoredEntry],
    header_raw: bytes | None = None,
    tail: Sequence[bytes] = (),
) -> bytes:
    """A session file's bytes: the header (``header_raw`` as read, if given), the entries'
    lines and ``tail`` (torn lines kept at the end)."""
    parts = [header_raw if header_raw is not None else encode(header)]
    parts.extend(stored.raw for stored in entries)
    parts.extend(tail)
    return b"\n".join(parts) + b"\n"


def know_suffix(file: AppendFile, data: bytes) -> None:
    """The file was just written as ``data``: its mark's suffix is ``data``'s end."""
    if file.mark.size == len(data):
        file.mark = attrs.evolve(file.mark, suffix=data[-SUFFIX_BYTES:])


def rehome(stored: StoredEntry, origin: str) -> StoredEntry:
    """A copy of an entry for another file (same bytes and decoded forms, new origin)."""
    copy = StoredEntry(
        type=stored.type,
        id=stored.id,
        parent_id=stored.parent_id,
        timestamp=stored.timestamp,
        raw=stored.raw,
        role=stored.role,
        origin=origin,
        entry=stored.entry() if stored.decoded else None,
    )
    return copy
