"""``convert_to_llm``: turn an agent transcript into what a provider is sent (spec §1.6)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

import attrs
import orjson

from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    LlmMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import to_json
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.snapshot import FrozenView, Snapshot, immutable

T = TypeVar("T")

COMPACTION_SUMMARY_PREFIX = (
    "The conversation history before this point was compacted into the following summary:"
    "\n\n<summary>\n"
)
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
BRANCH_SUMMARY_SUFFIX = "</summary>"
IMAGES_BLOCKED = "Image reading is disabled."
"""What stands for each image when ``images.blockImages`` is on (pi 1.6.0's text)."""


def bash_execution_to_text(message: BashExecutionMessage) -> str:
    """The text a user ``!command`` shows the model."""
    text = f"Ran `{message.command}`\n"
    text += f"```\n{message.output}\n```" if message.output else "(no output)"
    if message.cancelled:
        text += "\n\n(command cancelled)"
    elif message.exit_code is not None and message.exit_code != 0:
        text += f"\n\nCommand exited with code {message.exit_code}"
    if message.truncated and message.full_output_path:
        text += f"\n\n[Output truncated. Full output: {message.full_output_path}]"
    return text


def _as_user(text: str, timestamp: int) -> UserMessage:
    return UserMessage(content=(TextContent(text=text),), timestamp=timestamp)


def convert_message(message: AgentMessage) -> LlmMessage | None:
    """Convert one agent message to an LLM message, or ``None`` if it is not sent."""
    match message:
        case UserMessage() | AssistantMessage() | ToolResultMessage():
            return message
        case BashExecutionMessage():
            if message.exclude_from_context:
                return None
            return _as_user(bash_execution_to_text(message), message.timestamp)
        case CustomMessage():
            content = message.content
            if isinstance(content, str):
                content = (TextContent(text=content),)
            return UserMessage(content=content, timestamp=message.timestamp)
        case BranchSummaryMessage():
            text = BRANCH_SUMMARY_PREFIX + message.summary + BRANCH_SUMMARY_SUFFIX
            return _as_user(text, message.timestamp)
        case CompactionSummaryMessage():
            text = COMPACTION_SUMMARY_PREFIX + message.summary + COMPACTION_SUMMARY_SUFFIX
            return _as_user(text, message.timestamp)
        case SystemMessage():
            # Not a chat message: the request's system prompt and tools are the replay of
            # the transcript's system messages (pitrio.messages.transcript), as pi 1.6.0
            # collapses them into the request's head.
            return None
    return None


def without_images(message: LlmMessage) -> LlmMessage:
    """``message`` with each image of a user turn or tool result replaced by
    :data:`IMAGES_BLOCKED`, a run of such texts kept once (pi 1.6.0's ``images.blockImages``);
    the message itself when it holds no image."""
    if not isinstance(message, UserMessage | ToolResultMessage) or isinstance(message.content, str):
        return message
    if not any(isinstance(block, ImageContent) for block in message.content):
        return message
    blocks: list[TextContent | ImageContent] = []
    for block in message.content:
        if isinstance(block, ImageContent):
            block = TextContent(text=IMAGES_BLOCKED)
        previous = blocks[-1] if blocks else None
        if (
            isinstance(block, TextContent)
            and block.text == IMAGES_BLOCKED
            and isinstance(previous, TextContent)
            and previous.text == IMAGES_BLOCKED
        ):
            continue
        blocks.append(block)
    return attrs.evolve(message, content=tuple(blocks))


def convert_to_llm(messages: Iterable[AgentMessage]) -> list[LlmMessage]:
    """The coding agent's converter: every message that reaches the model, in order."""
    out: list[LlmMessage] = []
    for message in messages:
        converted = convert_message(message)
        if converted is not None:
            out.append(converted)
    return out


def default_convert_to_llm(messages: Iterable[AgentMessage]) -> list[LlmMessage]:
    """The core agent's converter: keep user, assistant and toolResult; drop the rest."""
    return [
        m for m in messages if isinstance(m, UserMessage | AssistantMessage | ToolResultMessage)
    ]


def extends(previous: Sequence[T], messages: Sequence[T]) -> bool:
    """Whether ``messages`` starts with ``previous``: the same objects (or equal ones, which
    convert and encode the same). A :class:`Snapshot` made from ``previous`` by extending it
    (once or along its line) says so at once; otherwise they are compared in C (tuple
    equality takes identical items at once): ~0.04 ms for 20,000 messages, plus the copy of
    the slice, where an ``is`` test per item took ~0.3 ms."""
    if messages is previous:
        return True
    # A snapshot, or a view over a resumed session's stored transcript, may know at once
    # (comparing a view's items would build them).
    starts_with = getattr(messages, "starts_with", None)
    if starts_with is not None and starts_with(previous):
        return True
    count = len(previous)
    if not count:
        return True
    if len(messages) < count:
        return False
    head = messages[:count]
    return _as_tuple(head) == _as_tuple(previous)


def _as_tuple(items: Sequence[T]) -> tuple[T, ...]:
    return items if isinstance(items, tuple) else tuple(items)


class PrefixConverter:
    """:func:`convert_to_llm` for a transcript that grows between calls: when the messages
    extend the previous call's (the same objects, in order), only the new ones are converted
    and the earlier results (the same objects) are reused, so a request of a long session does
    not pay for its whole history, and what a provider derives from those objects can be
    reused too. The result is a :class:`Snapshot` made from the previous result, so the
    provider need not compare either. Used by one caller at a time (the agent loop's hook)."""

    def __init__(
        self, *, block_images: bool = False, prepared: ConvertedView | None = None
    ) -> None:
        self._prepared = prepared  # the view of a stored head made before the first request
        self._source: Sequence[AgentMessage] = ()
        self._out: Snapshot[LlmMessage] = Snapshot()
        self._one = _blocking_images if block_images else convert_message
        self._block_images = block_images

    def convert(self, messages: Sequence[AgentMessage]) -> Snapshot[LlmMessage]:
        """The converted transcript (immutable)."""
        head = messages.head() if isinstance(messages, Snapshot) else None
        if (
            head is not None
            and hasattr(head, "stored_roles")
            and not (self._source and extends(self._source, messages))
        ):
            # A resumed transcript's stored head: converted as a view, its stored messages
            # decoded only when read (issue 38).
            rest = messages[len(head) :]
            prepared = self._prepared
            if prepared is None or prepared._source is not head:
                prepared = ConvertedView(head, self._block_images)
            out = Snapshot.over(
                prepared,
                (m for m in map(self._one, rest) if m is not None),
            )
        elif extends(self._source, messages):
            converted = map(self._one, messages[len(self._source) :])
            out = self._out.extended(m for m in converted if m is not None)
        else:
            out = Snapshot(m for m in map(self._one, messages) if m is not None)
        self._source = immutable(messages)
        self._out = out
        return out


def positions_of(values: list[Any], wanted: Iterable[Any]) -> list[int]:
    """The indexes of ``values`` holding one of ``wanted``, in order, found by ``list.index``
    (a search in C) per wanted value: for a long list where they are few (a resumed
    transcript's roles, issue 38)."""
    found: list[int] = []
    for value in wanted:
        at = -1
        with contextlib.suppress(ValueError):
            while True:
                at = values.index(value, at + 1)
                found.append(at)
    found.sort()
    return found


_KEPT_ROLES = frozenset(("user", "assistant", "toolResult"))
"""Stored roles whose messages :func:`convert_message` returns as they are."""


class ConvertedView(FrozenView[LlmMessage]):
    """:func:`convert_to_llm` of a stored transcript that decodes its messages when read
    (a resumed session's context view; issue 38). The source says each message's stored
    role without decoding it (``stored_roles()``): user, assistant and tool-result messages
    convert to themselves, so they stay in the source, undecoded, until an item is read;
    stored system messages are left out, as the converter leaves them; any other message
    (a summary, a custom or bash message) is decoded and converted at once (few, and their
    conversion may drop them). The source's ``stored_texts(start, stop)`` gives the JSON of
    the stored ones, for a provider that builds its request from it (:meth:`json_texts`).
    Read items are kept, so an item is the same object every time."""

    __slots__ = ("_block_images", "_built", "_pieces", "_slots", "_source", "offered")

    def __init__(self, source: Sequence[AgentMessage], block_images: bool = False) -> None:
        self._source = source
        self._block_images = block_images
        one = _blocking_images if block_images else convert_message
        roles: list[str | None] = source.stored_roles()  # type: ignore[attr-defined]
        # Each item: the source index of a stored message kept as it is, else its conversion.
        # Made at a resumed session's start (issue 38): the few other messages are found by
        # a search per role in C, and the runs of kept ones between them copied as ranges
        # (``_pieces`` keeps them, for the texts and lines asked of them too).
        others = positions_of(roles, set(roles).difference(_KEPT_ROLES))
        slots: list[int | LlmMessage] = []
        pieces: list[range | LlmMessage] = []
        done = 0
        for index in others:
            if done < index:
                pieces.append(range(done, index))
            done = index + 1
            if roles[index] != "system":
                converted = one(source[index])
                if converted is not None:
                    pieces.append(converted)
        if done < len(roles):
            pieces.append(range(done, len(roles)))
        for piece in pieces:
            if isinstance(piece, range):
                slots.extend(piece)
            else:
                slots.append(piece)
        self._slots = slots
        self._pieces = pieces
        self._built: dict[int, LlmMessage] = {}
        self.offered: Any = None
        """A :class:`pitrio._prefix_chat.ChatPrefix` or
        :class:`pitrio._prefix_anthropic.AnthropicPrefix` of these items made elsewhere (the
        launcher's child: :mod:`pitrio.actors.session.resumed_prefix`), for a builder whose
        facts it was made for; ``None``."""

    @property
    def block_images(self) -> bool:
        """Whether images are replaced (the session's ``images.blockImages``)."""
        return self._block_images

    def __len__(self) -> int:
        return len(self._slots)

    @overload
    def __getitem__(self, index: int) -> LlmMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[LlmMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> LlmMessage | tuple[LlmMessage, ...]:
        if isinstance(index, slice):
            return tuple(self._item(i) for i in range(*index.indices(len(self._slots))))
        if index < 0:
            index += len(self._slots)
        if not 0 <= index < len(self._slots):
            raise IndexError("message index out of range")
        return self._item(index)

    def __iter__(self) -> Iterator[LlmMessage]:
        return map(self._item, range(len(self._slots)))

    def _item(self, index: int) -> LlmMessage:
        slot = self._slots[index]
        if not isinstance(slot, int):
            return slot
        built = self._built.get(index)
        if built is not None:
            return built
        # A kept role decodes to its own class (see ``stored_roles``), an LLM message.
        message: LlmMessage = self._source[slot]  # type: ignore[assignment]
        made = without_images(message) if self._block_images else message
        self._built[index] = made
        return made

    def json_texts(self) -> list[Any]:
        """Each item's JSON text (``bytes`` or a ``memoryview``): a stored message's as its
        line holds it, a converted one's (a summary or custom message, now a user message)
        encoded; ``None`` where a stored message's text could not be cut out of its line."""
        texts: list[Any] = self._source.stored_texts(0, len(self._source))  # type: ignore[attr-defined]
        return self._spliced(texts, lambda built: orjson.dumps(to_json(built)))

    def built_texts(self) -> dict[int, bytes]:
        """The JSON text of each item that is no stored message (a summary or custom message,
        converted), by position: what :meth:`stored_lines` cannot point at."""
        out: dict[int, bytes] = {}
        at = 0
        for piece in self._pieces:
            if isinstance(piece, range):
                at += len(piece)
            else:
                out[at] = orjson.dumps(to_json(piece))
                at += 1
        return out

    def stored_lines(self) -> list[int]:
        """Each item's line in the session file where it is a stored message read from one
        (``StoredEntry.line``), else 0: what the launcher's child converts from (issue 38)."""
        return self._spliced(self._source.stored_lines(), lambda built: 0)  # type: ignore[attr-defined]

    def _spliced(self, per_source: list[Any], per_built: Callable[[LlmMessage], Any]) -> list[Any]:
        """One value per item: ``per_source``'s for a stored one (copied by runs), the
        function's for a converted one."""
        out: list[Any] = []
        for piece in self._pieces:
            if isinstance(piece, range):
                out.extend(per_source[piece.start : piece.stop])
            else:
                out.append(per_built(piece))
        return out


def _blocking_images(message: AgentMessage) -> LlmMessage | None:
    converted = convert_message(message)
    return None if converted is None else without_images(converted)
