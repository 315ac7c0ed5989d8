"""One entry of a session tree as the store holds it: envelope fields, raw line, lazy decoding.

Opening a long session must not run every line through the typed codec: the tree needs only
each entry's ``type``, ``id``, ``parentId`` and ``timestamp``, and the projection needs the
decoded message of entries on the current path, only when someone reads them. So a
:class:`StoredEntry` keeps the line's JSON bytes exactly as they were read (or written) and
decodes them on first use, caching the result. A rewrite of the file emits the kept bytes, so
lines pi wrote come back byte for byte, unknown fields and key order included.

Entry types this version does not know are kept as :class:`UnknownEntry`: part of the tree
(they have an id and a parent), never projected, written back verbatim.
"""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable
from typing import Any

import attrs
import orjson

from pitrio.actors.session_store.jsonline import loads_line
from pitrio.errors import DecodeError, SessionFileError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import compact, converter, dumps, encode_reusing, from_json
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
    LabelEntry,
    MessageEntry,
    ModelChangeEntry,
    SessionEntry,
    SessionInfoEntry,
    ThinkingLevelChangeEntry,
    UsageEntry,
)
from pitrio.messages.shared import Pieces, entry_system_message, shared_system_json

ENTRY_CLASSES: dict[str, type[Any]] = {
    "message": MessageEntry,
    "thinking_level_change": ThinkingLevelChangeEntry,
    "model_change": ModelChangeEntry,
    "compaction": CompactionEntry,
    "branch_summary": BranchSummaryEntry,
    "custom": CustomEntry,
    "custom_message": CustomMessageEntry,
    "label": LabelEntry,
    "session_info": SessionInfoEntry,
    "context_edit": ContextEditEntry,
    "usage": UsageEntry,
}
"""The entry class of each entry ``type`` this version knows."""

MESSAGE_CLASSES: dict[str, type[Any]] = {
    "user": UserMessage,
    "assistant": AssistantMessage,
    "toolResult": ToolResultMessage,
    "bashExecution": BashExecutionMessage,
    "custom": CustomMessage,
    "branchSummary": BranchSummaryMessage,
    "compactionSummary": CompactionSummaryMessage,
}
"""The message class of each role this version knows."""

# Role strings repeat on every message line; sharing one object per role saves memory on
# sessions with tens of thousands of entries. Maps each known role to its shared string.
ROLE_OBJECTS: dict[str, str] = {
    role: role
    for role in (
        "user",
        "assistant",
        "toolResult",
        "bashExecution",
        "custom",
        "branchSummary",
        "compactionSummary",
        "system",
    )
}


KNOWN_ROLES: frozenset[str] = frozenset(ROLE_OBJECTS)
"""Message roles this version models; a message entry of another role is kept in the tree
and written back, but is no part of the context (pi 1.6.0 files may hold roles a newer pi
adds)."""


SHARED_NAMES = ("api", "provider", "model")
"""Fields of an assistant message that repeat, message after message, in a session."""


def share_names(message: dict[str, Any]) -> None:
    """Intern the :data:`SHARED_NAMES` of an assistant message's JSON object in place, so a
    long context holds one string of each, not one per message (issue 7)."""
    for name in SHARED_NAMES:
        text = message.get(name)
        if text.__class__ is str:
            message[name] = sys.intern(text)


def intern_role(role: str) -> str:
    """The shared string object for a known message role (``role`` itself otherwise)."""
    return ROLE_OBJECTS.get(role, role)


@attrs.frozen(kw_only=True)
class UnknownEntry:
    """An entry whose ``type`` this version does not know, kept as its JSON object."""

    type: str
    id: str
    parent_id: str | None
    timestamp: str
    data: dict[str, Any]


AnyEntry = SessionEntry | UnknownEntry
"""A known entry or one of a type this version does not know."""


_HOOKS: dict[Any, Callable[[Any, Any], Any]] = {}


def fast_from_json(value: Any, cls: Any) -> Any:
    """:func:`~pitrio.messages.codec.from_json` without its per-call dispatch.

    Decoding a long context calls this tens of thousands of times; the class's structure hook
    is looked up once. On failure the codec's own path runs again to raise its
    :class:`~pitrio.errors.DecodeError`, which names the type and the field.
    """
    hook = _HOOKS.get(cls)
    if hook is None:
        hook = _HOOKS[cls] = converter.get_structure_hook(cls)
    try:
        return hook(value, cls)
    except Exception:
        return from_json(value, cls)


_QUICK: list[Callable[[Any, Any], Any]] = []


def _quick_decoder() -> Callable[[Any, Any], Any]:
    """:func:`pitrio.messages.quick.decode_message`, imported on the first message decoded
    (a start that decodes none does not load it)."""
    if not _QUICK:
        from pitrio.messages.quick import decode_message

        _QUICK.append(decode_message)
    return _QUICK[0]


def iso_to_ms(timestamp: str) -> int:
    """Unix milliseconds of an ISO-8601 timestamp, as JavaScript's ``Date.parse`` gives them.

    pi turns the entry timestamp of compactions, branch summaries and custom messages into
    the projected message's ``timestamp`` this way. An unparsable value gives 0 (pi: NaN).
    """
    try:
        parsed = datetime.datetime.fromisoformat(timestamp)
    except ValueError:
        return 0
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    delta = parsed - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


_new = object.__new__


class StoredEntry:
    """An entry of the tree: envelope fields, the raw JSON line, decoded forms cached.

    ``line`` is the 1-based line number in the file it was read from (0 for entries appended
    by this process). ``role`` is the message role of ``message`` entries (``None`` for other
    types), known without decoding. Decoding raises :class:`~pitrio.errors.SessionFileError`
    naming ``origin`` and the line.
    """

    __slots__ = (
        "_entry",
        "_message",
        "id",
        "line",
        "origin",
        "parent_id",
        "raw",
        "role",
        "timestamp",
        "type",
    )

    def __init__(
        self,
        *,
        type: str,
        id: str,
        parent_id: str | None,
        timestamp: str,
        raw: bytes,
        role: str | None = None,
        line: int = 0,
        origin: str = "<memory>",
        entry: AnyEntry | None = None,
    ) -> None:
        self.type = type
        self.id = id
        self.parent_id = parent_id
        self.timestamp = timestamp
        self.raw = raw
        self.role = role
        self.line = line
        self.origin = origin
        self._entry = entry
        self._message: AgentMessage | None = None

    @classmethod
    def read(
        cls,
        type: str,
        id: str,
        parent_id: str | None,
        timestamp: str,
        raw: bytes,
        role: str | None,
        line: int,
        origin: str,
    ) -> StoredEntry:
        """An entry just read from a file, nothing decoded: what the constructor makes, with
        positional arguments and without its keyword handling (opening a long session makes
        thousands; the keywords cost as much again as the rest of it)."""
        stored = _new(cls)
        stored.type = type
        stored.id = id
        stored.parent_id = parent_id
        stored.timestamp = timestamp
        stored.raw = raw
        stored.role = role
        stored.line = line
        stored.origin = origin
        stored._entry = None
        stored._message = None
        return stored

    @classmethod
    def from_entry(cls, entry: SessionEntry, *, origin: str = "<memory>") -> StoredEntry:
        """Wrap an entry built in this process; its line is what the codec writes."""
        role = entry.message.role if isinstance(entry, MessageEntry) else None
        # Its message was encoded for message_end just before; the line kept at its size.
        raw = compact(encode_reusing(entry))
        carried = entry_system_message(entry)
        if carried is not None:
            pieces = shared_system_json(raw, (carried,))
            if not isinstance(pieces, bytes):
                held = SharedLineEntry(
                    type=entry.type,
                    id=entry.id,
                    parent_id=entry.parent_id,
                    timestamp=entry.timestamp,
                    raw=b"",
                    role=role,
                    origin=origin,
                    entry=entry,
                )
                held.pieces = pieces
                return held
        return cls(
            type=entry.type,
            id=entry.id,
            parent_id=entry.parent_id,
            timestamp=entry.timestamp,
            raw=raw,
            role=role,
            origin=origin,
            entry=entry,
        )

    def reparented(self, parent_id: str | None) -> StoredEntry:
        """A copy with another parent: the line rewritten with only ``parentId`` changed."""
        value = self.json()
        value["parentId"] = parent_id  # an existing key: orjson keeps its place
        entry = self._entry
        if entry is not None:
            entry = attrs.evolve(entry, parent_id=parent_id)
        copy = StoredEntry(
            type=self.type,
            id=self.id,
            parent_id=parent_id,
            timestamp=self.timestamp,
            raw=compact(dumps(value)),  # a lone surrogate escaped, as read
            role=self.role,
            line=self.line,
            origin=self.origin,
            entry=entry,
        )
        return copy

    def __repr__(self) -> str:
        return f"StoredEntry({self.type} {self.id} <- {self.parent_id}, line {self.line})"

    @property
    def decoded(self) -> bool:
        """Whether the typed entry has been decoded (and cached) already."""
        return self._entry is not None

    @property
    def is_assistant_message(self) -> bool:
        """Whether this is a ``message`` entry holding an assistant message."""
        return self.role == "assistant" and self.type == "message"

    def entry(self) -> AnyEntry:
        """The typed entry (decoded on first use, then cached)."""
        entry = self._entry
        if entry is None:
            entry = self._decode(loads_line(self.raw))
            self._entry = entry
        return entry

    def decode_from(self, value: dict[str, Any]) -> AnyEntry:
        """Decode from an already parsed JSON object of this line (saves parsing it twice)."""
        entry = self._entry
        if entry is None:
            entry = self._decode(value)
            self._entry = entry
        return entry

    def json(self) -> dict[str, Any]:
        """The entry's JSON object as stored (parsed from the raw line each time)."""
        value: dict[str, Any] = loads_line(self.raw)
        return value

    def message_bytes(self) -> bytes | None:
        """A ``message`` entry's message as the JSON text its line holds, when that can be
        cut out of the line without parsing it (:class:`TailMessageEntry`); else ``None``."""
        return None

    def message_json(self) -> Any:
        """A ``message`` entry's message as the JSON object its line holds, parsed and not
        decoded: what pi sends for a message it read from a file (``get_messages`` of a long
        session re-encoded 48,000 decoded messages; issue 38)."""
        value = loads_line(self.raw).get("message")
        if not isinstance(value, dict):
            raise self._error(f"entry {self.id} has no message object")
        return value

    def message(self) -> AgentMessage:
        """What this entry contributes to the model context (the caller checks it does)."""
        message = self._message
        if message is None:
            message = self._to_message()
            self._message = message
        return message

    def _to_message(self) -> AgentMessage:
        if self._entry is None and self.type == "message":
            # The hot path of building a long context: decode only the message, straight
            # into its role's class (the envelope was checked when the line was read).
            value = self._message_value()
            cls = MESSAGE_CLASSES.get(self.role or "", AgentMessage)
            quick = _quick_decoder()(value, cls)  # it shares the names itself
            if quick is not None:
                return quick  # type: ignore[no-any-return]
            if self.role == "assistant":
                share_names(value)
            try:
                message: AgentMessage = fast_from_json(value, cls)
            except DecodeError as exc:
                raise self._error(f"entry {self.id} does not decode: {exc}") from exc
            return message
        entry = self.entry()
        if isinstance(entry, MessageEntry):
            return entry.message
        if isinstance(entry, CustomMessageEntry):
            return CustomMessage(
                custom_type=entry.custom_type,
                content=entry.content,
                display=entry.display,
                details=entry.details,
                timestamp=iso_to_ms(entry.timestamp),
            )
        if isinstance(entry, BranchSummaryEntry):
            return BranchSummaryMessage(
                summary=entry.summary, from_id=entry.from_id, timestamp=iso_to_ms(entry.timestamp)
            )
        raise TypeError(f"a {self.type} entry has no message")

    def _message_value(self) -> Any:
        """A ``message`` entry's message as parsed from its line (not decoded)."""
        return loads_line(self.raw)["message"]

    def _decode(self, value: Any) -> AnyEntry:
        cls = ENTRY_CLASSES.get(self.type)
        if cls is None:
            if not isinstance(value, dict):
                raise self._error("not a JSON object")
            return UnknownEntry(
                type=self.type,
                id=self.id,
                parent_id=self.parent_id,
                timestamp=self.timestamp,
                data=value,
            )
        try:
            entry: SessionEntry = fast_from_json(value, cls)
        except DecodeError as exc:
            raise self._error(f"entry {self.id} does not decode: {exc}") from exc
        return entry

    def _error(self, problem: str) -> SessionFileError:
        return SessionFileError(self.origin, self.line, problem)


MESSAGE_KEY = b'"message":{'
"""Where a :class:`TailMessageEntry` line's message begins (its first occurrence)."""
_TIMESTAMP_SLOT: Any = StoredEntry.__dict__["timestamp"]  # the slot a property stands over


class TailMessageEntry(StoredEntry):
    """A ``message`` entry read from a line holding only ``type``, ``id``, ``parentId``,
    ``timestamp`` (strings or null) and, last, its message, as pi and pitrio write them: the
    message's JSON text is the line's tail, cut out without parsing the line (``get_messages``
    of a long session; issue 38). The reader knows the keys from the line it parsed. No state
    of its own: the class is the mark."""

    __slots__ = ()

    @classmethod
    def read(
        cls,
        type: str,
        id: str,
        parent_id: str | None,
        timestamp: str,
        raw: bytes,
        role: str | None,
        line: int,
        origin: str,
    ) -> StoredEntry:
        """:meth:`StoredEntry.read`, without keeping ``timestamp``: it is in the line, read
        from there when asked (rarely: a tree's sibling order, a fork's copy), and on a
        48,000-entry session the strings were 3 MB (issue 38)."""
        stored = _new(cls)
        stored.type = type
        stored.id = id
        stored.parent_id = parent_id
        stored.raw = raw
        stored.role = role
        stored.line = line
        stored.origin = origin
        stored._entry = None
        stored._message = None
        return stored

    @property
    def timestamp(self) -> str:
        """The entry's timestamp: as set, else read from the line."""
        try:
            return _TIMESTAMP_SLOT.__get__(self, StoredEntry)  # type: ignore[no-any-return]
        except AttributeError:
            value = loads_line(self.raw)["timestamp"]
            assert isinstance(value, str)  # checked when the line was read
            return value

    @timestamp.setter
    def timestamp(self, value: str) -> None:
        _TIMESTAMP_SLOT.__set__(self, value)

    def message_bytes(self) -> bytes | None:
        """The message's JSON text: from the line's first ``"message":{`` (the envelope's other
        values are strings, and no JSON string holds that: its quotes would be escaped) to the
        envelope's closing brace. ``None`` for a line spaced otherwise."""
        raw = self.raw
        start = raw.find(MESSAGE_KEY)
        if start < 0 or raw[-1:] != b"}":
            return None
        return raw[start + len(MESSAGE_KEY) - 1 : -1]


_RAW_SLOT: Any = StoredEntry.__dict__["raw"]


class MappedMessageEntry(TailMessageEntry):
    """A :class:`TailMessageEntry` whose line stays where the launcher's parsing child left
    it (:class:`pitrio._preparse.MappedLines`, memory shared with that child and mapped, not
    copied into this process: issue 38), read from there when asked. The child found the
    line in the quick path's shape and where its message lies, so ``get_messages`` cuts the
    message out without searching the line (:meth:`message_bytes`). Only
    :class:`~.preparsed.CheckedParser` makes them; everything else reads ``raw`` as of any
    entry. ``lines`` is ``None`` once ``raw`` was set: then the line is held as usual."""

    __slots__ = ("lines",)

    lines: Any  # MappedLines | None

    @property
    def raw(self) -> bytes:
        """The entry's line (without its newline)."""
        lines = self.lines
        if lines is None:
            return _RAW_SLOT.__get__(self, StoredEntry)  # type: ignore[no-any-return]
        return lines.raw(self.line - lines.first)  # type: ignore[no-any-return]

    @raw.setter
    def raw(self, value: bytes) -> None:
        _RAW_SLOT.__set__(self, value)
        self.lines = None

    def message_bytes(self) -> bytes | None:
        """The message's JSON text, where the child found it; else as
        :meth:`TailMessageEntry.message_bytes` cuts it."""
        lines = self.lines
        if lines is None:
            return super().message_bytes()
        text = lines.message(self.line - lines.first)
        return super().message_bytes() if text is None else text

    def _message_value(self) -> Any:
        # Only the message's text parsed where the child found it: the line is certified
        # JSON whose last value it is, so that parses to the line's "message" value, and a
        # resumed session's first turn decodes 48,000 of them without copying each line.
        lines = self.lines
        if lines is not None:
            index = self.line - lines.first
            start = lines.starts[index]
            if start:
                # orjson read it in the child: no lone surrogate to fall back for.
                return orjson.loads(lines.view[start : lines.bounds[index] - 2])
        return super()._message_value()


class SharedLineEntry(StoredEntry):
    """An entry built in this process holding a ``system`` message (a session's prompt
    sections and tool schemas, ~5 KB): its line is kept as pieces, the sections and tools
    held once for every session (:mod:`pitrio.messages.shared`); ``raw`` joins them (a line
    is read when it is written, rewritten or sent, not per turn)."""

    __slots__ = ("pieces",)

    pieces: Pieces

    @property
    def raw(self) -> bytes:
        """The entry's line."""
        return b"".join(self.pieces)

    @raw.setter
    def raw(self, value: bytes) -> None:
        self.pieces = (value,)
