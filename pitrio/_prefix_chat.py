"""A resumed session's Chat Completions messages made straight from the stored JSON (issue 38).

The first turn after resuming a long session decodes every stored message into its class,
prepares the transcript (:class:`~pitrio.actors.model_router.providers.convert.TranscriptPreparer`)
and encodes each Chat Completions item
(:class:`~pitrio.actors.model_router.providers.openai_completions_request.ChatMessages`): ~1 s
of CPU for 48,000 messages, on the parent's core, after the prompt arrived. A child forked
before any import (:mod:`pitrio._preparse`) can do the same work on the idle core before the
prompt comes, but only if it need not import pitrio's typed code (measured: too late). This
module is that work at the JSON level: standard library and orjson only, no pitrio import.

The rule that keeps it equal to the typed path is the quick decoder's
(:mod:`pitrio.messages.quick`): it only *accepts*. It converts a message only when its shape is
one the quick decoder takes (so the typed path decodes it to the value read here) and its
conversion is one of the plain cases: the model's own responses (another model's thinking is
turned into text: not done here), tool-call ids the server's rewrite keeps as they are, no image
when the session blocks images. At the first message it does not take it stops, and the caller
feeds the rest to the typed builder from the state reached (:class:`ChatPrefix`). The tests
compare its bytes with the typed builder's on every fixture, made sessions and mutations.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import orjson

# Copies of the typed path's constants (a test checks each against its original).
SEGMENT_BYTES = 256 * 1024
NO_RESULT_TEXT = "No result provided"
IMAGE_OMITTED_TEXT = "(image omitted: model does not support images)"
TOOL_IMAGE_OMITTED_TEXT = "(tool image omitted: model does not support images)"
TOOL_IMAGES_TEXT = "Images from the tool results:"
SEE_IMAGE_TEXT = "(see the attached image)"
PROCESSED_TEXT = "I have processed the tool results."
STOP_REASONS = frozenset(("pending", "stop", "length", "toolUse", "error", "aborted", "deferred"))
THINKING_LEVELS = frozenset(("off", "minimal", "low", "medium", "high", "xhigh", "max"))


class ChatFacts(NamedTuple):
    """Every fact of the target model and its server's compat flags that converting a
    transcript reads (plain values: the parent sends them to the child as JSON)."""

    provider: str
    api: str
    model_id: str
    images: bool
    """Whether the model takes image input (else images become a note)."""
    thinking_as_text: bool
    tool_result_name: bool
    assistant_after_tool_result: bool
    mistral_tool_ids: bool
    block_images: bool
    """The session's ``images.blockImages``: images are replaced before the provider sees
    them (not converted here: a message holding an image stops the conversion)."""


class ChatPrefix(NamedTuple):
    """The Chat Completions builder's state after the first ``consumed`` messages, as
    ``ChatMessages(..., encoded=True)`` fed those messages holds it."""

    facts: ChatFacts
    consumed: int
    """How many of the given messages were converted (the rest are the typed path's)."""
    segments: tuple[bytes, ...]
    """The full segments of encoded items (each ``e1,e2,...``, at least :data:`SEGMENT_BYTES`)."""
    tail: bytes
    """The open segment."""
    items: int
    """How many items the segments and tail hold."""
    last_role: str | None
    pending: tuple[tuple[str, str], ...]
    """``(id, name)`` of the tool calls still awaiting a result, in order."""
    images: tuple[tuple[str, str], ...]
    """``(mime type, data)`` of tool-result images not yet sent (they follow as a user item)."""


class _Refused(Exception):
    """A message this module does not convert: the typed path takes it from here."""


_REFUSED = _Refused()


# --- the quick decoder's acceptance, checked without building anything -----------------------


def _is_optional_str(value: Any) -> bool:
    return value is None or value.__class__ is str


_COST_KEYS = frozenset(("input", "output", "cacheRead", "cacheWrite", "total"))
_USAGE_KEYS = frozenset(("input", "output", "cacheRead", "cacheWrite", "totalTokens"))


def _check_usage(usage: Any) -> None:
    # Every usage field has a default: any subset of the keys decodes, unknown keys are kept.
    # The checks are written out, not called: this runs for every response of the session.
    if usage.__class__ is not dict:
        raise _REFUSED
    for key, item in usage.items():
        if key in _USAGE_KEYS:
            if item.__class__ is not int:
                raise _REFUSED
        elif key == "cost":
            if item.__class__ is not dict:
                raise _REFUSED
            for name, amount in item.items():
                if name in _COST_KEYS:
                    kind = amount.__class__
                    if kind is not int and kind is not float:
                        raise _REFUSED
                elif (
                    name == "totalFromProvider"
                    and amount is not None
                    and amount.__class__ is not bool
                ):
                    raise _REFUSED
        elif (
            (key == "reasoning" or key == "cacheWrite1h")
            and item is not None
            and item.__class__ is not int
        ):
            raise _REFUSED


def _text_of(block: dict[str, Any]) -> str:
    text = block["text"]
    if text.__class__ is not str:
        raise _REFUSED
    if len(block) != 2 and not _is_optional_str(block.get("textSignature")):
        raise _REFUSED
    return text


def _user_blocks(content: Any, block_images: bool) -> list[tuple[str, str] | str]:
    """Text and image blocks: a text as its ``str``, an image as ``(mime type, data)``."""
    if content.__class__ is not list:
        raise _REFUSED
    out: list[tuple[str, str] | str] = []
    for block in content:
        if block.__class__ is not dict:
            raise _REFUSED
        kind = block.get("type")
        if kind == "text":
            out.append(_text_of(block))
        elif kind == "image" and not block_images:
            data, mime_type = block["data"], block["mimeType"]
            if data.__class__ is not str or mime_type.__class__ is not str:
                raise _REFUSED
            out.append((mime_type, data))
        else:
            raise _REFUSED
    return out


# The optional assistant fields and the class of their value when not null.
_ASSISTANT_OPTIONAL: dict[str, type] = {
    "providerThinkingLevel": str,
    "responseId": str,
    "responseModel": str,
    "rawStopReason": str,
    "errorMessage": str,
    "durationMs": int,
    "thinkingLevel": str,
    "endTurn": bool,
}


def _check_assistant_fields(value: dict[str, Any]) -> str:
    """The stop reason, once every field the decoder reads is of its type."""
    stop_reason = value["stopReason"]
    if stop_reason not in STOP_REASONS or stop_reason.__class__ is not str:
        raise _REFUSED
    _check_usage(value["usage"])
    if value["timestamp"].__class__ is not int:
        raise _REFUSED
    if len(value) > 8:  # role, content, api, provider, model, usage, stop, time: and more
        if "diagnostics" in value:
            raise _REFUSED  # the quick decoder leaves it to the general one
        optional = _ASSISTANT_OPTIONAL
        for key, item in value.items():
            kind = optional.get(key)
            if kind is not None and item is not None and item.__class__ is not kind:
                raise _REFUSED
        level = value.get("thinkingLevel")
        if level is not None and level not in THINKING_LEVELS:  # a str: checked above
            raise _REFUSED
    return stop_reason


def _check_tool_result_fields(value: dict[str, Any]) -> None:
    if value["isError"].__class__ is not bool or value["timestamp"].__class__ is not int:
        raise _REFUSED
    if "usage" in value and value["usage"] is not None:
        _check_usage(value["usage"])
    if "durationMs" in value:
        duration = value["durationMs"]
        if duration is not None and duration.__class__ is not int:
            raise _REFUSED
    if "nestedCalls" in value:
        raise _REFUSED


# --- the conversion ---------------------------------------------------------------------------


def _unchanged_id(facts: ChatFacts, value: str) -> bool:
    # Whether the server's tool-call id rewrite (``openai_compat.normalize_tool_id``) keeps
    # ``value``: Mistral's keeps 9 alphanumerics, the others an id of at most 40 characters
    # whose first ``|``-separated part is not a shorter, non-empty call id.
    if facts.mistral_tool_ids:
        return len(value) == 9 and value.isalnum()
    return len(value) <= 40 and ("|" not in value or value[0] == "|")


def _without_images(blocks: list[tuple[str, str] | str], note: str) -> list[tuple[str, str] | str]:
    # ``convert._strip_images``: each image a note, a note right after a note left out.
    out: list[tuple[str, str] | str] = []
    for block in blocks:
        if block.__class__ is str:
            out.append(block)
        elif not (out and out[-1] == note):
            out.append(note)
    return out


def _part(block: tuple[str, str] | str) -> dict[str, Any]:
    if isinstance(block, str):
        return {"type": "text", "text": block}
    mime_type, data = block
    return {"type": "image_url", "image_url": {"url": f"data:{mime_type};base64,{data}"}}


class Segments:
    """``EncodedItems.append`` of an encoded builder, in plain values: encoded items joined by
    commas and cut into segments at the same size, so a builder restored from them holds the
    same bytes (the Chat Completions and the Anthropic prefixes both keep theirs here)."""

    __slots__ = ("count", "full", "open")

    def __init__(self) -> None:
        self.full: list[bytes] = []
        self.open = bytearray()
        self.count = 0

    def append(self, item: bytes) -> None:
        """Add one encoded item."""
        self.count += 1
        tail = self.open
        if tail:
            tail += b","
        tail += item
        if len(tail) >= SEGMENT_BYTES:
            self.full.append(bytes(tail))
            self.open = bytearray()


def _tool_call_fields(block: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """A stored tool call's id, name and arguments; refused unless the quick decoder takes
    the block as it is."""
    call_id, name, arguments = block["id"], block["name"], block["arguments"]
    if (
        call_id.__class__ is not str
        or name.__class__ is not str
        or arguments.__class__ is not dict
        or not _is_optional_str(block.get("thoughtSignature"))
        or not _is_optional_str(block.get("namespace"))
    ):
        raise _REFUSED
    return call_id, name, arguments


def _answer_pending(pending: list[tuple[str, str]], call_id: str) -> bool:
    """Remove the first pending call of ``call_id``; whether there was one (a result whose
    call was in a response left out, or was answered already, is dropped)."""
    for index, (pending_id, _) in enumerate(pending):
        if pending_id == call_id:
            del pending[index]
            return True
    return False


class _Builder:
    """The state of ``ChatMessages`` and its ``TranscriptPreparer``, in plain values."""

    def __init__(self, facts: ChatFacts) -> None:
        self.facts = facts
        self.encoded = Segments()
        self.last_role: str | None = None
        self.pending: list[tuple[str, str]] = []
        self.images: list[tuple[str, str]] = []

    def add(self, item: dict[str, Any], role: str) -> None:
        self.encoded.append(orjson.dumps(item))
        self.last_role = role

    def tool(self, call_id: str, name: str, content: str) -> None:
        item = {"role": "tool", "content": content, "tool_call_id": call_id}
        if self.facts.tool_result_name:
            item["name"] = name
        self.add(item, "tool")

    def close_pending(self) -> None:
        # The synthetic error results of calls left without one (text only: no image flush).
        for call_id, name in self.pending:
            self.tool(call_id, name, NO_RESULT_TEXT)
        self.pending.clear()

    def flush_images(self) -> None:
        if self.images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": TOOL_IMAGES_TEXT}]
            parts.extend(_part(image) for image in self.images)
            self.add({"role": "user", "content": parts}, "user")
            self.images.clear()

    def user(self, value: dict[str, Any]) -> None:
        facts = self.facts
        content = value["content"]
        if value["timestamp"].__class__ is not int:
            raise _REFUSED
        if content.__class__ is not str:
            blocks = _user_blocks(content, facts.block_images)
            if not facts.images:
                blocks = _without_images(blocks, IMAGE_OMITTED_TEXT)
            content = [_part(block) for block in blocks]
        # Checked: from here nothing refuses, so the state changes only for a whole message.
        if self.pending:
            self.close_pending()
        if self.images:
            self.flush_images()
        if facts.assistant_after_tool_result and self.last_role == "tool":
            self.add({"role": "assistant", "content": PROCESSED_TEXT}, "assistant")
        if content or content.__class__ is str:  # no blocks at all: left out
            self.add({"role": "user", "content": content}, "user")

    def assistant(self, value: dict[str, Any]) -> None:
        facts = self.facts
        api, provider, model = value["api"], value["provider"], value["model"]
        if api.__class__ is not str or provider.__class__ is not str or model.__class__ is not str:
            raise _REFUSED
        blocks = value["content"]
        if blocks.__class__ is not list:
            raise _REFUSED
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        ids: list[tuple[str, str]] = []
        for block in blocks:
            if block.__class__ is not dict:
                raise _REFUSED
            kind = block.get("type")
            if kind == "text":
                text = block["text"]
                if text.__class__ is not str or (
                    len(block) != 2 and not _is_optional_str(block.get("textSignature"))
                ):
                    raise _REFUSED
                if text:
                    texts.append(text)
            elif kind == "thinking":
                thinking = block["thinking"]
                redacted = block.get("redacted")
                if (
                    thinking.__class__ is not str
                    or not _is_optional_str(block.get("thinkingSignature"))
                    or (redacted is not None and redacted.__class__ is not bool)
                ):
                    raise _REFUSED
                # Reasoning goes back only to a server that wants it as text.
                if facts.thinking_as_text and thinking and not redacted:
                    texts.append(thinking)
            elif kind == "toolCall":
                call_id, name, arguments = _tool_call_fields(block)
                calls.append(
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
                    }
                )
                ids.append((call_id, name))
            else:
                raise _REFUSED
        stop_reason = _check_assistant_fields(value)
        kept = stop_reason != "error" and stop_reason != "aborted"
        if kept:
            # Another model's response has its thinking turned into text (not done here);
            # ids the server's rewrite would change are the typed path's too.
            if provider != facts.provider or api != facts.api or model != facts.model_id:
                raise _REFUSED
            for call_id, _ in ids:
                if not _unchanged_id(facts, call_id):
                    raise _REFUSED
        if self.pending:
            self.close_pending()
        if not kept:
            return  # failed and aborted responses are left out (their calls with them)
        if self.images:
            self.flush_images()
        if texts or calls:
            joined = "".join(texts) if texts else None
            item: dict[str, Any] = {"role": "assistant", "content": joined}
            if calls:
                item["tool_calls"] = calls
                self.pending.extend(ids)
            self.add(item, "assistant")

    def tool_result(self, value: dict[str, Any]) -> None:
        facts = self.facts
        call_id, name = value["toolCallId"], value["toolName"]
        if call_id.__class__ is not str or name.__class__ is not str:
            raise _REFUSED
        blocks = _user_blocks(value["content"], facts.block_images)
        _check_tool_result_fields(value)
        if not _unchanged_id(facts, call_id):
            raise _REFUSED
        if not _answer_pending(self.pending, call_id):
            return
        if not facts.images:
            blocks = _without_images(blocks, TOOL_IMAGE_OMITTED_TEXT)
        texts = [block for block in blocks if block.__class__ is str]
        images = [block for block in blocks if block.__class__ is not str]
        self.images.extend(images)  # type: ignore[arg-type]
        text = "\n".join(texts)
        self.tool(call_id, name, text or (SEE_IMAGE_TEXT if images else ""))


class MessageBuilder(Protocol):
    """A JSON-level builder: one method a stored message's role, each refusing (raising) a
    message it does not convert exactly as the typed path does."""

    def user(self, value: dict[str, Any]) -> None:
        """Take a stored user message."""

    def assistant(self, value: dict[str, Any]) -> None:
        """Take a stored assistant message."""

    def tool_result(self, value: dict[str, Any]) -> None:
        """Take a stored tool result."""


def take_leading(messages: Any, builder: MessageBuilder) -> int:
    """Feed ``builder`` the stored messages (each one's JSON, ``bytes`` or ``memoryview``)
    until the first it refuses or does not know; how many it took. Never raises for a
    message: one it does not take ends the prefix."""
    handlers = {
        "user": builder.user,
        "assistant": builder.assistant,
        "toolResult": builder.tool_result,
    }
    consumed = 0
    loads, handler_of = orjson.loads, handlers.get
    try:
        for data in messages:
            value = loads(data)
            handler = handler_of(value["role"]) if value.__class__ is dict else None
            if handler is None:
                break
            handler(value)
            consumed += 1
    except Exception:  # _Refused, or a missing key, an unhashable value, invalid JSON
        pass  # the prefix ends before that message
    return consumed


def prepare_chat_prefix(messages: Any, facts: ChatFacts) -> ChatPrefix | None:
    """The Chat Completions builder's state for ``facts``' model after the longest prefix of
    ``messages`` (each a stored ``message`` object's JSON, ``bytes`` or ``memoryview``) this
    module converts exactly as the typed path does; ``None`` when it converts not even the
    first. Never raises for a message: one it does not take ends the prefix."""
    builder = _Builder(facts)
    consumed = take_leading(messages, builder)
    if not consumed:
        return None
    return ChatPrefix(
        facts=facts,
        consumed=consumed,
        segments=tuple(builder.encoded.full),
        tail=bytes(builder.encoded.open),
        items=builder.encoded.count,
        last_role=builder.last_role,
        pending=tuple(builder.pending),
        images=tuple(builder.images),
    )


__all__ = ["ChatFacts", "ChatPrefix", "MessageBuilder", "prepare_chat_prefix", "take_leading"]
