"""What another writer did to a session file since this store last wrote it (pure; issue 36).

pi 1.6.0 appends to a session file with no lock, so a pi sharing pitrio's agent directory can
append to a file a pitrio store holds. The store remembers what it last left in the file (a
:class:`FileMark`: size, modification time and the last bytes it knows end the file there);
before each write batch it compares the file's size and modification time with the mark
(one ``fstat``: nothing is read while they agree). When they differ, it reads the bytes from
the start of the mark's suffix to the end, and :func:`judge` says what happened:

* :class:`Unchanged`: the same bytes are there (the file was only touched);
* :class:`Grew`: the known bytes are intact and are followed by whole, valid entry lines of
  this session whose parents exist: another writer appended them. The store takes them into
  its tree and continues from the file's last entry;
* :class:`Conflict`: anything else (the file is shorter, the known bytes were rewritten, an
  unterminated or malformed line follows, a session header, an id already used, a parent
  that does not exist). The store turns the session read-only, naming what it found; it
  writes nothing more, so neither side's lines are touched.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence
from typing import Literal

import attrs

from pitrio.actors.session_store.file_format import SessionParser
from pitrio.actors.session_store.filemark import SUFFIX_BYTES, FileMark, mark_of
from pitrio.actors.session_store.stored import StoredEntry

__all__ = [
    "SUFFIX_BYTES",
    "Conflict",
    "Decision",
    "FileMark",
    "Grew",
    "Merged",
    "Unchanged",
    "judge",
    "mark_of",
    "merge",
]

ConflictKind = Literal[
    "truncated", "rewritten", "unterminated", "header", "malformed", "duplicate_id", "no_parent"
]


@attrs.frozen
class Unchanged:
    """The file holds what the store wrote last (perhaps touched: ``mtime_ns`` is its time)."""

    mtime_ns: int


@attrs.frozen
class Grew:
    """Another writer appended ``entries`` (file order); ``mark`` is the file's new mark."""

    entries: tuple[StoredEntry, ...]
    mark: FileMark

    @property
    def leaf_id(self) -> str | None:
        """The file's last entry now (pi's leaf after loading)."""
        return self.entries[-1].id if self.entries else None


@attrs.frozen
class Conflict:
    """The file changed in a way that cannot be merged; ``detail`` says what was found."""

    kind: ConflictKind
    detail: str


Decision = Unchanged | Grew | Conflict


def judge(
    mark: FileMark,
    size: int,
    mtime_ns: int,
    data: bytes,
    *,
    known: Container[str],
    taken: Iterable[str],
    origin: str,
    line: int,
) -> Decision:
    """Decide what happened to a file marked ``mark`` that is now ``size`` bytes, modified at
    ``mtime_ns``, and holds ``data`` from :attr:`FileMark.read_from` to its end.

    ``known`` are the ids of the entries the file held at the mark (a new entry's parent must
    be one of them or an earlier new one); ``taken`` every id the store uses, written or not
    (a new entry may not reuse one); ``line`` the number of the file's last known line.
    """
    if size < mark.size:
        return Conflict(
            "truncated", f"the file was cut from {mark.size} to {size} bytes by another writer"
        )
    if not data.startswith(mark.suffix) or len(data) != size - mark.read_from:
        return Conflict(
            "rewritten",
            f"the file's content before byte {mark.size} was rewritten by another writer",
        )
    tail = data[len(mark.suffix) :]
    if not tail:
        return Unchanged(mtime_ns)
    if not tail.endswith(b"\n"):
        return Conflict(
            "unterminated",
            f"another writer appended {len(tail)} bytes ending in an unterminated line",
        )
    if mark.suffix and not mark.suffix.endswith(b"\n"):
        return Conflict("malformed", "another writer appended to an unterminated last line")
    return _appended(mark, size, mtime_ns, data, tail, known, taken, origin, line)


def _appended(
    mark: FileMark,
    size: int,
    mtime_ns: int,
    data: bytes,
    tail: bytes,
    known: Container[str],
    taken: Iterable[str],
    origin: str,
    line: int,
) -> Decision:
    parser = SessionParser.continuing(origin, taken=taken, line=line)
    lines = tail.split(b"\n")[:-1]  # the tail ends with a newline: the last piece is empty
    for raw in lines:
        parser.feed(raw)
    entries, problems = parser.taken()
    errors = [problem for problem in problems if problem.severity == "error"]
    if errors:
        first = errors[0]
        kind: ConflictKind = "duplicate_id" if first.kind == "duplicate_id" else "malformed"
        if "second session header" in first.message:
            kind = "header"  # a different session's (or this one's again): not ours to merge
        return Conflict(kind, f"another writer appended line {first.line}: {first.message}")
    seen: set[str] = set()
    for stored in entries:
        parent = stored.parent_id
        if parent is not None and parent not in known and parent not in seen:
            return Conflict(
                "no_parent",
                f"another writer appended entry {stored.id} (line {stored.line}) whose parent "
                f"{parent} does not exist",
            )
        seen.add(stored.id)
    new_mark = FileMark(size, mtime_ns, data[-SUFFIX_BYTES:])
    return Grew(tuple(entries), new_mark)


@attrs.frozen
class Merged:
    """A tree's entries once another writer's are taken in (:func:`merge`)."""

    entries: list[StoredEntry]
    """File order: the entries the file held, the other writer's, then this store's
    unwritten ones (some with a new parent)."""
    rebased: dict[str, StoredEntry]
    """The unwritten entries given a new parent, by id."""
    leaf_id: str | None
    """The leaf from now on."""


def merge(
    written: Sequence[StoredEntry],
    grew: Grew,
    unwritten: Sequence[StoredEntry],
    leaf_id: str | None,
) -> Merged:
    """Take the other writer's entries in after the ``written`` ones.

    The session continues from the file's real leaf: an unwritten entry that was to follow
    the file's last entry follows the other writer's last entry instead (its line changes in
    ``parentId`` only), and a leaf that was the file's last entry moves there too. An entry
    or leaf put elsewhere on purpose (a branch from an older entry, a reset leaf) stays.
    """
    file_last = written[-1].id if written else None
    foreign_leaf = grew.leaf_id
    rebased: dict[str, StoredEntry] = {}
    moved: list[StoredEntry] = []
    for stored in unwritten:
        if foreign_leaf is not None and stored.parent_id == file_last:
            stored = stored.reparented(foreign_leaf)
            rebased[stored.id] = stored
        moved.append(stored)
    if leaf_id == file_last:
        leaf_id = foreign_leaf
    return Merged([*written, *grew.entries, *moved], rebased, leaf_id)
