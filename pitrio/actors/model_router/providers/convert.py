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
import hashlib
import re
import weakref
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import attrs

from pitrio.messages.agent import AssistantMessage, LlmMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.model import Model

NO_RESULT_TEXT = "No result provided"
"""Text of the synthetic result of a tool call that has none."""

IMAGE_OMITTED_TEXT = "(image omitted: this model does not accept images)"

IdNormalizer = Callable[[str], str]


class IdentityMemo:
    """Results computed from one object, kept while that object lives (keyed on its identity
    and a key, never on its value: hashing a long message would cost what the memo saves).

    Messages are immutable, so what a provider derives from one (its vendor form, its JSON)
    can be kept: a transcript of *n* messages then costs O(new messages) per request to
    prepare instead of O(n) (issue 10: per-turn cost flat in the session's length).
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], dict[Hashable, Any]]] = {}

    def _drop(self, ident: int, ref: weakref.ref[Any]) -> None:
        entry = self._entries.get(ident)
        if entry is not None and entry[0] is ref:
            del self._entries[ident]

    def get(self, obj: Any, key: Hashable) -> Any:
        """The value stored for ``obj`` and ``key``, or :data:`MISSING`."""
        entry = self._entries.get(id(obj))
        if entry is None or entry[0]() is not obj:
            return MISSING
        return entry[1].get(key, MISSING)

    def put(self, obj: Any, key: Hashable, value: Any) -> None:
        """Keep ``value`` for ``obj`` and ``key`` while ``obj`` lives."""
        ident = id(obj)
        entry = self._entries.get(ident)
        if entry is None or entry[0]() is not obj:
            ref = weakref.ref(obj, partial(self._drop, ident))
            entry = (ref, {})
            self._entries[ident] = entry
        entry[1][key] = value

    def __len__(self) -> int:
        return len(self._entries)


MISSING: Any = object()
"""What :meth:`IdentityMemo.get` returns when nothing is stored."""

_PREPARED = IdentityMemo()


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
    content: tuple[TextContent | ImageContent, ...],
) -> tuple[TextContent | ImageContent, ...]:
    for block in content:
        if isinstance(block, ImageContent):
            break
    else:
        return content  # the common case: nothing to replace, no copy
    out: list[TextContent | ImageContent] = []
    for block in content:
        if isinstance(block, ImageContent):
            if not (
                out and isinstance(out[-1], TextContent) and out[-1].text == IMAGE_OMITTED_TEXT
            ):
                out.append(TextContent(text=IMAGE_OMITTED_TEXT))
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


def _prepared_response(
    message: AssistantMessage, model: Model, rename: IdNormalizer
) -> tuple[AssistantMessage, list[ToolCall]]:
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
    return kept, calls


def prepare_messages(
    messages: Sequence[LlmMessage],
    model: Model,
    normalize_id: IdNormalizer | None = None,
    *,
    memo_key: Hashable | None = None,
) -> list[LlmMessage]:
    """The transcript as ``model`` should see it (see the module docstring).

    With ``memo_key`` (what, besides the model, decides ``normalize_id``'s answers: the
    provider's compat settings), each response's prepared form is kept while the response
    lives, so the same object comes back on the next request (which lets the provider keep
    its own per-message forms too)."""
    images = "image" in model.input
    rename = normalize_id or (lambda value: value)
    key = None if memo_key is None else (model.provider, model.api, model.id, memo_key)
    out: list[LlmMessage] = []
    pending: list[ToolCall] = []  # calls of the last kept response still waiting for results

    def close_pending() -> None:
        for call in pending:
            out.append(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(TextContent(text=NO_RESULT_TEXT),),
                    is_error=True,
                    timestamp=0,
                )
            )
        pending.clear()

    for message in messages:
        if isinstance(message, AssistantMessage):
            if pending:
                close_pending()
            if message.stop_reason in ("error", "aborted"):
                continue
            prepared = MISSING if key is None else _PREPARED.get(message, key)
            if prepared is MISSING:
                prepared = _prepared_response(message, model, rename)
                if key is not None:
                    _PREPARED.put(message, key, prepared)
            kept, calls = prepared
            out.append(kept)
            pending.extend(calls)
        elif isinstance(message, ToolResultMessage):
            call_id = rename(message.tool_call_id)
            match = next((call for call in pending if call.id == call_id), None)
            if match is None:
                continue  # its call was in a response left out, or answered already
            pending.remove(match)
            result_key = None if key is None else (key, images)
            cached = MISSING if result_key is None else _PREPARED.get(message, result_key)
            if cached is MISSING:
                content = message.content if images else _strip_images(message.content)
                cached = message
                if call_id != message.tool_call_id or content is not message.content:
                    cached = attrs.evolve(message, tool_call_id=call_id, content=content)
                if result_key is not None:
                    _PREPARED.put(message, result_key, cached)
            out.append(cached)
        else:
            if pending:
                close_pending()
            if (
                isinstance(message, UserMessage)
                and not images
                and not isinstance(message.content, str)
            ):
                stripped = _strip_images(message.content)
                if stripped is not message.content:
                    message = attrs.evolve(message, content=stripped)
            out.append(message)
    if pending:
        close_pending()
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
