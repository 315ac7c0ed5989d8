"""Preparing a transcript for a vendor: what every HTTP provider does before its own mapping. Pure.

* failed and aborted responses are left out (their content is incomplete, and vendors reject
  tool calls that have no result), together with results of tool calls no longer present;
* a tool call without a result gets a synthetic error result, so the vendor sees a pairing;
* responses of another model keep their text and tool calls, but their thinking becomes plain
  text (a signature only means something to the model that produced it) and redacted thinking
  is dropped;
* images sent to a model without image input become a short text note;
* tool-call ids are rewritten by the provider's ``normalize_id`` (vendors restrict their
  alphabet and length), the same way in calls and results.
"""

from __future__ import annotations

import base64
import collections
import hashlib
import itertools
import re
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

import attrs
import orjson

from pitrio.messages.agent import AssistantMessage, LlmMessage, ToolResultMessage, UserMessage
from pitrio.messages.codec import dumps
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import extends
from pitrio.messages.model import Model
from pitrio.messages.snapshot import immutable

NO_RESULT_TEXT = "No result provided"
"""Text of the synthetic result of a tool call that has none."""

IMAGE_OMITTED_TEXT = "(image omitted: model does not support images)"
"""What stands for a user's images sent to a model without image input (pi's wire text)."""

TOOL_IMAGE_OMITTED_TEXT = "(tool image omitted: model does not support images)"
"""The same for a tool result's images."""

IdNormalizer = Callable[[str], str]


def same_model(message: AssistantMessage, model: Model) -> bool:
    """Whether ``message`` was produced by ``model`` (so its signatures are valid for it)."""
    return (
        message.provider == model.provider
        and message.api == model.api
        and message.model == model.id
    )


def short_hash(text: str, length: int) -> str:
    """A stable alphanumeric digest of ``text``, ``length`` characters long."""
    digest = base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().lower()
    return re.sub(r"[^a-z0-9]", "", digest)[:length]


def _strip_images(
    content: tuple[TextContent | ImageContent, ...], placeholder: str = IMAGE_OMITTED_TEXT
) -> tuple[TextContent | ImageContent, ...]:
    for block in content:
        if isinstance(block, ImageContent):
            break
    else:
        return content  # the common case: nothing to replace, no copy
    out: list[TextContent | ImageContent] = []
    for block in content:
        if isinstance(block, ImageContent):
            if not (out and isinstance(out[-1], TextContent) and out[-1].text == placeholder):
                out.append(TextContent(text=placeholder))
        else:
            out.append(block)
    return tuple(out)


def _foreign_blocks(
    message: AssistantMessage,
) -> tuple[TextContent | ThinkingContent | ToolCall, ...]:
    out: list[TextContent | ThinkingContent | ToolCall] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted or not block.thinking.strip():
                continue
            out.append(TextContent(text=block.thinking))
        elif isinstance(block, TextContent):
            out.append(TextContent(text=block.text))
        else:
            out.append(attrs.evolve(block, thought_signature=None))
    return tuple(out)


class TranscriptPreparer:
    """:func:`prepare_messages` one message at a time, so a caller that sees the same
    transcript grow can keep the state of its prefix (:meth:`copy`) and feed only what is new.

    :meth:`feed` returns the prepared messages a message gives (synthetic results of calls
    left without one come first); :meth:`finish` the synthetic results still owed at the end.
    """

    def __init__(self, model: Model, normalize_id: IdNormalizer | None = None) -> None:
        self.model = model
        self.images = "image" in model.input
        self.rename = normalize_id or (lambda value: value)
        self.pending: list[ToolCall] = []  # calls of the last kept response awaiting results

    def copy(self) -> TranscriptPreparer:
        """An independent preparer in the same state."""
        twin = TranscriptPreparer.__new__(TranscriptPreparer)
        twin.model, twin.images, twin.rename = self.model, self.images, self.rename
        twin.pending = list(self.pending)
        return twin

    def _close_pending(self, out: list[LlmMessage]) -> None:
        for call in self.pending:
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(TextContent(text=NO_RESULT_TEXT),),
                    is_error=True,
                    timestamp=0,
                )
            )
        self.pending.clear()

    def feed(self, message: LlmMessage) -> list[LlmMessage]:
        """What ``message`` becomes for the model (possibly nothing)."""
        out: list[LlmMessage] = []
        if isinstance(message, AssistantMessage):
            if self.pending:
                self._close_pending(out)
            if message.stop_reason in ("error", "aborted"):
                return out
            model, rename = self.model, self.rename
            blocks = message.content if same_model(message, model) else _foreign_blocks(message)
            calls = [block for block in blocks if isinstance(block, ToolCall)]
            if calls:
                renamed = [rename(call.id) for call in calls]
                if renamed != [call.id for call in calls]:
                    ids = iter(renamed)
                    blocks = tuple(
                        attrs.evolve(block, id=next(ids)) if isinstance(block, ToolCall) else block
                        for block in blocks
                    )
                    calls = [block for block in blocks if isinstance(block, ToolCall)]
            # Copies are made only when something changed: most messages go out as they are.
            kept = message if blocks is message.content else attrs.evolve(message, content=blocks)
            out.append(kept)
            self.pending.extend(calls)
        elif isinstance(message, ToolResultMessage):
            call_id = self.rename(message.tool_call_id)
            match = next((call for call in self.pending if call.id == call_id), None)
            if match is None:
                return out  # its call was in a response left out, or answered already
            self.pending.remove(match)
            content = (
                message.content
                if self.images
                else _strip_images(message.content, TOOL_IMAGE_OMITTED_TEXT)
            )
            if call_id != message.tool_call_id or content is not message.content:
                message = attrs.evolve(message, tool_call_id=call_id, content=content)
            out.append(message)
        else:
            if self.pending:
                self._close_pending(out)
            if (
                isinstance(message, UserMessage)
                and not self.images
                and not isinstance(message.content, str)
            ):
                stripped = _strip_images(message.content)
                if stripped is not message.content:
                    message = attrs.evolve(message, content=stripped)
            out.append(message)
        return out

    def finish(self) -> list[LlmMessage]:
        """The synthetic results owed at the end (the preparer is then spent)."""
        out: list[LlmMessage] = []
        if self.pending:
            self._close_pending(out)
        return out


class ResumableBuilder(Protocol):
    """A vendor-body builder that takes a transcript one message at a time."""

    def feed(self, message: LlmMessage) -> None:
        """Add one transcript message."""


B = TypeVar("B", bound=ResumableBuilder)


class PrefixCache(Generic[B]):
    """The builder states of recent transcripts, so a request whose messages extend an
    earlier request's (the same objects, in order) feeds only the new ones. Between
    compactions a session's transcript only grows: a turn then costs its new messages, not
    the whole history again. Least recently used transcripts are forgotten first.

    A builder's state is the conversion for one model as a whole (its compat flags, input
    kinds and the rest all decide how a message converts), so it is resumed only for an equal
    model; a model that differs in anything (a reloaded models.json) starts afresh."""

    def __init__(self, kept: int = 16) -> None:
        self.kept = kept
        self._entries: collections.OrderedDict[Hashable, tuple[Model, Sequence[LlmMessage], B]] = (
            collections.OrderedDict()
        )

    def builder(
        self,
        model: Model,
        messages: Sequence[LlmMessage],
        fresh: Callable[[], B],
        seed: Callable[[Sequence[LlmMessage]], tuple[B, int] | None] | None = None,
    ) -> B:
        """A builder for ``model`` fed with every message of ``messages`` (resumed when
        possible). With nothing to resume, ``seed`` may offer a builder already holding the
        first messages and how many (a resumed session's stored transcript, converted from
        its JSON: issue 38); the rest are fed to it."""
        # One transcript per endpoint and first message object (held, so its id is not reused
        # meanwhile).
        key = (model.provider, model.api, model.id, model.base_url)
        slot = (key, id(messages[0]) if messages else 0)
        cached = self._entries.pop(slot, None)
        builder: B | None = None
        start = 0
        if cached is not None:
            kept_model, source, state = cached
            # Equal models convert alike; attrs compares field by field, identical ones at once.
            if (kept_model is model or kept_model == model) and extends(source, messages):
                builder, start = state, len(source)
        if builder is None and seed is not None:
            seeded = seed(messages)
            if seeded is not None:
                builder, start = seeded
        if builder is None:
            builder = fresh()
        for message in messages[start:]:
            builder.feed(message)
        self._entries[slot] = (model, immutable(messages), builder)
        while len(self._entries) > self.kept:
            self._entries.popitem(last=False)
        return builder

    def states(self) -> list[tuple[Sequence[LlmMessage], B]]:
        """The kept (messages, builder) pairs, oldest first (for tests)."""
        return [(source, state) for _, source, state in self._entries.values()]


class FrozenSegment:
    """A full segment of :class:`EncodedItems`: encoded items joined by commas, never changed.

    Not a JSON value orjson knows: :func:`encode_json_pieces` keeps its bytes as a separate
    piece of the body, as they are, instead of copying them into it.
    """

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class EncodedItems:
    """The items of a JSON array under construction: plain values, or with ``encoded`` each
    value encoded once and kept in comma-joined segments (``e1,e2,...``).

    Full segments (:data:`SEGMENT_BYTES`) are frozen once (:class:`FrozenSegment`) and only
    the open one is copied per request, so building a request copies at most a segment, not
    the transcript (issue 10: per-turn cost against session length). A segment's bytes are
    inserted as they are, so comma-separated elements in one segment make exactly the bytes
    separate elements make (the providers' tests compare against the plain encoding); orjson
    spent ~3 ms walking one fragment per message of a 20,000-message transcript.
    """

    __slots__ = ("_count", "_frozen", "_open", "_plain")

    def __init__(self, *, encoded: bool) -> None:
        self._plain: list[Any] | None = None if encoded else []
        self._frozen: list[FrozenSegment] = []
        self._open = bytearray()
        self._count = 0

    def append(self, value: Any) -> None:
        """Add one value (a JSON-able object)."""
        self._count += 1
        if self._plain is not None:
            self._plain.append(value)
            return
        if self._open:
            self._open += b","
        self._open += _dumps_any(value)
        if len(self._open) >= SEGMENT_BYTES:
            self._frozen.append(FrozenSegment(bytes(self._open)))
            self._open = bytearray()

    def __len__(self) -> int:
        return self._count

    @classmethod
    def restored(cls, segments: Sequence[bytes], tail: bytes, count: int) -> EncodedItems:
        """Encoded items made elsewhere in this class's form (full segments, the open one,
        the number of items): a resumed session's prefix (:mod:`pitrio._prefix_chat`)."""
        items = cls(encoded=True)
        items._frozen = [FrozenSegment(segment) for segment in segments]
        items._open = bytearray(tail)
        items._count = count
        return items

    def copy(self) -> EncodedItems:
        """An independent copy (frozen segments are shared: they never change)."""
        twin = EncodedItems.__new__(EncodedItems)
        twin._plain = None if self._plain is None else list(self._plain)
        twin._frozen, twin._open = list(self._frozen), bytearray(self._open)
        twin._count = self._count
        return twin

    def items(self) -> list[Any]:
        """The values for a list to encode with :func:`encode_json_pieces`: the plain
        values, or segments holding them."""
        if self._plain is not None:
            return list(self._plain)
        if not self._open:
            return list(self._frozen)
        # The open segment is copied (later appends change it); a long one is then a piece of
        # its own too, not copied again into the body (and out of it again by the splice).
        tail = bytes(self._open)
        if len(tail) >= PIECE_BYTES:
            return [*self._frozen, FrozenSegment(tail)]
        return [*self._frozen, orjson.Fragment(tail)]


class JoinedList(Sequence[Any]):
    """The first ``count`` items of an append-only list followed by ``tail``, without copying
    the list: a request's turns when the final ones are kept in one growing list (issue 38:
    a turn's request costs its new turns). Read as a sequence; slicing gives a list; encoded
    (:func:`encode_json_pieces`) as the list it stands for. The shared list must only grow."""

    __slots__ = ("_count", "_shared", "_tail")

    def __init__(self, shared: list[Any], count: int, tail: list[Any]) -> None:
        self._shared, self._count, self._tail = shared, count, tail

    def __len__(self) -> int:
        return self._count + len(self._tail)

    def __iter__(self) -> Iterator[Any]:
        return itertools.chain(itertools.islice(self._shared, self._count), self._tail)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        count = self._count
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return list(self)[index]
            head = self._shared[start : min(stop, count)] if start < count else []
            return head + self._tail[max(start - count, 0) : max(stop - count, 0)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._shared[index] if index < count else self._tail[index - count]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JoinedList | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists, and as mutable in meaning

    def __repr__(self) -> str:
        return f"JoinedList({list(self)!r})"


SEGMENT_BYTES = 256 * 1024
"""Encoded items are frozen in segments of about this size (see :class:`EncodedItems`)."""

PIECE_BYTES = 16 * 1024
"""An open segment at least this long is sent as a piece of its own (see ``items``)."""

# orjson writes no NUL byte of its own (control characters in strings are escaped), so one in
# its output can only be a placeholder put there by :func:`encode_json_pieces`.
_PLACEHOLDER = orjson.Fragment(b"\x00")


def escape_surrogates(value: Any) -> Any:
    """``value`` with each string that holds a lone surrogate (a broken pair, which pi's
    sessions and clients may carry) replaced by its JSON, the surrogate escaped as
    ``JSON.stringify`` writes it (``\\ud800``); orjson refuses to encode such a string. Rare:
    called only once orjson has refused a value."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return orjson.Fragment(dumps(value))
        return value
    if isinstance(value, dict):
        return {key: escape_surrogates(item) for key, item in value.items()}
    if isinstance(value, list | tuple | JoinedList):
        return [escape_surrogates(item) for item in value]
    return value


def _dumps_any(value: Any) -> bytes:
    """orjson's encoding, lone surrogates escaped (see :func:`escape_surrogates`)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as refused:
        if "surrogates" not in str(refused):
            raise
        return orjson.dumps(escape_surrogates(value))


def encode_json_pieces(value: Any) -> bytes | tuple[bytes, ...]:
    """``value`` as compact JSON, :class:`FrozenSegment` items included. A value holding
    frozen segments comes back as the pieces of those bytes in order, each segment a piece of
    its own: a long transcript's request is sent as it is kept, not first copied into one
    body (~0.4 ms and 3.9 MB a request at 24,000 messages); :func:`body_bytes` joins them."""
    segments: list[bytes] = []

    def placeholder(item: Any) -> orjson.Fragment | list[Any]:
        if isinstance(item, FrozenSegment):
            segments.append(item.data)
            return _PLACEHOLDER
        if isinstance(item, JoinedList):
            return list(item)
        raise TypeError(f"Type is not JSON serializable: {type(item).__name__}")

    try:
        out = orjson.dumps(value, default=placeholder)
    except orjson.JSONEncodeError as refused:
        if "surrogates" not in str(refused):
            raise
        segments.clear()  # the refused pass met some of them already
        out = orjson.dumps(escape_surrogates(value), default=placeholder)
    if not segments:
        return out
    parts = out.split(b"\x00")
    if len(parts) != len(segments) + 1:  # a NUL that is not ours: never expected
        raise ValueError("a JSON body held a NUL byte outside a string")
    pieces = [parts[0]]
    for segment, part in zip(segments, parts[1:], strict=True):
        pieces.append(segment)
        if part:
            pieces.append(part)
    return tuple(pieces)


def body_bytes(body: bytes | Sequence[bytes]) -> bytes:
    """A body given as pieces (:func:`encode_json_pieces`) joined into one bytes."""
    return body if isinstance(body, bytes) else b"".join(body)


def prepare_messages(
    messages: Sequence[LlmMessage], model: Model, normalize_id: IdNormalizer | None = None
) -> list[LlmMessage]:
    """The transcript as ``model`` should see it (see the module docstring)."""
    preparer = TranscriptPreparer(model, normalize_id)
    out: list[LlmMessage] = []
    for message in messages:
        out.extend(preparer.feed(message))
    out.extend(preparer.finish())
    return out


def user_text_blocks(content: str | tuple[TextContent | ImageContent, ...]) -> list[str]:
    """The texts of user-like content (a string is one text)."""
    if isinstance(content, str):
        return [content]
    return [block.text for block in content if isinstance(block, TextContent)]


def tool_result_text(message: ToolResultMessage) -> str:
    """The text of a tool result (its text blocks joined by newlines)."""
    return "\n".join(block.text for block in message.content if isinstance(block, TextContent))


def data_url(image: ImageContent) -> str:
    """``image`` as a ``data:`` URL."""
    return f"data:{image.mime_type};base64,{image.data}"


def positive_int(value: Any) -> int:
    """A vendor's count as an int: a positive integer as is, anything else (a bool, a float,
    a negative, ``None``) 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
