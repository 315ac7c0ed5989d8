"""Reading pi's JSONL session files line by line, and judging every line (spec §4.2-§4.6, §4.10).

Pure: bytes in, parsed entries and a list of :class:`Problem` out; no file is touched here.

What a line can be, and what happens to it:

* the **header** (first non-blank line): a ``session`` object with a string ``id`` that
  decodes as :class:`~pitrio.messages.entries.SessionHeader`; anything else is an error;
* an **entry**: a JSON object with string ``type``, ``id`` and ``timestamp`` and a
  ``parentId`` that is a string or null. Entries of types this version does not know are kept.
  Non-message entries are decoded at once (they are few and small); message entries lazily;
* **blank**: skipped, as pi does;
* a **torn** line: the unterminated last line that is not valid JSON, i.e. what a writer
  killed in the middle of a write leaves. Also a terminated line that is an *incomplete
  prefix* of JSON: after a torn tail the next append starts on a fresh line, so the torn
  fragment ends up in the middle. A warning: excluded from the tree, kept in the file;
* a **malformed** line: anything else that is not a usable entry (bad JSON, not an object,
  missing envelope fields, a duplicate id, an entry that does not decode). An error: a strict
  open refuses the file, naming file and line; ``repair`` moves such lines aside.

Files older than version 3 are parsed to plain objects and migrated (``migrations.py``);
the caller rewrites the file when :attr:`ParsedSession.migrated` is set. What ``check`` and
``repair`` make of the problems is :mod:`.file_check`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import attrs
import orjson

from pitrio.actors.session_store.jsonline import is_truncated_json, loads_line, strip_bom
from pitrio.actors.session_store.migrations import migrate_to_current, session_version
from pitrio.actors.session_store.stored import (
    ENTRY_CLASSES,
    StoredEntry,
    TailMessageEntry,
    intern_role,
)
from pitrio.actors.session_store.stored import (
    ROLE_OBJECTS as _ROLE_OBJECTS,
)
from pitrio.actors.session_store.tree import TreeIndex
from pitrio.errors import DecodeError, SessionFileError
from pitrio.messages.codec import dumps, from_json
from pitrio.messages.entries import CURRENT_SESSION_VERSION, SessionHeader

if TYPE_CHECKING:
    from pitrio.actors.session_store.filemark import FileMark

Severity = Literal["error", "warning"]

_new = object.__new__

ProblemKind = Literal[
    "no_header",
    "malformed",
    "torn",
    "no_newline",
    "duplicate_id",
    "undecodable",
    "missing_parent",
    "missing_target",
    "newer_version",
    "no_version",
    "parent_cycle",
]


@attrs.frozen
class Problem:
    """One thing wrong with one line of a session file (``line`` is 1-based)."""

    line: int
    kind: ProblemKind
    severity: Severity
    message: str

    def describe(self, origin: str) -> str:
        """``FILE:LINE: severity: message``, the form ``pitrio sessions check`` prints."""
        return f"{origin}:{self.line}: {self.severity}: {self.message}"


@attrs.define
class ParsedSession:
    """A session file as read: header, entries in file order, every problem found.

    ``ends_clean`` is false when the data does not end with a newline (a torn or unterminated
    last line): the next append must first start a fresh line. ``migrated`` says the entries
    were migrated from an older version, so the file should be rewritten.
    """

    origin: str
    header: SessionHeader | None
    header_raw: bytes
    entries: list[StoredEntry]
    problems: list[Problem]
    ends_clean: bool
    migrated: bool
    version: int
    empty: bool
    torn: list[bytes] = attrs.field(factory=list)
    mark: FileMark | None = None
    """What was read (set by the reader of a file: :func:`~.storage.read_session`)."""
    index: TreeIndex | None = None
    """The tree's index of :attr:`entries`, as the parser made it (for
    :class:`~.tree.SessionTree`)."""

    @property
    def errors(self) -> list[Problem]:
        """The problems that make a strict open refuse the file."""
        return [problem for problem in self.problems if problem.severity == "error"]

    def raise_for_errors(self) -> None:
        """Raise :class:`~pitrio.errors.SessionFileError` for the first error, if any."""
        errors = self.errors
        if errors:
            first = errors[0]
            raise SessionFileError(self.origin, first.line, first.message, problems=tuple(errors))


class _Taken:
    """An id an entry this parser did not read has (see :meth:`SessionParser.continuing`),
    where the parser's index holds entries: what a parentId naming it shares."""

    __slots__ = ("id",)

    def __init__(self, entry_id: str) -> None:
        self.id = entry_id


class SessionParser:
    """Feed a session file one line at a time (:meth:`feed`), then :meth:`finish`.

    Streaming keeps the peak memory of opening a large file close to the size of what is
    kept. With ``decode_all`` every entry is decoded as it is read (what ``check`` does);
    otherwise message entries are decoded only when used.
    """

    def __init__(self, origin: str, *, decode_all: bool = False) -> None:
        self.origin = origin
        self._decode_all = decode_all
        self._line = 0
        self._header: SessionHeader | None = None
        self._header_raw = b""
        self._header_seen = False
        self._version = CURRENT_SESSION_VERSION
        self._entries: list[StoredEntry] = []
        # Each id seen, mapped to its entry: a parentId then shares its parent's id object (one
        # string less per entry of a long session), and the tree takes the dict as its index.
        self._ids: dict[str, Any] = {}
        self._problems: list[Problem] = []
        self._ends_clean = True
        self._empty = True
        self._torn: list[bytes] = []
        # Version < 3 files: (line, JSON object, raw) of each entry, migrated in finish().
        self._legacy: list[tuple[int, dict[str, Any], bytes]] | None = None
        self._no_version = False
        # Whether every entry so far named a parent read before it (or none): then no entry
        # is in a cycle or lacks its parent, and finish() skips those two walks over a long
        # file (issue 38). It still checks the targets of the label and context edit entries.
        self._ordered = True
        self._targets: list[StoredEntry] = []  # the label and context edit entries
        # The rest of the tree's index (TreeIndex), noted while each entry is at hand: whether
        # the entries are one chain in file order (each the child of the one before; _last
        # is the id of the last one) and the label and session info entries. The tree's own
        # pass over a long file's entries, out of the cache by then, was ~5 ms (issue 38).
        self._chain = True
        self._last: str | None = None
        self._noted: list[StoredEntry] = []
        self._indexed = True  # every id in _ids is an entry's (not so when continuing)

    @classmethod
    def continuing(cls, origin: str, *, taken: Iterable[str], line: int) -> SessionParser:
        """A parser for lines appended to a file whose header is read, whose last line was
        ``line`` and whose entries (and any others not to be reused) have the ids ``taken``:
        what another writer appended to a session file (:mod:`.foreign`). Every entry is
        decoded: one that does not is refused here, not later in a running session."""
        parser = cls(origin, decode_all=True)
        parser._header_seen = True
        parser._empty = False
        parser._ids = {entry_id: _Taken(entry_id) for entry_id in taken}
        parser._indexed = False
        parser._line = line
        return parser

    def taken(self) -> tuple[list[StoredEntry], list[Problem]]:
        """The entries and problems so far, without :meth:`finish`'s checks between entries."""
        return self._entries, self._problems

    def _problem(self, line: int, kind: ProblemKind, severity: Severity, message: str) -> None:
        self._problems.append(Problem(line, kind, severity, message))

    def feed(self, raw: bytes, *, terminated: bool = True) -> None:
        """Take the next line (without its newline); ``terminated`` is false for a last line
        that had no newline."""
        self._line += 1
        line = self._line
        if not terminated and raw:
            self._ends_clean = False
        if not raw or raw.isspace():
            return
        self._empty = False
        if not self._header_seen:
            raw = strip_bom(raw)  # pi reads a header after a byte order mark
        try:
            value = loads_line(raw)
        except orjson.JSONDecodeError as exc:
            if not self._header_seen:
                # The first line is not JSON: whatever this file is, it is not a session.
                self._header_seen = True
                self._problem(
                    line,
                    "no_header",
                    "error",
                    f"not a pi session file: line {line} is not JSON ({exc.msg})",
                )
                return
            if not terminated:
                self._problem(line, "torn", "warning", "torn last line (an interrupted write)")
                self._torn.append(raw)
            elif is_truncated_json(raw, exc):
                self._problem(line, "torn", "warning", "torn line (an interrupted write)")
                self._torn.append(raw)
            else:
                self._problem(line, "malformed", "error", f"malformed JSON: {exc.msg}")
            return
        if not terminated:
            self._problem(line, "no_newline", "warning", "last line has no newline")
        if not self._header_seen:
            self._header_seen = True
            self._take_header(line, raw, value)
            return
        if self._legacy is not None:
            if isinstance(value, dict):
                self._legacy.append((line, value, raw))
            else:
                self._problem(line, "malformed", "error", "not a JSON object")
            return
        self._take_entry(line, raw, value)

    def feed_lines(self, lines: Iterable[bytes]) -> None:
        """Take a file's bytes in pieces: its lines as a file iterates them (each with its
        newline, the last maybe without) or blocks of any size, as
        :func:`~.storage.read_session` reads a file."""
        # The start of a line not ended yet, in pieces: a line longer than a block (a huge
        # tool result) is joined once, not copied again with every block.
        rest: list[bytes] = []
        for block in lines:
            pieces = block.split(b"\n")
            if len(pieces) == 1:
                rest.append(block)
                continue
            if rest:
                rest.append(pieces[0])
                pieces[0] = b"".join(rest)
            last = pieces.pop()  # after the block's last newline: the start of a line
            rest = [last] if last else []
            self._feed_terminated(pieces)
        if rest:
            self.feed(b"".join(rest), terminated=False)

    def _feed_terminated(self, lines: list[bytes]) -> None:
        """Take lines that had their newline (given without it).

        The common line, a well-formed ``message`` entry, takes a short path: opening a long
        session is mostly this loop (its state in locals, the entry built here). Everything
        else goes through :meth:`feed` or :meth:`_take_entry`.
        """
        loads = orjson.loads
        refused = orjson.JSONDecodeError
        append = self._entries.append
        ids = self._ids
        origin = self.origin
        quick = not self._decode_all
        roles = _ROLE_OBJECTS
        read = StoredEntry.read
        tail_class = TailMessageEntry
        dict_, str_ = dict, str
        line = self._line
        ordered, chain, last = self._ordered, self._chain, self._last
        plain = self._header_seen and self._legacy is None
        for raw in lines:
            if not plain:
                self._line, self._ordered, self._chain, self._last = line, ordered, chain, last
                self.feed(raw)
                line, ordered, chain, last = self._line, self._ordered, self._chain, self._last
                plain = self._header_seen and self._legacy is None
                continue
            line += 1
            try:
                value = loads(raw)
            except refused:
                # feed() may take it after all (a lone surrogate, which loads_line reads) and
                # note a later or missing parent: that comes back.
                self._line, self._ordered, self._chain, self._last = line - 1, ordered, chain, last
                self.feed(raw)
                line, ordered, chain, last = self._line, self._ordered, self._chain, self._last
                continue
            if value.__class__ is dict_ and quick:
                entry_id = value.get("id")
                parent_id = value.get("parentId", False)
                timestamp = value.get("timestamp")
                message = value.get("message")
                if (
                    value.get("type") == "message"
                    and entry_id.__class__ is str_
                    and entry_id
                    and (parent_id is None or parent_id.__class__ is str_)
                    and timestamp.__class__ is str_
                    and message.__class__ is dict_
                    and entry_id not in ids
                ):
                    role = message.get("role")
                    if role.__class__ is str_:
                        if parent_id is not None:
                            shared = ids.get(parent_id)
                            if shared is None:
                                ordered = False  # a later, missing or own parent
                            else:
                                parent_id = shared.id
                        if parent_id is not last:
                            chain = False  # (the id objects are shared: the same object)
                        role = roles.get(role, role)
                        if len(value) == 5 and next(reversed(value)) == "message":
                            # pi's line: the four envelope strings, then the message (see
                            # TailMessageEntry: its text is the line's tail). What its
                            # read() makes, without the call: 48,000 of them on a long file.
                            stored: StoredEntry = _new(tail_class)
                            stored.type = "message"
                            stored.id = entry_id
                            stored.parent_id = parent_id
                            stored.raw = raw
                            stored.role = role
                            stored.line = line
                            stored.origin = origin
                            stored._entry = None
                            stored._message = None
                        else:
                            stored = read(
                                "message", entry_id, parent_id, timestamp, raw, role, line, origin
                            )
                        append(stored)
                        ids[entry_id] = stored
                        last = entry_id
                        continue
            self._empty = False
            self._ordered, self._chain, self._last = ordered, chain, last
            self._take_entry(line, raw, value)
            ordered, chain, last = self._ordered, self._chain, self._last
        self._line, self._ordered, self._chain, self._last = line, ordered, chain, last

    def _take_header(self, line: int, raw: bytes, value: Any) -> None:
        if not isinstance(value, dict) or value.get("type") != "session":
            self._problem(line, "no_header", "error", "the first line is not a session header")
            return
        if not isinstance(value.get("id"), str):
            self._problem(line, "no_header", "error", "the session header has no string id")
            return
        try:
            self._header = from_json(value, SessionHeader)
        except DecodeError as exc:
            self._problem(line, "no_header", "error", f"invalid session header: {exc}")
            return
        self._header_raw = raw
        self._version = session_version(value)
        self._no_version = "version" not in value
        if self._version > CURRENT_SESSION_VERSION:
            self._problem(
                line,
                "newer_version",
                "warning",
                f"format version {self._version} is newer than {CURRENT_SESSION_VERSION}",
            )
        if self._version < CURRENT_SESSION_VERSION:
            self._legacy = []

    def _take_entry(self, line: int, raw: bytes, value: Any) -> StoredEntry | None:
        if type(value) is not dict:
            self._problem(line, "malformed", "error", "not a JSON object")
            return None
        entry_type = value.get("type")
        entry_id = value.get("id")
        parent_id = value.get("parentId", False)
        timestamp = value.get("timestamp")
        if type(entry_type) is not str or entry_type == "session":
            what = "a second session header" if entry_type == "session" else "no string type"
            self._problem(line, "malformed", "error", f"not an entry: {what}")
            return None
        if type(entry_id) is not str or not entry_id:
            self._problem(line, "malformed", "error", f"{entry_type} entry without a string id")
            return None
        if parent_id is not None and type(parent_id) is not str:
            self._problem(
                line, "malformed", "error", f"entry {entry_id}: parentId must be a string or null"
            )
            return None
        if type(timestamp) is not str:
            self._problem(line, "malformed", "error", f"entry {entry_id}: no string timestamp")
            return None
        if entry_id in self._ids:
            self._problem(line, "duplicate_id", "error", f"duplicate entry id {entry_id}")
            return None
        role = None
        if entry_type == "message":
            message = value.get("message")
            role = message.get("role") if type(message) is dict else None
            if type(role) is not str:
                self._problem(
                    line, "undecodable", "error", f"entry {entry_id}: message has no string role"
                )
                return None
            role = intern_role(role)
        if parent_id:
            shared = self._ids.get(parent_id)
            if shared is not None:
                parent_id = shared.id
        if parent_id is not None and parent_id not in self._ids:
            self._ordered = False  # a later, missing or own parent: finish() walks them
        tail = role is not None and len(value) == 5 and next(reversed(value)) == "message"
        stored = (TailMessageEntry if tail else StoredEntry).read(
            entry_type, entry_id, parent_id, timestamp, raw, role, line, self.origin
        )
        if (self._decode_all or entry_type != "message") and entry_type in ENTRY_CLASSES:
            try:
                stored.decode_from(value)
            except SessionFileError as exc:
                self._problem(line, "undecodable", "error", exc.problem)
                return None
        self._ids[entry_id] = stored
        self._entries.append(stored)
        if parent_id is not self._last:
            self._chain = False
        self._last = entry_id
        if entry_type == "label" or entry_type == "context_edit":
            self._targets.append(stored)
        if entry_type == "label" or entry_type == "session_info":
            self._noted.append(stored)
        return stored

    def finish(self) -> ParsedSession:
        """Migrate if needed, check references between entries, and return the result."""
        migrated = False
        if self._legacy is not None and self._header is not None:
            if self._no_version and any(type(v.get("id")) is str for _, v, _ in self._legacy):
                # A genuine version-1 file has no entry ids; this one is a tree whose header
                # lost its version, and pi's rule (no version: version 1) flattens it.
                self._problem(
                    1,
                    "no_version",
                    "warning",
                    "the session header has no version but its entries have ids: read as a "
                    "version 1 file, opening it gives them new ids in one chain (the tree is "
                    "flattened; the original is kept as a backup)",
                )
            migrated = self._migrate(self._legacy)
        self._check_references()
        reported = any(problem.kind == "no_header" for problem in self._problems)
        if self._header is None and not self._empty and not reported:
            self._problem(1, "no_header", "error", "no session header")
        self._problems.sort(key=lambda problem: problem.line)
        return ParsedSession(
            origin=self.origin,
            header=self._header,
            header_raw=self._header_raw,
            entries=self._entries,
            problems=self._problems,
            ends_clean=self._ends_clean,
            migrated=migrated,
            version=self._version,
            empty=self._empty,
            torn=self._torn,
            index=TreeIndex(self._ids, self._chain, self._noted) if self._indexed else None,
        )

    def _migrate(self, legacy: list[tuple[int, dict[str, Any], bytes]]) -> bool:
        assert self._header is not None
        header_value: dict[str, Any] = loads_line(self._header_raw)
        values = [header_value, *(value for _, value, _ in legacy)]
        migrated, changed = migrate_to_current(values)
        header = migrated[0]
        self._header = from_json(header, SessionHeader)
        self._header_raw = dumps(header) if header is not header_value else self._header_raw
        for (line, original, raw), value in zip(legacy, migrated[1:], strict=True):
            # Unchanged objects keep pi's exact bytes; changed ones are written in key order.
            self._take_entry(line, raw if value is original else dumps(value), value)
        return changed

    def _check_cycles(self) -> None:
        """An error for each loop of parents (an entry its own parent included): pi's walk
        to the root never ends on one, and no leaf on or under it has a context."""
        by_id: dict[str, StoredEntry] | None = None  # made when a walk first needs it
        done: set[str] = set()
        add = done.add
        for start in self._entries:
            # The usual file: each entry's parent came before it and was walked already. One
            # step, without the walk's own list and dict (a third of a long file's check).
            parent = start.parent_id
            if start.id not in done and (parent is None or parent in done) and parent != start.id:
                add(start.id)
                continue
            if by_id is None:
                by_id = {stored.id: stored for stored in self._entries}
            walk: list[StoredEntry] = []
            on_walk: dict[str, int] = {}
            current: StoredEntry | None = start
            while current is not None and current.id not in done:
                if current.id in on_walk:
                    loop = walk[on_walk[current.id] :]
                    last = max(loop, key=lambda stored: stored.line)
                    chain = " -> ".join(stored.id for stored in [*loop[:8], loop[0]])
                    what = (
                        "is its own parent" if len(loop) == 1 else f"is in a parent cycle ({chain})"
                    )
                    self._problem(last.line, "parent_cycle", "error", f"entry {last.id} {what}")
                    break
                on_walk[current.id] = len(walk)
                walk.append(current)
                parent = current.parent_id
                current = by_id.get(parent) if parent is not None else None
            done.update(on_walk)

    def _check_references(self) -> None:
        ordered = self._ordered
        if not ordered:
            self._check_cycles()
        ids = self._ids
        # Every parent read before its child (the usual file): only the targets to check.
        for stored in self._targets if ordered else self._entries:
            parent = stored.parent_id
            if parent is not None and parent not in ids:
                self._problem(
                    stored.line,
                    "missing_parent",
                    "warning",
                    f"entry {stored.id}: parent {parent} is missing (it becomes a root)",
                )
            if stored.type in ("label", "context_edit"):
                target = getattr(stored.entry(), "target_id", None)
                if isinstance(target, str) and target not in ids:
                    kind = "context edit" if stored.type == "context_edit" else "label"
                    self._problem(
                        stored.line,
                        "missing_target",
                        "warning",
                        f"{kind} {stored.id} refers to missing target {target}",
                    )


def parse_lines(lines: Iterable[bytes], *, origin: str, decode_all: bool = False) -> ParsedSession:
    """Parse a file's bytes given in pieces: lines as a file iterates them (each with its
    newline, the last maybe without) or blocks of any size, as :func:`~.storage.read_session`
    reads them (no copy of each line without its newline)."""
    parser = SessionParser(origin, decode_all=decode_all)
    parser.feed_lines(lines)
    return parser.finish()


def parse_session_bytes(data: bytes, *, origin: str, decode_all: bool = False) -> ParsedSession:
    """Parse a whole session file held in memory."""
    parser = SessionParser(origin, decode_all=decode_all)
    pieces = data.split(b"\n")
    last = pieces.pop()  # after the final newline: b"" for a cleanly ended file
    for piece in pieces:
        parser.feed(piece)
    if last:
        parser.feed(last, terminated=False)
    return parser.finish()
