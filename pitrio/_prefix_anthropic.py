"""A resumed session's Anthropic Messages turns made straight from the stored JSON (issue 38).

The Anthropic counterpart of :mod:`pitrio._prefix_chat`: the first turn after resuming a long
session would decode every stored message into its class, prepare the transcript
(:class:`~pitrio.actors.model_router.providers.convert.TranscriptPreparer`) and encode each
turn (:class:`~pitrio.actors.model_router.providers.anthropic.AnthropicTurns`). Here the same
turns are made from each stored message's JSON, with the standard library and orjson only (so
the launcher's child could run it before any import, as it runs the Chat one).

The rule is the same as there: it only *accepts*. A message is taken only when the quick
decoder (:mod:`pitrio.messages.quick`) takes its shape (the checks are ``_prefix_chat``'s, one
copy for both) and its conversion is one of the cases written out here: the target model's own
responses (thinking with its signature, redacted thinking, unsigned thinking as text), another
model's (its thinking as text, its redacted thinking dropped), failed and aborted responses
(left out), tool-call ids through the same rewrite, images when the session does not block
them. At the first message it does not take it stops, and the caller feeds the rest to the
typed builder from the state reached (:class:`AnthropicPrefix`). The tests compare the bytes
with the typed builder's on every fixture, made sessions and mutations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from pitrio._prefix_chat import (
    _REFUSED,
    IMAGE_OMITTED_TEXT,
    NO_RESULT_TEXT,
    SEGMENT_BYTES,
    TOOL_IMAGE_OMITTED_TEXT,
    Segments,
    _answer_pending,
    _check_assistant_fields,
    _check_tool_result_fields,
    _is_optional_str,
    _text_of,
    _tool_call_fields,
    _user_blocks,
    _without_images,
    take_leading,
)

# Copies of the typed path's facts (a test checks each against its original).
SEE_IMAGE_TEXT = "(see attached image)"
ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def normalize_tool_id(value: str) -> str:
    """``anthropic.normalize_tool_id``: ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return ID_INVALID.sub("_", value)[:64] or "tool"


class AnthropicFacts(NamedTuple):
    """Every fact of the target model that converting a transcript for the Messages API
    reads (plain values, so they could be sent to the launcher's child as JSON)."""

    provider: str
    api: str
    model_id: str
    images: bool
    """Whether the model takes image input (else images become a note)."""
    block_images: bool
    """The session's ``images.blockImages`` (an image then stops the conversion)."""


def facts_for(model: Any, *, block_images: bool = False) -> AnthropicFacts:
    """``model``'s facts (a :class:`~pitrio.messages.model.Model`, read by attribute: this
    module imports no typed code)."""
    return AnthropicFacts(
        provider=model.provider,
        api=model.api,
        model_id=model.id,
        images="image" in model.input,
        block_images=block_images,
    )


def threads_supported(model: Any) -> bool:
    """Whether ``model``'s endpoint takes message threads: ``compat.supportsMessageThreads``
    when set, else whether its base URL is Anthropic's own (gateways may drop the unknown
    ``thread`` field, which would turn a ``continue`` into a request without the history).
    Here, not in :mod:`~pitrio.actors.model_router.providers.anthropic_threads` (which
    exports it), so a session's start can tell without importing a provider that a
    threaded session's requests are built plain (no use for a prefix)."""
    compat = model.compat if isinstance(model.compat, Mapping) else {}
    declared = compat.get("supportsMessageThreads")
    if declared is not None:
        return bool(declared)
    return "api.anthropic.com" in model.base_url


class AnthropicPrefix(NamedTuple):
    """The state of ``AnthropicTurns(model, encoded=True)`` after it was fed the first
    ``consumed`` messages."""

    facts: AnthropicFacts
    consumed: int
    """How many of the given messages were converted (the rest are the typed path's)."""
    segments: tuple[bytes, ...]
    """The full segments of the encoded (final) turns, as ``EncodedItems`` cuts them."""
    tail: bytes
    """The open segment."""
    items: int
    """How many turns the segments and tail hold."""
    turns: tuple[dict[str, Any], ...]
    """The turns not yet final (from the newest user turn on), as the builder keeps them:
    ``"tool_results": True`` marks a user turn of grouped tool results."""
    newest_user: int
    """The newest user turn's index in ``turns`` (where the cache mark goes), else -1."""
    pending: tuple[tuple[str, str], ...]
    """``(id, name)`` of the tool calls still awaiting a result (ids rewritten), in order."""


def _image(block: tuple[str, str]) -> dict[str, Any]:
    mime_type, data = block
    return {"type": "image", "source": {"type": "base64", "media_type": mime_type, "data": data}}


class _Builder:
    """The state of ``AnthropicTurns`` and its ``TranscriptPreparer``, in plain values."""

    def __init__(self, facts: AnthropicFacts) -> None:
        self.facts = facts
        self.encoded = Segments()
        self.turns: list[dict[str, Any]] = []
        self.newest_user = -1
        self.pending: list[tuple[str, str]] = []

    def _final(self, turn: dict[str, Any]) -> None:
        # The turn as final, without its mark (``_final_turn``).
        self.encoded.append(orjson.dumps({"role": turn["role"], "content": turn["content"]}))

    def add(self, turn: dict[str, Any]) -> None:
        self.turns.append(turn)
        if turn["role"] == "user":  # every turn before the newest user turn is final now
            for done in self.turns[:-1]:
                self._final(done)
            del self.turns[:-1]
            self.newest_user = 0

    def result(self, block: dict[str, Any]) -> None:
        # A tool result joins the user turn of results it follows, else opens one.
        last = self.turns[-1] if self.turns else None
        if last is not None and last["role"] == "user" and last.get("tool_results"):
            last["content"].append(block)
        else:
            self.add({"role": "user", "content": [block], "tool_results": True})

    def close_pending(self) -> None:
        # The synthetic error results of calls left without one.
        for call_id, _ in self.pending:
            self.result(
                {
                    "type": "tool_result",
                    "tool_use_id": call_id,
                    "content": NO_RESULT_TEXT,
                    "is_error": True,
                }
            )
        self.pending.clear()

    def user(self, value: dict[str, Any]) -> None:
        facts = self.facts
        content = value["content"]
        if value["timestamp"].__class__ is not int:
            raise _REFUSED
        blocks: list[dict[str, Any]] = []
        if content.__class__ is str:
            if content.strip():
                blocks.append({"type": "text", "text": content})
        else:
            parts = _user_blocks(content, facts.block_images)
            if not facts.images:
                parts = _without_images(parts, IMAGE_OMITTED_TEXT)
            for part in parts:
                if isinstance(part, str):
                    if part.strip():
                        blocks.append({"type": "text", "text": part})
                else:
                    blocks.append(_image(part))
        # Checked: from here nothing refuses, so the state changes only for a whole message.
        if self.pending:
            self.close_pending()
        if blocks:
            self.add({"role": "user", "content": blocks})

    def assistant(self, value: dict[str, Any]) -> None:
        facts = self.facts
        api, provider, model = value["api"], value["provider"], value["model"]
        if api.__class__ is not str or provider.__class__ is not str or model.__class__ is not str:
            raise _REFUSED
        content = value["content"]
        if content.__class__ is not list:
            raise _REFUSED
        # A signature only means something to the model that made it: another model's
        # thinking goes as text, its redacted thinking not at all.
        own = provider == facts.provider and api == facts.api and model == facts.model_id
        blocks: list[dict[str, Any]] = []
        calls: list[tuple[str, str]] = []
        for block in content:
            if block.__class__ is not dict:
                raise _REFUSED
            kind = block.get("type")
            if kind == "text":
                text = _text_of(block)
                if text.strip():
                    blocks.append({"type": "text", "text": text})
            elif kind == "thinking":
                thinking = block["thinking"]
                signature = block.get("thinkingSignature")
                redacted = block.get("redacted")
                if (
                    thinking.__class__ is not str
                    or not _is_optional_str(signature)
                    or (redacted is not None and redacted.__class__ is not bool)
                ):
                    raise _REFUSED
                if not own:
                    if not redacted and thinking.strip():
                        blocks.append({"type": "text", "text": thinking})
                elif redacted:
                    if signature:
                        blocks.append({"type": "redacted_thinking", "data": signature})
                elif signature:
                    blocks.append(
                        {"type": "thinking", "thinking": thinking, "signature": signature}
                    )
                elif thinking.strip():  # unsigned (a cut-off stream): sent as text
                    blocks.append({"type": "text", "text": thinking})
            elif kind == "toolCall":
                call_id, name, arguments = _tool_call_fields(block)
                call_id = normalize_tool_id(call_id)
                blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": arguments})
                calls.append((call_id, name))
            else:
                raise _REFUSED
        stop_reason = _check_assistant_fields(value)
        if self.pending:
            self.close_pending()
        if stop_reason == "error" or stop_reason == "aborted":
            return  # failed and aborted responses are left out (their calls with them)
        if blocks:
            self.add({"role": "assistant", "content": blocks})
        self.pending.extend(calls)

    def tool_result(self, value: dict[str, Any]) -> None:
        facts = self.facts
        call_id, name = value["toolCallId"], value["toolName"]
        if call_id.__class__ is not str or name.__class__ is not str:
            raise _REFUSED
        parts = _user_blocks(value["content"], facts.block_images)
        _check_tool_result_fields(value)
        call_id = normalize_tool_id(call_id)
        if not _answer_pending(self.pending, call_id):
            return
        if not facts.images:
            parts = _without_images(parts, TOOL_IMAGE_OMITTED_TEXT)
        result: str | list[dict[str, Any]]
        if all(isinstance(part, str) for part in parts):
            result = "\n".join(parts)  # type: ignore[arg-type]
        else:
            result = [
                {"type": "text", "text": part} if isinstance(part, str) else _image(part)
                for part in parts
            ]
            if not any(isinstance(part, str) for part in parts):
                result.insert(0, {"type": "text", "text": SEE_IMAGE_TEXT})
        self.result(
            {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": result,
                "is_error": value["isError"],
            }
        )


def prepare_anthropic_prefix(messages: Any, facts: AnthropicFacts) -> AnthropicPrefix | None:
    """The Messages API builder's state for ``facts``' model after the longest prefix of
    ``messages`` (each a stored ``message`` object's JSON, ``bytes`` or ``memoryview``) this
    module converts exactly as the typed path does; ``None`` when it converts not even the
    first. Never raises for a message: one it does not take ends the prefix."""
    builder = _Builder(facts)
    consumed = take_leading(messages, builder)
    if not consumed:
        return None
    return AnthropicPrefix(
        facts=facts,
        consumed=consumed,
        segments=tuple(builder.encoded.full),
        tail=bytes(builder.encoded.open),
        items=builder.encoded.count,
        turns=tuple(builder.turns),
        newest_user=builder.newest_user,
        pending=tuple(builder.pending),
    )


__all__ = [
    "SEGMENT_BYTES",
    "AnthropicFacts",
    "AnthropicPrefix",
    "facts_for",
    "normalize_tool_id",
    "prepare_anthropic_prefix",
    "threads_supported",
]
