"""What the prefix chat tests share: the comparison of the JSON-level prefix with the typed
builder (:func:`check`), the targets it runs under, and stored messages made by hand."""

from __future__ import annotations

import itertools
from typing import Any

import orjson

from pitrio._prefix_chat import prepare_chat_prefix
from pitrio.actors.model_router.providers.convert import (
    FrozenSegment,
    body_bytes,
    encode_json_pieces,
)
from pitrio.actors.model_router.providers.openai_compat import OpenAICompat
from pitrio.actors.model_router.providers.openai_completions_request import (
    ChatMessages,
    facts_of,
)
from pitrio.messages.agent import (
    AssistantMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import from_json
from pitrio.messages.convert import without_images
from pitrio.messages.model import Model, ModelCost
from pitrio.messages.wire import loads

CLASSES = {"user": UserMessage, "assistant": AssistantMessage, "toolResult": ToolResultMessage}
FLAGS = (
    "requires_thinking_as_text",
    "requires_tool_result_name",
    "requires_assistant_after_tool_result",
    "requires_mistral_tool_ids",
)


def make_model(provider: str = "mock", api: str = "openai-completions", id: str = "m", *,
               image: bool = True) -> Model:  # fmt: skip
    """A target model (only its identity and input kinds matter to the conversion)."""
    return Model(
        id=id,
        name=id,
        api=api,
        provider=provider,
        base_url="http://127.0.0.1:9",
        reasoning=False,
        input=("text", "image") if image else ("text",),
        cost=ModelCost(input=0, output=0, cache_read=0, cache_write=0),
        context_window=200000,
        max_tokens=16384,
    )


def targets(provider: str, api: str, id: str) -> list[tuple[Model, OpenAICompat, bool]]:
    """The model of ``provider/api/id`` with and without images, under every combination of
    the compat flags the conversion reads, images blocked by the session or not."""
    out = []
    for image, block, *flags in itertools.product((True, False), repeat=2 + len(FLAGS)):
        compat = OpenAICompat(**dict(zip(FLAGS, flags, strict=True)))
        out.append((make_model(provider, api, id, image=image), compat, block))
    return out


def _pieces(items: list[Any]) -> list[tuple[str, bytes]]:
    """``finish()``'s items as their kinds and bytes (a segment, a fragment or a plain value)."""
    out = []
    for item in items:
        if isinstance(item, FrozenSegment):
            out.append(("segment", item.data))
        elif isinstance(item, orjson.Fragment):
            out.append(("fragment", orjson.dumps(item)))
        else:
            out.append(("plain", orjson.dumps(item)))
    return out


def _state(builder: ChatMessages) -> Any:
    finished = builder.finish()
    return (
        _pieces(builder.entries.items()),
        len(builder.entries),
        builder.last_role,
        [(call.id, call.name) for call in builder.preparer.pending],
        [(image.mime_type, image.data) for image in builder.images],
        _pieces(finished),
        body_bytes(encode_json_pieces({"messages": finished})),
    )


def _decoded(value: Any, block_images: bool) -> Any:
    """The typed path's message: the general decoder's (``None`` where it refuses), images
    blocked as the session's converter blocks them."""
    try:
        if value.__class__ is not dict or value.get("role") not in CLASSES:
            return None
        message = from_json(value, CLASSES[value["role"]])
    except Exception:
        return None
    return without_images(message) if block_images else message


def check(datas: list[bytes], model: Model, compat: OpenAICompat, block: bool = False) -> int:
    """Compare the prefix with the typed path on ``datas``; how many messages it converted."""
    prefix = prepare_chat_prefix(datas, facts_of(model, compat, block_images=block))
    if prefix is None:
        return 0
    assert 0 < prefix.consumed <= len(datas)
    typed = ChatMessages(model, compat, encoded=True)
    values = [loads(data) for data in datas]  # the store's parse
    for value in values[: prefix.consumed]:
        message = _decoded(value, block)
        assert message is not None, f"converted what the typed path refuses: {value!r}"
        typed.feed(message)
    resumed = ChatMessages.from_prefix(model, compat, prefix)
    assert resumed is not None
    assert _state(resumed) == _state(typed)
    rest = [m for m in (_decoded(v, block) for v in values[prefix.consumed :]) if m is not None]
    for message in rest:
        typed.feed(message)
        resumed.feed(message)
        if len(rest) < 40:  # each step of a short rest (a long one: at its end)
            assert _state(resumed) == _state(typed)
    assert _state(resumed) == _state(typed)
    return prefix.consumed


def check_all(datas: list[bytes], provider: str = "mock", api: str = "a", id: str = "m") -> int:
    """:func:`check` for every target of ``provider/api/id``; the most messages converted."""
    return max(check(datas, *target) for target in targets(provider, api, id))


# --- stored messages, made by hand ---------------------------------------------------------

ME = {"api": "openai-completions", "provider": "mock", "model": "m"}
USAGE = {
    "input": 10,
    "output": 5,
    "cacheRead": 0,
    "cacheWrite": 0,
    "totalTokens": 15,
    "cost": {"input": 0.001, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.001},
}
PNG = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}


def user(content: Any, **more: Any) -> dict[str, Any]:
    """A stored user message."""
    if isinstance(content, str) or content is None:
        return {"role": "user", "content": content, "timestamp": 1, **more}
    return {"role": "user", "content": list(content), "timestamp": 1, **more}


def text(value: str, **more: Any) -> dict[str, Any]:
    """A text block."""
    return {"type": "text", "text": value, **more}


def thinking(value: str, **more: Any) -> dict[str, Any]:
    """A thinking block."""
    return {"type": "thinking", "thinking": value, **more}


def call(call_id: str, name: str = "bash", arguments: Any = None, **more: Any) -> dict[str, Any]:
    """A tool call block."""
    args = {"command": "ls"} if arguments is None else arguments
    return {"type": "toolCall", "id": call_id, "name": name, "arguments": args, **more}


def assistant(*blocks: Any, stop: str = "stop", who: Any = None, **more: Any) -> dict[str, Any]:
    """A stored assistant message of the target model (or ``who``'s)."""
    return {
        "role": "assistant",
        "content": list(blocks),
        **(who or ME),
        "usage": USAGE,
        "stopReason": stop,
        "timestamp": 2,
        **more,
    }


def result(call_id: str, *blocks: Any, name: str = "bash", **more: Any) -> dict[str, Any]:
    """A stored tool result."""
    return {
        "role": "toolResult",
        "toolCallId": call_id,
        "toolName": name,
        "content": list(blocks),
        "isError": False,
        "timestamp": 3,
        **more,
    }
