"""Quick decoding of the stored messages a context is built from: user, assistant and tool
result messages of the shapes pi writes, straight into their classes.

The first turn after resuming a long session decodes every message of the branch (48,000 for
20,000 turns): through the codec's general hooks (cattrs' generated functions, a union
dispatch per block, a hook call per scalar) that was ~0.5 s of CPU (issue 38). Here each class
is one plain function that checks the JSON types itself.

The rule that keeps it equal to the general decoder: it only *accepts*. Anything it is not
sure of (a missing or mistyped field, a ``null`` where it expects a value, a field it does not
handle such as ``diagnostics``, a block of another type, a whole float) makes
:func:`decode_message` return ``None``, and the caller runs the general decoder, which gives
the value or raises its own :class:`~pitrio.errors.DecodeError`. What it accepts it builds as
the general decoder does: unknown keys kept as :class:`~pitrio.messages.wire.Extra` in the
object's key order, zero amounts as the one shared ``0.0`` (and an all-zero cost as one shared
:class:`~pitrio.messages.agent.Cost`), literals as the type's own strings,
``arguments`` copied; an assistant message's ``api``, ``provider`` and ``model`` interned, as
the store does before the general decoder.

Imported on first use (the store's first decoded message), not at start-up.
"""

from __future__ import annotations

from collections.abc import Callable
from sys import intern
from typing import Any, get_args

import attrs

from pitrio.messages.agent import (
    AssistantMessage,
    Cost,
    StopReason,
    ThinkingLevel,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.decoding import _ZERO
from pitrio.messages.wire import EXTRA, Extra, camel


class _Slow(Exception):
    """Not a shape this module decodes: the general decoder decides."""


_SLOW = _Slow()


def _known(cls: type) -> frozenset[str]:
    # The JSON keys the general decoder treats as fields (the tag's included): the rest are
    # unknown keys, kept.
    return frozenset(camel(f.name) for f in attrs.fields(cls) if not f.metadata.get(EXTRA))


def _extra(value: dict[str, Any], known: frozenset[str]) -> Extra:
    # As the general decoder builds it: the unknown keys, and the order of every key.
    return Extra({key: value[key] for key in value if key not in known}, tuple(value))


def _literals(tp: Any) -> dict[str, str]:
    # The type's own string objects, as the general decoder returns them.
    return {value: value for value in get_args(tp)}


_STOP_REASONS = _literals(StopReason)
_THINKING_LEVELS = _literals(ThinkingLevel)

_TEXT_KNOWN = _known(TextContent)
_THINKING_KNOWN = _known(ThinkingContent)
_IMAGE_KNOWN = _known(ImageContent)
_CALL_KNOWN = _known(ToolCall)
_COST_KNOWN = _known(Cost)
_USAGE_KNOWN = _known(Usage)
_USER_KNOWN = _known(UserMessage)
_ASSISTANT_KNOWN = _known(AssistantMessage)
_RESULT_KNOWN = _known(ToolResultMessage)


def _set_extra(obj: Any, value: dict[str, Any], known: frozenset[str]) -> Any:
    if not value.keys() <= known:
        # Frozen classes: set the way the general decoder (and attrs) does.
        object.__setattr__(obj, "extra", _extra(value, known))
    return obj


def _optional_str(value: Any) -> str | None:
    if value is None or value.__class__ is str:
        return value
    raise _SLOW


def _text(block: dict[str, Any]) -> TextContent:
    text = block["text"]
    if text.__class__ is not str:
        raise _SLOW
    if len(block) == 2:  # type and text: the usual block
        return TextContent(text=text)
    if "textSignature" in block:
        obj = TextContent(text=text, text_signature=_optional_str(block["textSignature"]))
    else:
        obj = TextContent(text=text)
    return _set_extra(obj, block, _TEXT_KNOWN)  # type: ignore[no-any-return]


def _thinking(block: dict[str, Any]) -> ThinkingContent:
    thinking = block["thinking"]
    if thinking.__class__ is not str:
        raise _SLOW
    kwargs: dict[str, Any] = {"thinking": thinking}
    if "thinkingSignature" in block:
        kwargs["thinking_signature"] = _optional_str(block["thinkingSignature"])
    if "redacted" in block:
        redacted = block["redacted"]
        if redacted is not None and redacted.__class__ is not bool:
            raise _SLOW
        kwargs["redacted"] = redacted
    return _set_extra(ThinkingContent(**kwargs), block, _THINKING_KNOWN)  # type: ignore[no-any-return]


def _image(block: dict[str, Any]) -> ImageContent:
    data = block["data"]
    mime_type = block["mimeType"]
    if data.__class__ is not str or mime_type.__class__ is not str:
        raise _SLOW
    return _set_extra(ImageContent(data=data, mime_type=mime_type), block, _IMAGE_KNOWN)  # type: ignore[no-any-return]


def _call(block: dict[str, Any]) -> ToolCall:
    call_id = block["id"]
    name = block["name"]
    arguments = block["arguments"]
    if call_id.__class__ is not str or name.__class__ is not str:
        raise _SLOW
    if arguments.__class__ is not dict:
        raise _SLOW
    for key in arguments:
        if key.__class__ is not str:
            raise _SLOW
    kwargs: dict[str, Any] = {"id": call_id, "name": name, "arguments": dict(arguments)}
    if "thoughtSignature" in block:
        kwargs["thought_signature"] = _optional_str(block["thoughtSignature"])
    if "namespace" in block:
        kwargs["namespace"] = _optional_str(block["namespace"])
    return _set_extra(ToolCall(**kwargs), block, _CALL_KNOWN)  # type: ignore[no-any-return]


_ASSISTANT_BLOCKS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "text": _text,
    "thinking": _thinking,
    "toolCall": _call,
}
_USER_BLOCKS: dict[str, Callable[[dict[str, Any]], Any]] = {"text": _text, "image": _image}


def _blocks(value: Any, kinds: dict[str, Callable[[dict[str, Any]], Any]]) -> tuple[Any, ...]:
    if value.__class__ is not list:
        raise _SLOW
    out = []
    for block in value:
        if block.__class__ is not dict:
            raise _SLOW
        kind = block.get("type")
        if kind.__class__ is not str:
            raise _SLOW
        out.append(kinds[kind](block))  # another type: KeyError, the general decoder's
    return tuple(out)


_COST_FLOATS = {
    "input": "input",
    "output": "output",
    "cacheRead": "cache_read",
    "cacheWrite": "cache_write",
    "total": "total",
}


def _cost(value: Any) -> Cost:
    if value.__class__ is not dict:
        raise _SLOW
    if value == _ZERO_COST_JSON:  # five keys, each 0: but False == 0 and 0.0 == 0 too
        for item in value.values():
            if item.__class__ is not int:
                break
        else:
            return _ZERO_COST
    kwargs: dict[str, Any] = {}
    for key, item in value.items():
        name = _COST_FLOATS.get(key)
        if name is not None:
            kind = item.__class__
            if kind is int:
                kwargs[name] = _ZERO if item == 0 else float(item)
            elif kind is float:
                kwargs[name] = item
            else:
                raise _SLOW
        elif key == "totalFromProvider":
            if item is not None and item.__class__ is not bool:
                raise _SLOW
            kwargs["total_from_provider"] = item
    obj = Cost(**kwargs)
    if len(kwargs) != len(value):  # each known key gave one argument: the rest are unknown
        object.__setattr__(obj, "extra", _extra(value, _COST_KNOWN))
    return obj


_ZERO_COST_JSON = dict.fromkeys(_COST_FLOATS, 0)
_ZERO_COST = Cost(input=_ZERO, output=_ZERO, cache_read=_ZERO, cache_write=_ZERO, total=_ZERO)
"""The cost of most responses of a session on a subscription or a local model: one frozen
object shared, not one per message (it equals what the general decoder builds, whose amounts
are the shared zero a JSON 0 decodes to)."""


_USAGE_INTS = {
    "input": "input",
    "output": "output",
    "cacheRead": "cache_read",
    "cacheWrite": "cache_write",
    "totalTokens": "total_tokens",
}
_USAGE_OPTIONAL_INTS = {"reasoning": "reasoning", "cacheWrite1h": "cache_write_1h"}


def _usage(value: Any) -> Usage:
    if value.__class__ is not dict:
        raise _SLOW
    kwargs: dict[str, Any] = {}
    for key, item in value.items():
        name = _USAGE_INTS.get(key)
        if name is not None:
            if item.__class__ is not int:
                raise _SLOW
            kwargs[name] = item
        elif key == "cost":
            kwargs["cost"] = _cost(item)
        else:
            name = _USAGE_OPTIONAL_INTS.get(key)
            if name is not None:
                if item is not None and item.__class__ is not int:
                    raise _SLOW
                kwargs[name] = item
    obj = Usage(**kwargs)
    if len(kwargs) != len(value):  # each known key gave one argument: the rest are unknown
        object.__setattr__(obj, "extra", _extra(value, _USAGE_KNOWN))
    return obj


def _timestamp(value: dict[str, Any]) -> int:
    timestamp = value["timestamp"]
    if timestamp.__class__ is not int:
        raise _SLOW
    return timestamp


def _user(value: dict[str, Any]) -> UserMessage:
    if value.get("role") != "user":
        raise _SLOW
    content = value["content"]
    if content.__class__ is not str:
        content = _blocks(content, _USER_BLOCKS)
    obj = UserMessage(content=content, timestamp=_timestamp(value))
    if len(value) != 3:  # role, content, timestamp: the rest are unknown
        object.__setattr__(obj, "extra", _extra(value, _USER_KNOWN))
    return obj


_ASSISTANT_STRINGS = {
    "providerThinkingLevel": "provider_thinking_level",
    "responseId": "response_id",
    "responseModel": "response_model",
    "rawStopReason": "raw_stop_reason",
    "errorMessage": "error_message",
}


def _assistant(value: dict[str, Any]) -> AssistantMessage:
    if value.get("role") != "assistant":
        raise _SLOW
    api, provider, model = value["api"], value["provider"], value["model"]
    if api.__class__ is not str or provider.__class__ is not str or model.__class__ is not str:
        raise _SLOW
    stop_reason = value["stopReason"]
    if stop_reason.__class__ is not str:
        raise _SLOW
    kwargs: dict[str, Any] = {
        "content": _blocks(value["content"], _ASSISTANT_BLOCKS),
        # Equal strings repeated message after message: one object of each (issue 7).
        "api": intern(api),
        "provider": intern(provider),
        "model": intern(model),
        "usage": _usage(value["usage"]),
        "stop_reason": _STOP_REASONS[stop_reason],
        "timestamp": _timestamp(value),
    }
    if len(value) > 8:  # the seven keys above and the role: the optional ones follow
        for key, item in value.items():
            name = _ASSISTANT_STRINGS.get(key)
            if name is not None:
                kwargs[name] = _optional_str(item)
            elif key == "durationMs":
                if item is not None and item.__class__ is not int:
                    raise _SLOW
                kwargs["duration_ms"] = item
            elif key == "thinkingLevel":
                if item is not None:
                    if item.__class__ is not str:
                        raise _SLOW
                    item = _THINKING_LEVELS[item]
                kwargs["thinking_level"] = item
            elif key == "endTurn":
                if item is not None and item.__class__ is not bool:
                    raise _SLOW
                kwargs["end_turn"] = item
            elif key == "diagnostics":
                raise _SLOW  # rare: the general decoder's
    obj = AssistantMessage(**kwargs)
    if len(kwargs) + 1 != len(value):  # the role, and one argument for each other known key
        object.__setattr__(obj, "extra", _extra(value, _ASSISTANT_KNOWN))
    return obj


def _tool_result(value: dict[str, Any]) -> ToolResultMessage:
    if value.get("role") != "toolResult":
        raise _SLOW
    call_id, name, is_error = value["toolCallId"], value["toolName"], value["isError"]
    if call_id.__class__ is not str or name.__class__ is not str or is_error.__class__ is not bool:
        raise _SLOW
    kwargs: dict[str, Any] = {
        "tool_call_id": call_id,
        "tool_name": name,
        "content": _blocks(value["content"], _USER_BLOCKS),
        "is_error": is_error,
        "timestamp": _timestamp(value),
    }
    if "details" in value:
        kwargs["details"] = value["details"]  # Any: taken as it is, as the general decoder does
    if "usage" in value:
        usage = value["usage"]
        kwargs["usage"] = None if usage is None else _usage(usage)
    if "durationMs" in value:
        duration = value["durationMs"]
        if duration is not None and duration.__class__ is not int:
            raise _SLOW
        kwargs["duration_ms"] = duration
    if "nestedCalls" in value:
        raise _SLOW  # rare: the general decoder's
    obj = ToolResultMessage(**kwargs)
    if len(kwargs) + 1 != len(value):  # the role, and one argument for each other known key
        object.__setattr__(obj, "extra", _extra(value, _RESULT_KNOWN))
    return obj


_DECODERS: dict[type, Callable[[dict[str, Any]], Any]] = {
    UserMessage: _user,
    AssistantMessage: _assistant,
    ToolResultMessage: _tool_result,
}


def decode_message(value: Any, cls: Any) -> Any:
    """``value`` decoded as ``cls`` (a user, assistant or tool result message class) when it
    has a shape this module handles; ``None`` when the general decoder must decide (another
    class, another shape, or invalid JSON: its error is the one to raise)."""
    decoder = _DECODERS.get(cls)
    if decoder is None or value.__class__ is not dict:
        return None
    try:
        return decoder(value)
    except Exception:  # _Slow, or a missing key, a literal it lacks, an unhashable type
        return None
