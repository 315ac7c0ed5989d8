"""The ``mistral-conversations`` provider: Mistral's chat completions API, natively.

Request: ``POST {baseUrl}/v1/chat/completions`` with ``stream: true``, authorised by
``Authorization: Bearer``; field names in snake case as Mistral's SDK sends them (``max_tokens``,
``tool_choice``, ``prompt_mode``, ``reasoning_effort``, ``tool_calls``, ``tool_call_id``,
``image_url`` as a plain data URL string). ``x-affinity`` carries the session id (Mistral reuses
its prefix cache by it) unless the configured headers name one.

Answer: SSE ``data:`` chunks ending with ``data: [DONE]``. ``choices[0].delta.content`` is a
string or a list of chunks (``{"type": "text"}``, ``{"type": "thinking", "thinking": [text
chunks]}``); ``tool_calls`` carry whole or partial calls keyed by id and index; ``usage``
(``prompt_tokens``, ``completion_tokens``, ``total_tokens``) comes on the last chunk. As pi:
text and thinking blocks follow one another (a new kind closes the current block), tool calls
all end when the stream ends, and ``finish_reason`` maps ``tool_calls`` to ``toolUse``,
``length``/``model_length`` to ``length`` and ``error`` to a failure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from pitrio.actors.model_router.providers.base import (
    CacheRetention,
    output_limit,
    request_cache_retention,
)
from pitrio.actors.model_router.providers.convert import (
    TranscriptPreparer,
    data_url,
    positive_int,
    same_model,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    MalformedStreamError,
    SseParser,
    bearer_json_request,
    join_url,
    stream_error_message,
)
from pitrio.actors.model_router.providers.retry import RetryPolicy
from pitrio.actors.model_router.providers.strict_tools import (
    resolve_strict,
    supports_strict_mode,
    tool_parameters,
)
from pitrio.actors.model_router.thinking import effective_thinking_level
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.codec import dumps
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent

API = "mistral-conversations"
TOOL_ID_LENGTH = 9
"""Mistral accepts tool-call ids of exactly nine letters and digits."""
EFFORT_MODELS = frozenset({"mistral-small-2603", "mistral-small-latest", "mistral-medium-3.5"})
"""The reasoning models steered by ``reasoning_effort``; the others by ``prompt_mode``."""
NO_IMAGES_TEXT = "(image omitted: model does not support images)"

# -- tool-call ids ---------------------------------------------------------------------------

_MASK = 0xFFFFFFFF
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(value: int) -> str:
    out = ""
    while True:
        value, digit = divmod(value, 36)
        out = _DIGITS[digit] + out
        if not value:
            return out


def pi_short_hash(text: str) -> str:
    """The 53-bit string hash pi derives short ids with (the public cyrb53 construction over
    UTF-16 code units), as base-36 digits: the same ids pi would send."""
    h1, h2 = 0xDEADBEEF, 0x41C6CE57
    units = text.encode("utf-16-le")
    for i in range(0, len(units), 2):
        unit = units[i] | (units[i + 1] << 8)
        h1 = ((h1 ^ unit) * 2654435761) & _MASK
        h2 = ((h2 ^ unit) * 1597334677) & _MASK
    h1 = (((h1 ^ (h1 >> 16)) * 2246822507) & _MASK) ^ (((h2 ^ (h2 >> 13)) * 3266489909) & _MASK)
    h2 = (((h2 ^ (h2 >> 16)) * 2246822507) & _MASK) ^ (((h1 ^ (h1 >> 13)) * 3266489909) & _MASK)
    return _base36(h2) + _base36(h1)


def _derive_id(value: str, attempt: int) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9]", "", value)
    if attempt == 0 and len(cleaned) == TOOL_ID_LENGTH:
        return cleaned
    seed = cleaned or value
    if attempt:
        seed = f"{seed}:{attempt}"
    return re.sub(r"[^a-zA-Z0-9]", "", pi_short_hash(seed))[:TOOL_ID_LENGTH]


class ToolIdMap:
    """Per request: each transcript tool-call id to a distinct nine-character Mistral id."""

    def __init__(self, keep: frozenset[str] = frozenset()) -> None:
        # As pi: ids of calls the model itself made go back unchanged; only foreign ones
        # (another provider's, another model's) are rewritten.
        self._ids: dict[str, str] = {value: value for value in keep}
        self._owners: dict[str, str] = {value: value for value in keep}

    def __call__(self, value: str) -> str:
        known = self._ids.get(value)
        if known is not None:
            return known
        attempt = 0
        while True:
            candidate = _derive_id(value, attempt)
            owner = self._owners.get(candidate)
            if owner is None or owner == value:
                self._ids[value] = candidate
                self._owners[candidate] = value
                return candidate
            attempt += 1  # another id hashed to the same value: derive again


# -- the request -----------------------------------------------------------------------------


def _image(image: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": data_url(image)}


def _user(message: UserMessage, images: bool) -> dict[str, Any] | None:
    if isinstance(message.content, str):
        return {"role": "user", "content": message.content}
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "text": block.text})
        elif images:
            parts.append(_image(block))
    if parts:
        return {"role": "user", "content": parts}
    if any(isinstance(block, ImageContent) for block in message.content):
        return {"role": "user", "content": NO_IMAGES_TEXT}
    return None


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if block.thinking.strip():
                thought = [{"type": "text", "text": block.thinking}]
                parts.append({"type": "thinking", "thinking": thought})
        else:
            calls.append(_tool_call(block))
    if not parts and not calls:
        return None
    # pi 1.6.0's key order: the SDK's default ``prefix`` right after the role (pi sets it
    # there), then the content, then the calls.
    out: dict[str, Any] = {"role": "assistant", "prefix": False}
    if parts:
        out["content"] = parts
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = dumps(call.arguments or {}).decode()
    function = {"name": call.name, "arguments": arguments}
    # "index" is the SDK's default, sent on every call as pi's requests carry it.
    return {"id": call.id, "type": "function", "function": function, "index": 0}


def _tool_result_text(message: ToolResultMessage, images: bool) -> str:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextContent)).strip()
    has_images = any(isinstance(b, ImageContent) for b in message.content)
    prefix = "[tool error] " if message.is_error else ""
    if text:
        suffix = "\n[tool image omitted: model does not support images]"
        return prefix + text + (suffix if has_images and not images else "")
    if has_images:
        return prefix + ("(see attached image)" if images else NO_IMAGES_TEXT)
    return prefix + "(no tool output)"


def _tool_result(message: ToolResultMessage, images: bool) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": _tool_result_text(message, images)}]
    if images:
        content.extend(_image(b) for b in message.content if isinstance(b, ImageContent))
    # pi 1.6.0's key order: it builds role, call id, name, content and then renames the call
    # id to its wire name, which moves that key last.
    return {
        "role": "tool",
        "name": message.tool_name,
        "content": content,
        "tool_call_id": message.tool_call_id,
    }


def build_messages(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    """``context`` as Mistral chat messages, the system prompt first."""
    images = "image" in model.input
    own = frozenset(
        block.id
        for message in context.messages
        if isinstance(message, AssistantMessage) and same_model(message, model)
        for block in message.content
        if isinstance(block, ToolCall)
    )
    preparer = TranscriptPreparer(model, ToolIdMap(own))
    prepared = [out for message in context.messages for out in preparer.feed(message)]
    prepared.extend(preparer.finish())
    messages: list[dict[str, Any]] = []
    if context.system_prompt:
        messages.append({"role": "system", "content": context.system_prompt})
    for message in prepared:
        entry: dict[str, Any] | None
        if isinstance(message, UserMessage):
            entry = _user(message, images)
        elif isinstance(message, AssistantMessage):
            entry = _assistant(message)
        else:
            entry = _tool_result(message, images)
        if entry is not None:
            messages.append(entry)
    return messages


def _reasoning(model: Model, options: StreamOptions) -> dict[str, Any]:
    if not model.reasoning:
        return {}
    level = effective_thinking_level(model, options.reasoning)
    if level == "off":
        return {}
    if model.id in EFFORT_MODELS:
        mapped = (model.thinking_level_map or {}).get(level)
        return {"reasoning_effort": mapped if isinstance(mapped, str) else "high"}
    return {"prompt_mode": "reasoning"}


def build_body(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    cache_retention: CacheRetention = "short",
) -> dict[str, Any]:
    """The JSON body of one streamed request (pure; pi 1.6.0's key order).

    pi builds the body itself: model, stream, messages, tools, then the fields it renames to
    their wire names (``max_tokens``, ``reasoning_effort``, ``prompt_mode``,
    ``prompt_cache_key``), which land last in that order. Tools are strict only where the
    model's ``compat.supportsStrictMode`` opts in (strict tools can stall Mistral's models).
    """
    body: dict[str, Any] = {"model": model.id, "stream": True}
    body["messages"] = build_messages(model, context)
    if context.tools:
        supported = supports_strict_mode(model, False)
        tools = []
        for tool in context.tools:
            strict = resolve_strict(tool, supported)
            function = {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool_parameters(tool, strict),
                "strict": bool(strict),
            }
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
    max_tokens = output_limit(model, options)
    if max_tokens:
        body["max_tokens"] = max_tokens
    reasoning = _reasoning(model, options)
    for key in ("reasoning_effort", "prompt_mode"):
        if key in reasoning:
            body[key] = reasoning[key]
    if options.session_id and cache_retention != "none":
        body["prompt_cache_key"] = options.session_id
    return body


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
    cache_retention: CacheRetention = "short",
) -> HttpRequest:
    """The HTTP request of one streamed response (pure)."""
    extra = {name.lower(): value for name, value in headers.items()}
    if options.session_id and cache_retention != "none" and "x-affinity" not in extra:
        extra["x-affinity"] = options.session_id
    return bearer_json_request(
        join_url(model.base_url, "v1/chat/completions"),
        build_body(model, context, options, cache_retention),
        api_key=api_key,
        headers=extra,
    )


# -- the parser ------------------------------------------------------------------------------

_STOP_REASONS = {"tool_calls": "toolUse", "length": "length", "model_length": "length"}


class MistralParser(SseParser):
    """Mistral chat completion chunks in, assistant stream events out (sans-IO)."""

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._current: tuple[str, int] | None = None  # the open text/thinking block
        self._calls: dict[str, int] = {}  # "<id>:<index>" -> content index
        self._finish: str | None = None
        self._response_id: str | None = None

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one ``data:`` chunk (``[DONE]`` ends the stream)."""
        if data.strip() == "[DONE]":
            return self._complete()
        chunk = self.json(data, event)
        if not isinstance(chunk, dict):
            raise MalformedStreamError(f"expected a JSON object, got {data[:80]!r}")
        if chunk.get("error") or chunk.get("object") == "error":
            document = chunk if chunk.get("error") else {"error": chunk}
            message, kind = stream_error_message(document)
            return [self.fail(message, name="StreamError", code=kind)]
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        chunk_id = chunk.get("id")
        if self._response_id is None and isinstance(chunk_id, str) and chunk_id:
            self._response_id = chunk_id
            self.builder.set_response_id(chunk_id)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.builder.set_usage(
                make_usage(
                    input=positive_int(usage.get("prompt_tokens")),
                    output=positive_int(usage.get("completion_tokens")),
                    model=self.model,
                )
            )
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return out
        choice = choices[0]
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._finish = finish
            self.builder.set_raw_stop_reason(finish)
        delta = choice.get("delta")
        if isinstance(delta, dict):
            self._delta(delta, out)
        return out

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended without ``[DONE]``: complete only if a ``finish_reason`` came."""
        if self._finish is None:
            raise MalformedStreamError(
                "ended without a finish_reason or [DONE] (the response was cut short)"
            )
        return self._complete()

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the block at ``index``."""
        if self._current is not None and self._current[1] == index:
            kind = self._current[0]
            self._current = None
            if kind == "thinking":
                return self.builder.thinking_end(index)
            return self.builder.text_end(index)
        return self.builder.toolcall_end(index)

    # -- internals -------------------------------------------------------------------------

    def _delta(self, delta: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        content = delta.get("content")
        items = [content] if isinstance(content, str) else content
        if isinstance(items, list):
            for item in items:
                if isinstance(item, str):
                    self._append("text", item, out)
                elif isinstance(item, dict) and item.get("type") == "text":
                    text = item.get("text")
                    self._append("text", text if isinstance(text, str) else "", out)
                elif isinstance(item, dict) and item.get("type") == "thinking":
                    parts = item.get("thinking")
                    texts = [
                        part["text"]
                        for part in (parts if isinstance(parts, list) else [])
                        if isinstance(part, dict) and isinstance(part.get("text"), str)
                    ]
                    thought = "".join(texts)
                    if thought:  # pi opens no thinking block for an empty piece
                        self._append("thinking", thought, out)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._tool_call(call, out)

    def _append(self, kind: str, text: str, out: list[AssistantMessageEvent]) -> None:
        if self._current is None or self._current[0] != kind:
            self._close_current(out)
            start = self.builder.text_start() if kind == "text" else self.builder.thinking_start()
            out.append(start)
            self._current = (kind, start.content_index)
        index = self._current[1]
        if kind == "text":
            out.append(self.builder.text_delta(text, index))
        else:
            out.append(self.builder.thinking_delta(text, index))

    def _close_current(self, out: list[AssistantMessageEvent]) -> None:
        if self._current is not None:
            out.append(self.close_block(self._current[1]))

    def _tool_call(self, call: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        self._close_current(out)
        position = call.get("index")
        position = position if isinstance(position, int) and not isinstance(position, bool) else 0
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id or call_id == "null":
            call_id = _derive_id(f"toolcall:{position}", 0)
        key = f"{call_id}:{position}"
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        index = self._calls.get(key)
        if index is None:
            name = function.get("name")
            start = self.builder.toolcall_start(call_id, name if isinstance(name, str) else "")
            out.append(start)
            index = self._calls[key] = start.content_index
        arguments = function.get("arguments")
        # Mistral may send the arguments as an object rather than JSON text.
        if isinstance(arguments, str):
            piece = arguments
        else:
            piece = orjson.dumps(arguments if isinstance(arguments, dict) else {}).decode()
        out.append(self.builder.toolcall_delta(piece, index))

    def _complete(self) -> list[AssistantMessageEvent]:
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        self._close_current(out)
        self.close_open_blocks(out)  # the tool calls, in content order
        if self._finish == "error":
            # pi's words when a response ends in an error stop reason.
            out.append(self.fail("An unknown error occurred", name="StreamError", code="error"))
            return out
        reason = _STOP_REASONS.get(self._finish or "", "stop")
        out.append(self.builder.done(reason))  # type: ignore[arg-type]
        return out


class MistralProvider(HttpProvider):
    """The ``mistral-conversations`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    error_style = "mistral"

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """See :func:`build_request`."""
        return build_request(
            model,
            context,
            options,
            api_key=api_key,
            headers=headers,
            cache_retention=request_cache_retention(self.settings, options),
        )

    def retry_policy(self) -> RetryPolicy:
        """No provider-level repeats: pi runs Mistral's SDK with its retries off, so a 429 or
        a 5xx goes straight to the session's auto-retry."""
        return attrs.evolve(super().retry_policy(), max_retries=0)

    def new_parser(self, model: Model) -> MistralParser:
        """A parser for one response of ``model``."""
        return MistralParser(model)


__all__ = [
    "API",
    "MistralParser",
    "MistralProvider",
    "ToolIdMap",
    "build_body",
    "build_messages",
    "build_request",
    "pi_short_hash",
]
