"""What the model sees: pi's ``buildSessionContext`` (spec §4.9) plus ``context_edit`` (§4.5.1).

Pure: no I/O and no trio. :class:`Projection` holds the context of *one* leaf and keeps it up
to date as entries are appended there, so the per-turn cost does not grow with the session:

* appending an entry on the current leaf is O(1) (a list append, a dict insert); a
  ``compaction`` rebuilds the list from what it keeps, and a ``context_edit`` copies the list
  of message references once (C speed, no decoding) so views handed out earlier stay valid;
* :meth:`Projection.context` is O(1): it returns a view of the current list, not a copy. Views
  are snapshots: later appends do not show in a view taken before them, and any other change
  builds a new list rather than touching the old one;
* moving to another leaf rebuilds everything from the new path, O(path).

Messages are decoded from their stored lines only when a view is read, then cached on the
entry, so opening a long session and building its context does not decode the whole file.

The rules, as pi applies them:

1. no leaf -> no messages, thinking level ``"off"``, no model;
2. the path root -> leaf; ``thinking_level_change`` sets the level, ``model_change`` and
   assistant messages set the model;
3. ``message`` entries project as themselves, ``custom_message`` as a ``custom`` message,
   ``branch_summary`` with a non-empty summary as a ``branchSummary`` message; nothing else;
4. with a ``compaction`` on the path (the last one counts): its ``systemMessage`` checkpoint
   (when it has one) and its summary first, then the path entries before it from
   ``firstKeptEntryId`` on except ``system`` messages (the checkpoint folds them; none if that
   id is not on the path), then the entries after it;
5. ``context_edit`` entries that survive (4) apply to their target, the latest per target
   winning: ``replacement: null`` omits the target, otherwise only its content changes (a
   string becomes one text block; a ``system`` message keeps its content). Edits whose
   target is not projected are ignored.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

import attrs
import orjson

from pitrio.actors.session_store.storage import gc_paused
from pitrio.actors.session_store.stored import (
    KNOWN_ROLES,
    MESSAGE_KEY,
    MappedMessageEntry,
    StoredEntry,
    TailMessageEntry,
    iso_to_ms,
)
from pitrio.errors import PitrioError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemCheckpoint,
    SystemMessage,
    ToolResultMessage,
    UnknownMessage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent, text_of
from pitrio.messages.convert import positions_of
from pitrio.messages.entries import (
    BranchSummaryEntry,
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    ModelChangeEntry,
    ThinkingLevelChangeEntry,
)
from pitrio.messages.snapshot import FrozenView
from pitrio.messages.transcript import checkpoint_of, replay

DEFAULT_THINKING_LEVEL = "off"


@attrs.frozen
class ModelRef:
    """The model a context was last used with: ``{provider, modelId}``."""

    provider: str
    model_id: str


class _Synthetic:
    """A projected message that is not an entry's own: a compaction summary or an edit."""

    __slots__ = ("_message", "source_id")

    role: str | None = None
    """No stored role (:meth:`ContextMessages.stored_roles` reads it as an entry's)."""
    line = 0
    """Read from no line (:meth:`ContextMessages.stored_lines`)."""

    def __init__(self, message: AgentMessage, source_id: str) -> None:
        self._message = message
        self.source_id = source_id

    def message(self) -> AgentMessage:
        """The message (already built)."""
        return self._message


_Item = StoredEntry | _Synthetic
_ROLE = operator.attrgetter("role")
_LINE = operator.attrgetter("line")


def _source_id(item: _Item) -> str:
    return item.id if isinstance(item, StoredEntry) else item.source_id


class ContextMessages(FrozenView[AgentMessage]):
    """A read-only view of projected messages; entries are decoded on first access.

    A snapshot: it never changes after it was handed out. Decoding errors raise
    :class:`~pitrio.errors.SessionFileError` naming file and line.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[_Item], length: int) -> None:
        self._items = items
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> list[AgentMessage]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | list[AgentMessage]:
        if isinstance(index, slice):
            return [self._items[i].message() for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("context message index out of range")
        return self._items[index].message()

    def __iter__(self) -> Iterator[AgentMessage]:
        items = self._items
        for i in range(self._length):
            yield items[i].message()

    def __repr__(self) -> str:
        return f"ContextMessages({self._length} messages)"

    def json_value(self, index: int) -> Any:
        """Message ``index`` as plain JSON, or as ``bytes`` holding its JSON text: a stored
        message entry's straight from its line (nothing decoded; its text where it can be cut
        out of the line unparsed), any other message encoded from its typed form."""
        return self._json_of(self._items[index])

    def json_values(self, start: int, stop: int) -> list[Any]:
        """:meth:`json_value` of messages ``start`` to ``stop`` (``0 <= start <= stop <=
        len(self)``), in one loop: ``get_messages`` of a long session asks for 48,000."""
        return self._texts(start, stop, views=False, other=self._json_of)

    def _texts(
        self, start: int, stop: int, *, views: bool, other: Callable[[_Item], Any]
    ) -> list[Any]:
        """Each message's JSON text where its stored line holds it in pi's usual shape (a
        ``memoryview`` of a mapped line with ``views``, else ``bytes``), else ``other(item)``:
        ``message_bytes`` without the calls (48,000 on a long session)."""
        out: list[Any] = []
        append = out.append
        tail_class, mapped_class = TailMessageEntry, MappedMessageEntry
        key, skip = MESSAGE_KEY, len(MESSAGE_KEY) - 1
        for item in self._items[start:stop]:
            if item.__class__ is mapped_class:
                # Where the child found the message (a resumed long session's entries, as
                # the launcher read them).
                lines = item.lines
                if lines is not None:
                    index = item.line - lines.first
                    found = lines.starts[index]
                    if found:
                        data = lines.view if views else lines.data
                        append(data[found : lines.bounds[index] - 2])
                        continue
            elif item.__class__ is tail_class:
                raw = item.raw
                at = raw.find(key)
                if at >= 0 and raw[-1:] == b"}":
                    append(raw[at + skip : -1])
                    continue
            append(other(item))
        return out

    def stored_roles(self) -> list[str | None]:
        """Each message's role where it is a stored ``message`` entry's (known without
        decoding it), ``None`` for the rest (a summary, a custom message, an edit's result):
        what a converter reads to keep the stored ones undecoded (issue 38)."""
        # An entry of another type has no role, nor has a summary or an edit (_Synthetic):
        # one C-level pass (issue 38: 48,000 items at a resumed session's start).
        return list(map(_ROLE, self._items[: self._length]))

    def stored_texts(self, start: int, stop: int) -> list[Any]:
        """The JSON text (``bytes``, or a ``memoryview`` of a mapped line) of messages
        ``start`` to ``stop`` that are stored ``message`` entries, ``None`` for the others
        (and for a line whose message cannot be read): what :mod:`pitrio._prefix_chat`
        converts without decoding (issue 38)."""
        return self._texts(start, stop, views=True, other=_stored_text)

    def stored_lines(self) -> list[int]:
        """Each message's entry's line in the file it was read from (see
        :attr:`StoredEntry.line`), 0 for an entry made here, a summary or an edit's result:
        meaningful where :meth:`stored_roles` gives a role."""
        return list(map(_LINE, self._items[: self._length]))

    def system_messages(self, start: int = 0) -> list[SystemMessage]:
        """The system messages from ``start`` on, decoding only those: a stored entry's
        role says which they are (issue 38: the request's prompt and tools are their
        replay, read before a resumed session's first turn). Found by a search of the
        roles in C: a summary or an edit's result (no role) is looked at, the rest not."""
        items = self._items[start : self._length]
        roles = list(map(_ROLE, items))
        out: list[SystemMessage] = []
        for index in positions_of(roles, ("system", None)):
            item = items[index]
            if isinstance(item, StoredEntry) and (item.type != "message" or item.role is None):
                continue  # another entry type (a custom message, a branch summary)
            message = item.message()
            if isinstance(message, SystemMessage):
                out.append(message)
        return out

    def _json_of(self, item: _Item) -> Any:
        if isinstance(item, StoredEntry) and item.type == "message":
            text = item.message_bytes()
            return item.message_json() if text is None else text
        return to_json(item.message())

    def source_id(self, index: int) -> str:
        """The id of the entry message ``index`` comes from (a compaction's for its summary)."""
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("context message index out of range")
        return _source_id(self._items[index])

    def materialize(self) -> tuple[AgentMessage, ...]:
        """Every message, decoded, as a tuple (O(n): for callers that need a copy).

        The cyclic garbage collector is paused meanwhile: decoding a long session allocates
        tens of thousands of acyclic objects, and the collections they would trigger walk
        everything alive again and again (a third of the time on 48,000 messages).
        """
        with gc_paused():
            return tuple(self)


@attrs.frozen
class SessionContext:
    """pi's ``SessionContext`` for one leaf: messages, thinking level and model."""

    leaf_id: str | None
    messages: ContextMessages
    thinking_level: str
    model: ModelRef | None


EMPTY_CONTEXT = SessionContext(
    leaf_id=None, messages=ContextMessages([], 0), thinking_level=DEFAULT_THINKING_LEVEL, model=None
)


def _stored_text(item: _Item) -> bytes | None:
    """A stored ``message`` entry's message as JSON text: cut out of its line, else parsed
    out of it and encoded again (a line of another envelope, an entry made here); ``None``
    for any other item, or where that fails (a broken line: its decode reports it)."""
    if not isinstance(item, StoredEntry) or item.type != "message":
        return None
    text = item.message_bytes()
    if text is not None:
        return text
    try:
        return orjson.dumps(item.message_json())
    except (PitrioError, orjson.JSONEncodeError):
        return None


def _projects(stored: StoredEntry) -> bool:
    """Whether an entry contributes a message to the context (rule 3)."""
    kind = stored.type
    if kind == "message":
        return stored.role in KNOWN_ROLES  # a role this version does not know is kept, unsent
    if kind == "custom_message":
        return True
    if kind == "branch_summary":
        entry = stored.entry()
        return isinstance(entry, BranchSummaryEntry) and bool(entry.summary)
    return False


def _is_system(stored: StoredEntry) -> bool:
    """Whether an entry is a ``message`` entry holding a ``system`` message."""
    return stored.role == "system" and stored.type == "message"


def system_checkpoint(messages: Iterable[AgentMessage], timestamp: int) -> SystemCheckpoint | None:
    """A compaction's ``systemMessage``: the context's system messages replayed into one
    (stamped with the compaction's time), ``None`` when the context has none."""
    replayed = replay(messages)
    return None if replayed is None else checkpoint_of(replayed, timestamp)


def _blocks(replacement: ContentReplacement) -> tuple[TextContent | ImageContent, ...]:
    content = replacement.content
    if isinstance(content, str):
        return (TextContent(text=content),)
    return content


def edited_message(message: AgentMessage, replacement: ContentReplacement) -> AgentMessage:
    """``message`` with its content replaced, every other field kept (rule 5).

    Roles without a ``content`` field take the replacement's text: a bash execution as its
    ``output``, a summary as its ``summary``. An assistant message keeps only text blocks.
    """
    blocks = _blocks(replacement)
    if isinstance(message, UserMessage | ToolResultMessage | CustomMessage):
        return attrs.evolve(message, content=blocks)
    if isinstance(message, AssistantMessage):
        texts = tuple(block for block in blocks if isinstance(block, TextContent))
        return attrs.evolve(message, content=texts)
    if isinstance(message, BashExecutionMessage):
        return attrs.evolve(message, output=text_of(blocks))
    if isinstance(message, SystemMessage):
        return message  # pi 1.6.0 edits only the content of conversation messages
    if isinstance(message, UnknownMessage):
        return message  # nothing known to replace (and never projected)
    return attrs.evolve(message, summary=text_of(blocks))


class Projection:
    """The context at one leaf, maintained incrementally (see the module docstring)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_compaction", "_edited", "_items", "_kept_from", "_omitted",
        "_path", "_pos", "model", "thinking_level",
    )
    # fmt: on

    def __init__(self, path: Sequence[StoredEntry] = ()) -> None:
        self._path: list[StoredEntry] = []
        # Path index of each entry id, made when first asked (a compaction's kept entry, a
        # context edit's target): most sessions never ask, and on a 48,000-entry path it is
        # 3 MB and a fifth of the projection's time (issue 38).
        self._pos: dict[str, int] | None = None
        self._items: list[_Item] = []
        self._compaction: int | None = None  # path index of the last compaction
        self._kept_from: int | None = None  # path index of its first kept entry
        self._edited: dict[str, _Synthetic] = {}  # target id -> its edited form, if shown
        self._omitted: set[str] = set()  # target ids an edit removed
        self.thinking_level = DEFAULT_THINKING_LEVEL
        self.model: ModelRef | None = None
        self.reset(path)

    @property
    def leaf_id(self) -> str | None:
        """The id of the leaf this projection is for."""
        return self._path[-1].id if self._path else None

    @property
    def latest_compaction_timestamp(self) -> str | None:
        """The timestamp of the path's last ``compaction`` entry (O(1)), if there is one."""
        return None if self._compaction is None else self._path[self._compaction].timestamp

    def context(self) -> SessionContext:
        """The current context: O(1), a snapshot view."""
        return SessionContext(
            leaf_id=self.leaf_id,
            messages=ContextMessages(self._items, len(self._items)),
            thinking_level=self.thinking_level,
            model=self.model,
        )

    # -- whole path ----------------------------------------------------------------------------

    def reset(self, path: Sequence[StoredEntry]) -> None:
        """Project a new path (root -> leaf) from scratch: O(path). A ``list`` is taken over,
        not copied (:meth:`~.tree.SessionTree.path` makes a new one for every caller; a copy
        of a 48,000-entry path touches every entry once more): the caller hands it over and
        keeps no use of it. Any other sequence is copied."""
        self._path = path if isinstance(path, list) else list(path)
        self._pos = None
        self._compaction = None
        self._kept_from = None
        self.thinking_level = DEFAULT_THINKING_LEVEL
        self.model = None
        # Only the last setter of each matters: find them walking back, decoding just those.
        level_found = model_found = False
        for index in range(len(self._path) - 1, -1, -1):
            stored = self._path[index]
            kind = stored.type
            if kind == "compaction" and self._compaction is None:
                self._compaction = index
            elif kind == "thinking_level_change" and not level_found:
                level_found = True
                self._set_level(stored)
            elif not model_found and (kind == "model_change" or stored.is_assistant_message):
                model_found = True
                self._set_model(stored)
            if level_found and model_found and self._compaction is not None:
                break
        if self._compaction is not None:
            self._kept_from = self._find_kept(self._compaction)
        self._rebuild_items()

    def _positions(self) -> dict[str, int]:
        """The path index of each entry id on the path (made on first use, then kept)."""
        pos = self._pos
        if pos is None:
            pos = self._pos = {stored.id: index for index, stored in enumerate(self._path)}
        return pos

    def _find_kept(self, compaction_index: int) -> int | None:
        entry = self._path[compaction_index].entry()
        assert isinstance(entry, CompactionEntry)
        kept = self._positions().get(entry.first_kept_entry_id)
        return kept if kept is not None and kept < compaction_index else None

    def _surviving(self) -> list[StoredEntry]:
        """The path entries rule 4 keeps, in order."""
        compaction = self._compaction
        if compaction is None:
            return self._path
        kept = [] if self._kept_from is None else self._path[self._kept_from : compaction]
        # The kept range's system messages are folded into the compaction's checkpoint.
        kept = [stored for stored in kept if not _is_system(stored)]
        return kept + self._path[compaction + 1 :]

    def _rebuild_items(self) -> None:
        surviving = self._surviving()
        edits: dict[str, ContextEditEntry] = {}
        for stored in surviving:
            if stored.type == "context_edit":
                found = stored.entry()
                if isinstance(found, ContextEditEntry):
                    edits[found.target_id] = found
        items: list[_Item] = []
        if self._compaction is not None:
            compaction = self._path[self._compaction]
            entry = compaction.entry()
            assert isinstance(entry, CompactionEntry)
            summary = CompactionSummaryMessage(
                summary=entry.summary,
                tokens_before=entry.tokens_before,
                timestamp=iso_to_ms(entry.timestamp),
            )
            if entry.system_message is not None:
                items.append(_Synthetic(entry.system_message.message(), compaction.id))
            items.append(_Synthetic(summary, compaction.id))
        self._edited = {}
        self._omitted = set()
        if not edits:
            # The message test inline: it is nearly every entry of a long path.
            items.extend(
                stored
                for stored in surviving
                if (stored.type == "message" and stored.role in KNOWN_ROLES) or _projects(stored)
            )
        else:
            for stored in surviving:
                if not _projects(stored):
                    continue
                edit = edits.get(stored.id)
                if edit is None:
                    items.append(stored)
                elif edit.replacement is None:
                    self._omitted.add(stored.id)
                else:
                    message = edited_message(stored.message(), edit.replacement)
                    shown = _Synthetic(message, stored.id)
                    self._edited[stored.id] = shown
                    items.append(shown)
        self._items = items

    def _set_level(self, stored: StoredEntry) -> None:
        entry = stored.entry()
        if isinstance(entry, ThinkingLevelChangeEntry):
            self.thinking_level = entry.thinking_level

    def _set_model(self, stored: StoredEntry) -> None:
        if stored.type == "model_change":
            entry = stored.entry()
            if isinstance(entry, ModelChangeEntry):
                self.model = ModelRef(entry.provider, entry.model_id)
            return
        message = stored.message()
        if isinstance(message, AssistantMessage):
            self.model = ModelRef(message.provider, message.model)

    # -- one more entry --------------------------------------------------------------------------

    def append(self, stored: StoredEntry) -> None:
        """Extend the path by an entry appended at its leaf (its parent is :attr:`leaf_id`)."""
        index = len(self._path)
        self._path.append(stored)
        if self._pos is not None:
            self._pos[stored.id] = index
        kind = stored.type
        if kind == "message":
            if stored.role == "assistant":
                self._set_model(stored)
            if stored.role in KNOWN_ROLES:
                self._items.append(stored)
        elif kind == "custom_message":
            self._items.append(stored)
        elif kind == "branch_summary":
            if _projects(stored):
                self._items.append(stored)
        elif kind == "thinking_level_change":
            self._set_level(stored)
        elif kind == "model_change":
            self._set_model(stored)
        elif kind == "compaction":
            self._compaction = index
            self._kept_from = self._find_kept(index)
            self._rebuild_items()
        elif kind == "context_edit":
            self._apply_edit(stored)

    def _in_region(self, index: int) -> bool:
        compaction = self._compaction
        if compaction is None or index > compaction:
            return True
        kept = self._kept_from
        return kept is not None and kept <= index < compaction

    def _apply_edit(self, stored: StoredEntry) -> None:
        edit = stored.entry()
        if not isinstance(edit, ContextEditEntry):
            return
        target_id = edit.target_id
        index = self._positions().get(target_id)
        if index is None or not self._in_region(index):
            return
        target = self._path[index]
        if not _projects(target):
            return
        if target_id in self._omitted:
            if edit.replacement is not None:
                self._rebuild_items()  # bring it back at its place: rare, O(path)
            return
        current: _Item = self._edited.get(target_id, target)
        position = self._items.index(current)  # identity comparisons, C speed
        items = list(self._items)  # a new list: views handed out keep the old one
        if edit.replacement is None:
            del items[position]
            self._edited.pop(target_id, None)
            self._omitted.add(target_id)
        else:
            shown = _Synthetic(edited_message(target.message(), edit.replacement), target_id)
            items[position] = shown
            self._edited[target_id] = shown
        self._items = items
