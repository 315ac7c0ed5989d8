"""Messages API turns built from a transcript, one message at a time (the ``anthropic-messages``
provider's conversion; :mod:`.anthropic` builds the request around them, and
:mod:`.anthropic_plain` keeps plain turns for threaded and OAuth requests).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pitrio._prefix_anthropic import (
    AnthropicFacts,
    AnthropicPrefix,
    facts_for,
    prepare_anthropic_prefix,
)
from pitrio.actors.model_router.providers.anthropic_forms import tool_result
from pitrio.actors.model_router.providers.convert import EncodedItems, TranscriptPreparer
from pitrio.messages.agent import AssistantMessage, LlmMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.convert import ConvertedView
from pitrio.messages.model import LlmContext, Model
from pitrio.messages.snapshot import Snapshot

_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def normalize_tool_id(value: str) -> str:
    """A tool-call id Anthropic accepts: ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return _ID_INVALID.sub("_", value)[:64] or "tool"


def _user_blocks(content: str | tuple[TextContent | ImageContent, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
                }
            )
    return blocks


def _assistant_blocks(
    message: AssistantMessage, rename: Callable[[str], str] | None = None
) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking_signature:
                blocks.append(
                    {
                        "type": "thinking",
                        "thinking": block.thinking,
                        "signature": block.thinking_signature,
                    }
                )
            elif block.thinking.strip():
                # Unsigned thinking (a cut-off stream) is rejected as thinking: keep it as text.
                blocks.append({"type": "text", "text": block.thinking})
        else:
            name = block.name if rename is None else rename(block.name)
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": name, "input": block.arguments}
            )
    return blocks


class AnthropicTurns:
    """A transcript as Messages API turns, built one message at a time so the state after a
    prefix can be kept and resumed (:meth:`copy`; see
    :class:`~pitrio.actors.model_router.providers.convert.TranscriptPreparer`).

    Only the turns from the newest user turn on can still change (a tool result joins the
    last user turn; the cache mark goes on the newest user turn), so the turns before it are
    encoded once (:class:`EncodedItems`) when ``encoded``, and ``turns`` keeps only the open
    ones (``newest_user`` is an index in them).

    ``rename`` (an OAuth token's Claude Code casing) renames the tool calls of assistant
    turns as they are made, so a kept prefix already holds the names the request sends.
    """

    def __init__(
        self, model: Model, *, encoded: bool = False, rename: Callable[[str], str] | None = None
    ) -> None:
        self.preparer = TranscriptPreparer(model, normalize_tool_id)
        self.rename = rename
        self.turns: list[dict[str, Any]] = []  # the "tool_results" key marks grouped results
        self.encoded = encoded
        self.fragments = EncodedItems(encoded=True)  # the final form of turns[: len(...)]
        self.newest_user = -1

    @classmethod
    def from_prefix(cls, model: Model, prefix: AnthropicPrefix) -> AnthropicTurns | None:
        """An encoded builder in the state one fed the prefix's messages would be in (its
        final turns encoded, its open turns, pending tool calls and newest user turn), so
        :meth:`feed` and :meth:`finish` go on alike; ``None`` when the prefix was made for
        other facts than ``model``'s (the caller then feeds the messages itself)."""
        if prefix.facts != facts_of(model, block_images=prefix.facts.block_images):
            return None
        builder = cls(model, encoded=True)
        builder.fragments = EncodedItems.restored(prefix.segments, prefix.tail, prefix.items)
        # Copied as ``copy`` copies them: the open turns grow, the prefix stays as it was.
        builder.turns = [{**turn, "content": list(turn["content"])} for turn in prefix.turns]
        builder.newest_user = prefix.newest_user
        # Only a pending call's id and name are read (the match of its result, its synthetic
        # result), and the first call of an id is the one removed: as in ``ChatMessages``.
        builder.preparer.pending = [
            ToolCall(id=call_id, name=name, arguments={}) for call_id, name in prefix.pending
        ]
        return builder

    def copy(self) -> AnthropicTurns:
        """An independent builder in the same state (open turns copied, so they can grow)."""
        twin = type(self).__new__(type(self))
        twin.preparer, twin.rename = self.preparer.copy(), self.rename
        twin.turns = [{**turn, "content": list(turn["content"])} for turn in self.turns]
        twin.encoded, twin.fragments = self.encoded, self.fragments.copy()
        twin.newest_user = self.newest_user
        return twin

    def _add(self, turn: dict[str, Any]) -> None:
        self.turns.append(turn)
        if turn["role"] == "user":
            if self.encoded:  # every turn before the newest user turn is final now
                for done in self.turns[:-1]:
                    self.fragments.append(final_turn(done))
                del self.turns[:-1]
            self.newest_user = len(self.turns) - 1

    def _emit(self, message: LlmMessage) -> None:
        if isinstance(message, ToolResultMessage):
            block = tool_result(message)
            last = self.turns[-1] if self.turns else None
            if last and last["role"] == "user" and last.get("tool_results"):
                last["content"].append(block)
            else:
                self._add({"role": "user", "content": [block], "tool_results": True})
        elif isinstance(message, UserMessage):
            blocks = _user_blocks(message.content)
            if blocks:
                self._add({"role": "user", "content": blocks})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(message, self.rename)
            if blocks:
                self._add({"role": "assistant", "content": blocks})

    def feed(self, message: LlmMessage) -> None:
        """Add one transcript message."""
        for prepared in self.preparer.feed(message):
            self._emit(prepared)

    def finish(self, cache: dict[str, Any] | None = None) -> list[Any]:
        """Every turn (the end's owed results included), ``cache`` marking the newest user
        turn's last block; this builder is left as it was."""
        builder = self
        tail = self.preparer.copy().finish()
        if tail:
            builder = self.copy()
            for message in tail:
                builder._emit(message)
        out: list[Any] = builder.fragments.items()
        for index, open_turn in enumerate(builder.turns):
            turn = final_turn(open_turn)
            if cache is not None and index == builder.newest_user:
                # Cache everything up to the newest user turn: the next request shares it.
                content = list(turn["content"])
                content[-1] = {**content[-1], "cache_control": cache}
                turn = {**turn, "content": content}
            out.append(turn)
        return out


def final_turn(turn: dict[str, Any]) -> dict[str, Any]:
    """An open turn as it is sent (without the mark of grouped tool results)."""
    return {key: value for key, value in turn.items() if key != "tool_results"}


def build_messages(
    model: Model, context: LlmContext, cache: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``context``'s messages as Messages API turns (tool results grouped in user turns;
    ``cache`` marking the newest user turn's last block)."""
    builder = AnthropicTurns(model)
    for message in context.messages:
        builder.feed(message)
    return builder.finish(cache)


def facts_of(model: Model, *, block_images: bool = False) -> AnthropicFacts:
    """What converting a transcript for ``model`` reads (:mod:`pitrio._prefix_anthropic`)."""
    return facts_for(model, block_images=block_images)


def stored_prefix(model: Model, messages: Sequence[LlmMessage]) -> AnthropicPrefix | None:
    """The prefix made from the JSON of the stored messages that start ``messages`` (a resumed
    session's transcript, still undecoded: :class:`ConvertedView`) by
    :func:`pitrio._prefix_anthropic.prepare_anthropic_prefix`, or offered by the launcher's
    child for these facts; ``None`` when ``messages`` do not start so or it converts none."""
    head = messages.head() if isinstance(messages, Snapshot) else None
    if not isinstance(head, ConvertedView):
        return None
    facts = facts_of(model, block_images=head.block_images)
    # The launcher's child's, when made for these facts (pitrio.actors.session.resumed_prefix);
    # else made here, as the child would.
    offered = head.offered
    if isinstance(offered, AnthropicPrefix) and offered.facts == facts:
        return offered
    return prepare_anthropic_prefix(head.json_texts(), facts)
