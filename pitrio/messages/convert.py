"""``convert_to_llm``: turn an agent transcript into what a provider is sent (spec §1.6)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import attrs

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
from pitrio.messages.content import ImageContent, TextContent
from pitrio.messages.snapshot import Snapshot, immutable

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
    if isinstance(messages, Snapshot) and messages.starts_with(previous):
        return True
    count = len(previous)
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

    def __init__(self, *, block_images: bool = False) -> None:
        self._source: Sequence[AgentMessage] = ()
        self._out: Snapshot[LlmMessage] = Snapshot()
        self._one = _blocking_images if block_images else convert_message

    def convert(self, messages: Sequence[AgentMessage]) -> Snapshot[LlmMessage]:
        """The converted transcript (immutable)."""
        if extends(self._source, messages):
            converted = map(self._one, messages[len(self._source) :])
            out = self._out.extended(m for m in converted if m is not None)
        else:
            out = Snapshot(m for m in map(self._one, messages) if m is not None)
        self._source = immutable(messages)
        self._out = out
        return out


def _blocking_images(message: AgentMessage) -> LlmMessage | None:
    converted = convert_message(message)
    return None if converted is None else without_images(converted)
