"""Partial assistant messages that cost O(delta) to make (issue 38).

A streamed reply sends one event per delta, and every event carries the message so far. Built
as a plain :class:`AssistantMessage`, each snapshot copies the whole text of the block being
streamed (quadratic in the reply's length) and builds a dozen objects that almost nobody
reads: the RPC, JSON and websocket encoders send only the delta and the usage.

:class:`PartialMessage` is the snapshot made lazily. It *is* an :class:`AssistantMessage`
(a subclass, so ``isinstance``, pattern matching, the codec, ``attrs.evolve`` and equality
treat it as one), but it holds only:

* a *header*: an :class:`AssistantMessage` with no content, shared by every snapshot until
  the usage, response id or another field changes;
* a *layout*: the blocks as they stood at the last block boundary (start, end, a tool call's
  arguments parsing), each either a finished block or a :class:`StreamingText`, the append-only
  pieces of a text or thinking block that is still streaming, shared by every snapshot;
* *counts*: how many pieces of each streaming block it covers (what makes it a snapshot);
* its text size (:func:`content_chars` of its content), for the subscriber buffer's weight.

Reading ``content`` (or any field) returns what the eager snapshot would have held: the
message is materialized on first read and kept. Joins are cached per streaming block, so
materializing successive snapshots costs the new pieces plus one copy of the text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NoReturn

import attrs

from pitrio.messages.agent import AssistantMessage
from pitrio.messages.content import AssistantBlock, TextContent, ThinkingContent

_SEQUENCES = (tuple, list)


def content_chars(content: object) -> int:
    """Characters of text a message's (or tool result's) content holds: text, thinking, an
    image's data and a tool call's string arguments (top level). A string counts whole."""
    if isinstance(content, str):
        return len(content)
    if not isinstance(content, _SEQUENCES):
        return 0
    total = 0
    for block in content:
        # The common blocks by their type (this runs for every event a subscriber queues);
        # any other by the fields it may hold.
        kind = type(block)
        if kind is TextContent:
            total += len(block.text)
        elif kind is ThinkingContent:
            total += len(block.thinking)
        else:
            total += _block_chars(block)
    return total


def _block_chars(block: object) -> int:
    total = 0
    for name in ("text", "thinking", "data"):
        value = getattr(block, name, None)
        if isinstance(value, str):
            total += len(value)
    arguments = getattr(block, "arguments", None)
    if isinstance(arguments, dict):
        total += sum(len(v) for v in arguments.values() if isinstance(v, str))
    return total


class StreamingText:
    """The text of a text or thinking block still streaming: pieces appended, never changed.

    A snapshot covers the first ``count`` pieces; :meth:`text` joins them, reusing the last
    join when the wanted text extends it (the usual order: each reader asks for a later
    snapshot than before).
    """

    __slots__ = ("_joined", "chars", "kind", "pieces")

    def __init__(self, kind: Literal["text", "thinking"], text: str = "") -> None:
        self.kind = kind
        self.pieces: list[str] = [text] if text else []
        self.chars = len(text)
        # The last join and how many pieces it covers, one value so a reader never sees the
        # count of one join with the text of another.
        self._joined: tuple[int, str] = (0, "")

    def append(self, delta: str) -> None:
        """Add ``delta`` at the end."""
        self.pieces.append(delta)
        self.chars += len(delta)

    def extend(self, deltas: list[str]) -> int:
        """Add each of ``deltas`` at the end, as many :meth:`append` calls would; the
        characters added."""
        self.pieces += deltas
        added = sum(map(len, deltas))
        self.chars += added
        return added

    def text(self, count: int | None = None) -> str:
        """The text of the first ``count`` pieces (all of them by default)."""
        pieces = self.pieces
        if count is None:
            count = len(pieces)
        known, joined = self._joined
        if count == known:
            return joined
        if count < known:
            return "".join(pieces[:count])  # an older snapshot: the cache stays on the newer
        joined += "".join(pieces[known:count])
        self._joined = (count, joined)
        return joined

    def block(self, count: int | None = None) -> TextContent | ThinkingContent:
        """The block as an eager snapshot shows it (no signature while streaming)."""
        text = self.text(count)
        return TextContent(text=text) if self.kind == "text" else ThinkingContent(thinking=text)


LayoutItem = AssistantBlock | StreamingText


@attrs.frozen
class Layout:
    """The blocks at the last block boundary (see the module docstring), shared by snapshots."""

    items: tuple[LayoutItem, ...]
    streaming: tuple[StreamingText, ...]
    """The :class:`StreamingText` items, in content order."""
    fixed_chars: int
    """:func:`content_chars` of the finished blocks."""

    @classmethod
    def of(cls, items: Sequence[LayoutItem]) -> Layout:
        """The layout of ``items``."""
        items = tuple(items)
        streaming = tuple(item for item in items if type(item) is StreamingText)
        fixed = content_chars([item for item in items if type(item) is not StreamingText])
        return cls(items, streaming, fixed)

    def counts(self) -> tuple[int, ...]:
        """How many pieces each streaming block holds now."""
        streaming = self.streaming
        if len(streaming) == 1:  # the usual case, without a generator per delta
            return (len(streaming[0].pieces),)
        return tuple(len(item.pieces) for item in streaming)

    def chars(self) -> int:
        """:func:`content_chars` of the content as it stands now."""
        total = self.fixed_chars
        for item in self.streaming:
            total += item.chars
        return total

    def content(self, counts: tuple[int, ...] | None = None) -> tuple[AssistantBlock, ...]:
        """The content with each streaming block at its count (now, by default)."""
        if not self.streaming:
            return self.items  # type: ignore[return-value]  # no StreamingText among them
        position = iter(counts) if counts is not None else None
        out: list[AssistantBlock] = []
        for item in self.items:
            if type(item) is StreamingText:
                out.append(item.block(None if position is None else next(position)))
            else:
                out.append(item)  # type: ignore[arg-type]  # a finished block
        return tuple(out)


class PartialMessage(AssistantMessage):
    """A snapshot of a streaming assistant message, materialized when first read (see the
    module docstring). Make one with :func:`partial_message`."""

    __slots__ = ("_counts", "_header", "_layout", "_message", "text_chars")

    _header: AssistantMessage
    _layout: Layout
    _counts: tuple[int, ...]
    _message: AssistantMessage | None
    text_chars: int
    """:func:`content_chars` of this snapshot's content, known without materializing it."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # Only reached through ``PartialMessage(...)``, as ``attrs.evolve`` calls it: a changed
        # copy of a snapshot is an ordinary message. (partial_message makes the instances.)
        return AssistantMessage(*args, **kwargs)

    def materialize(self) -> AssistantMessage:
        """This snapshot as an ordinary :class:`AssistantMessage` (made once)."""
        message = self._message
        if message is None:
            content = self._layout.content(self._counts)
            message = attrs.evolve(self._header, content=content)
            object.__setattr__(self, "_message", message)
        return message

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartialMessage):
            other = other.materialize()
        if not isinstance(other, AssistantMessage):
            return NotImplemented
        return self.materialize() == other

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __hash__(self) -> int:
        return hash(self.materialize())

    def __reduce__(self) -> tuple[Any, ...]:
        # Copies and pickles are of the ordinary message: nothing outside keeps the builder.
        return (_same, (self.materialize(),))

    def __setstate__(self, state: Any) -> NoReturn:
        raise TypeError("a PartialMessage is made by partial_message()")


def _same(message: AssistantMessage) -> AssistantMessage:
    return message


def _header_field(name: str) -> property:
    def read(self: PartialMessage) -> Any:
        return getattr(self._header, name)

    read.__name__ = name
    return property(read, doc=f"The message's ``{name}`` (from its header).")


def _content(self: PartialMessage) -> tuple[AssistantBlock, ...]:
    return self.materialize().content


# Every field reads the header, ``content`` the materialized message. Installed here rather
# than written out so they follow AssistantMessage's fields (and the type checker keeps
# seeing them as that class's attributes).
for _field in attrs.fields(AssistantMessage):
    setattr(PartialMessage, _field.name, _header_field(_field.name))
PartialMessage.content = property(_content, doc="The content, materialized on first read.")  # type: ignore[assignment]

_new = object.__new__
# The slots set through their descriptors: half the time of object.__setattr__, and one of
# these is made per streamed delta (issue 38).
_slots: dict[str, Any] = dict(vars(PartialMessage))
_set_header = _slots["_header"].__set__
_set_layout = _slots["_layout"].__set__
_set_counts = _slots["_counts"].__set__
_set_message = _slots["_message"].__set__
_set_chars = _slots["text_chars"].__set__


def partial_message(
    header: AssistantMessage, layout: Layout, counts: tuple[int, ...], chars: int
) -> PartialMessage:
    """A snapshot of ``header``'s message whose content is ``layout`` at ``counts``;
    ``chars`` is :func:`content_chars` of that content (``layout.chars()`` at that moment)."""
    message: PartialMessage = _new(PartialMessage)
    _set_header(message, header)
    _set_layout(message, layout)
    _set_counts(message, counts)
    _set_message(message, None)
    _set_chars(message, chars)
    return message


def message_chars(message: object) -> int:
    """:func:`content_chars` of a message's content, without materializing a snapshot."""
    if type(message) is PartialMessage:
        return message.text_chars
    return content_chars(getattr(message, "content", ()))
