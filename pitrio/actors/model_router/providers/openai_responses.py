"""The ``openai-responses`` provider: OpenAI's Responses API, streamed, stateless.

Request: ``POST {baseUrl}/responses`` with ``stream: true`` and ``store: false`` (the
transcript is sent every time; reasoning items travel back encrypted, requested with
``include: ["reasoning.encrypted_content"]``). Answer: SSE events named by their ``type``:
``response.created``, ``response.output_item.added`` / ``.done`` per output item (``message``,
``reasoning``, ``function_call``), ``response.output_text.delta``,
``response.reasoning_summary_text.delta`` (and ``response.reasoning_text.delta`` for raw
reasoning), ``response.function_call_arguments.delta``, and one terminal event:
``response.completed``, ``response.incomplete`` or ``response.failed`` (or ``error``).

What is kept for the next turn (pi's conventions): a tool call's id is ``<call_id>|<item id>``;
a text block's signature is ``{"v":1,"id":<message item id>}``; a thinking block's signature
is the whole reasoning item as JSON.

The body is pi 0.73.1's, key order included (checked against real pi by the differential
harness's ``openai-responses`` kind): the system prompt is the first input item (role
``developer`` for a reasoning model, else ``system``), every replayed text item has an ``id``
(its signature's, else ``msg_<n>`` with ``n`` the message's place in the transcript), a tool
result with images is a list of input parts for a model that takes images, and a reasoning model
with thinking off is asked for ``reasoning.effort: "none"`` (its map's ``off`` value) without
``include``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from pitrio.actors.model_router.model_fields import sampling_params
from pitrio.actors.model_router.providers.base import (
    CacheRetention,
    output_limit,
    request_cache_retention,
)
from pitrio.actors.model_router.providers.convert import (
    EncodedItems,
    PrefixCache,
    TranscriptPreparer,
    data_url,
    same_model,
    short_hash,
    tool_result_text,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    bearer_json_request,
    join_url,
)
from pitrio.actors.model_router.providers.openai_responses_stream import (
    API,
    OpenAIResponsesParser,
)
from pitrio.actors.model_router.providers.strict_tools import (
    compat_flag,
    responses_tools,
    supports_strict_mode,
)
from pitrio.actors.model_router.thinking import effective_thinking_level, reasoning_effort
from pitrio.messages.agent import (
    AssistantMessage,
    LlmMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import dumps
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent, ToolCall
from pitrio.messages.model import LlmContext, Model, StreamOptions


def normalize_tool_id(value: str) -> str:
    """Keep ``call|item`` ids; make foreign ids fit OpenAI's 64-character call ids."""
    call_id, _, item_id = value.partition("|")
    if len(call_id) > 64:
        call_id = "call_" + short_hash(call_id, 40)
    return f"{call_id}|{item_id}" if item_id else call_id


def _text_item_id(signature: str | None) -> str | None:
    if not signature:
        return None
    if signature.startswith("{"):
        try:
            value = orjson.loads(signature)
        except orjson.JSONDecodeError:
            return None
        item_id = value.get("id") if isinstance(value, dict) else None
        return item_id if isinstance(item_id, str) else None
    return signature if signature.startswith("msg_") else None


def _reasoning_item(signature: str | None) -> dict[str, Any] | None:
    if not signature or not signature.startswith("{"):
        return None
    try:
        value = orjson.loads(signature)
    except orjson.JSONDecodeError:
        return None
    if isinstance(value, dict) and value.get("type") == "reasoning":
        return value
    return None


def _input_content(
    content: str | tuple[TextContent | ImageContent, ...],
) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "input_text", "text": block.text})
        else:
            parts.append({"type": "input_image", "detail": "auto", "image_url": data_url(block)})
    return parts


def _assistant_items(message: AssistantMessage, own: bool, index: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            item = _reasoning_item(block.thinking_signature) if own else None
            if item is not None:
                items.append(item)
        elif isinstance(block, TextContent):
            if not block.text:
                continue
            item_id = (_text_item_id(block.text_signature) if own else None) or f"msg_{index}"
            if len(item_id) > 64:
                item_id = "msg_" + short_hash(item_id, 16)
            items.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                    "status": "completed",
                    "id": item_id,
                }
            )
        elif isinstance(block, ToolCall):
            call_id, _, item_id = block.id.partition("|")
            call: dict[str, Any] = {"type": "function_call"}
            if own and item_id:
                call["id"] = item_id
            call.update(call_id=call_id, name=block.name, arguments=dumps(block.arguments).decode())
            items.append(call)
    return items


class ResponsesInput:
    """A transcript as Responses API input items, built one message at a time so the state
    after a prefix can be kept and resumed (:meth:`copy`); with ``encoded`` each item is kept
    as its JSON, made once."""

    def __init__(self, model: Model, *, encoded: bool = False) -> None:
        self.model = model
        self.preparer = TranscriptPreparer(model, normalize_tool_id)
        self.items = EncodedItems(encoded=encoded)
        self.index = 0  # the prepared message's place (pi's fallback text item ids)

    def copy(self) -> ResponsesInput:
        """An independent builder in the same state."""
        twin = ResponsesInput.__new__(ResponsesInput)
        twin.model = self.model
        twin.preparer = self.preparer.copy()
        twin.items = self.items.copy()
        twin.index = self.index
        return twin

    def _add(self, item: dict[str, Any]) -> None:
        self.items.append(item)

    def _emit(self, message: LlmMessage) -> None:
        if isinstance(message, ToolResultMessage):
            self._add(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id.partition("|")[0],
                    "output": self._result_output(message),
                }
            )
            self.index += 1
            return
        if isinstance(message, UserMessage):
            content = _input_content(message.content)
            if not content:
                return  # pi skips it, and does not count it
            self._add({"role": "user", "content": content})
        elif isinstance(message, AssistantMessage):
            own = same_model(message, self.model)
            items = _assistant_items(message, own, self.index)
            if not items:
                return
            for item in items:
                self._add(item)
        self.index += 1

    def _result_output(self, message: ToolResultMessage) -> str | list[dict[str, Any]]:
        """A result's ``output``: its text, or (images, to a model that takes them) its parts."""
        text = tool_result_text(message)
        images = tuple(b for b in message.content if isinstance(b, ImageContent))
        if images and self.preparer.images:
            head = (TextContent(text=text),) if text else ()
            return _input_content((*head, *images))
        return text or "(see attached image)"

    def feed(self, message: LlmMessage) -> None:
        """Add one transcript message."""
        for prepared in self.preparer.feed(message):
            self._emit(prepared)

    def finish(self) -> list[Any]:
        """Every item, the end's owed results and images included (this builder is left as
        it was)."""
        tail = self.preparer.copy().finish()
        if not tail:
            return self.items.items()
        # The owed end goes to a plain builder in the same state (no copy of the encoded).
        twin = ResponsesInput.__new__(ResponsesInput)
        twin.model, twin.preparer = self.model, self.preparer.copy()
        twin.items = EncodedItems(encoded=False)
        twin.index = self.index
        for message in tail:
            twin._emit(message)
        return [*self.items.items(), *twin.items.items()]


def build_input(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    """``context``'s messages as Responses API input items."""
    builder = ResponsesInput(model)
    for message in context.messages:
        builder.feed(message)
    return builder.finish()


_PREFIXES: PrefixCache[ResponsesInput] = PrefixCache()


def encoded_input(model: Model, context: LlmContext) -> list[Any]:
    """:func:`build_input` with each item as its JSON, resumed from the previous request of
    the same transcript (:class:`PrefixCache`): only new messages are prepared and encoded."""
    builder = _PREFIXES.builder(
        model, context.messages, lambda: ResponsesInput(model, encoded=True)
    )
    return builder.finish()


MIN_OUTPUT_TOKENS = 16
"""The smallest ``max_output_tokens`` pi asks of the Responses API."""


def affinity_format(model: Model) -> str:
    """The model's ``compat.sessionAffinityFormat``, else ``openrouter`` for OpenRouter and
    ``openai`` for the others."""
    compat = model.compat if isinstance(model.compat, Mapping) else {}
    form = compat.get("sessionAffinityFormat")
    if isinstance(form, str):
        return form
    return (
        "openrouter"
        if model.provider == "openrouter" or "openrouter.ai" in model.base_url
        else "openai"
    )


def _compat_flag(model: Model, name: str) -> bool:
    """One of the model's ``compat`` flags that default to true (``supportsLongCacheRetention``)."""
    compat = model.compat if isinstance(model.compat, Mapping) else {}
    return compat.get(name, True) is not False


def build_body(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    encoded: bool = False,
    cache_retention: CacheRetention = "short",
    strict_default: bool = False,
) -> dict[str, Any]:
    """The JSON body of one streamed request (``encoded``: items as reused JSON fragments,
    see :func:`encoded_input`; else plain, and pure).

    Tools carry ``strict`` only where the model's ``compat.supportsStrictMode`` (default
    ``strict_default``: off for OpenAI's Responses API, on for Azure's) says the server takes it.

    The session id is the prompt-cache key unless caching is off (``cache_retention``
    ``none``); ``long`` asks for 24 hours where the model's ``supportsLongCacheRetention``
    allows it, as pi does.
    """
    items = encoded_input(model, context) if encoded else build_input(model, context)
    if context.system_prompt:
        role = "developer" if model.reasoning else "system"
        items = [{"role": role, "content": context.system_prompt}, *items]
    body: dict[str, Any] = {"model": model.id, "input": items, "stream": True}
    if options.session_id and cache_retention != "none":
        body["prompt_cache_key"] = options.session_id
    if cache_retention == "long" and _compat_flag(model, "supportsLongCacheRetention"):
        body["prompt_cache_retention"] = "24h"
    body["store"] = False
    max_tokens = output_limit(model, options)
    if max_tokens and compat_flag(model, "supportsMaxOutputTokens"):
        body["max_output_tokens"] = max(max_tokens, MIN_OUTPUT_TOKENS)
    if context.tools:
        supported = supports_strict_mode(model, strict_default)
        body["tools"] = responses_tools(context.tools, supported)
    if model.reasoning:
        level = effective_thinking_level(model, options.reasoning)
        effort = reasoning_effort(model, options.reasoning)
        if level != "off" and effort is not None:
            body["reasoning"] = {"effort": effort, "summary": "auto"}
            # Reasoning items are only usable next turn in their encrypted form (store is off).
            body["include"] = ["reasoning.encrypted_content"]
        else:
            off = (model.thinking_level_map or {}).get("off", "none")
            if off is not None:
                body["reasoning"] = {"effort": off}
    # pi 1.6.0: the model's samplingParams (then its thinking level's) go in last.
    body.update(sampling_params(model, effective_thinking_level(model, options.reasoning)))
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
    """The HTTP request of one streamed response (pure).

    With a session (and caching not off), its id also goes in headers by the model's
    ``compat.sessionAffinityFormat`` (pi 1.6.0): ``openrouter`` (the default at OpenRouter)
    ``x-session-id``; ``openai`` (the default elsewhere) ``session-id`` and
    ``x-client-request-id``; ``openai-nosession`` only ``x-client-request-id`` (pi 1.6.0 dropped
    ``compat.sendSessionIdHeader`` for it: the key is ignored, with a note). The configured
    headers still win.
    """
    session: dict[str, str] = {}
    if options.session_id and cache_retention != "none":
        form = affinity_format(model)
        if form == "openrouter":
            session["x-session-id"] = options.session_id
        else:
            if form == "openai":
                session["session-id"] = options.session_id
            session["x-client-request-id"] = options.session_id
    return bearer_json_request(
        join_url(model.base_url, "responses"),
        build_body(model, context, options, encoded=True, cache_retention=cache_retention),
        api_key=api_key,
        headers={**session, **headers},
    )


# -- the parser ------------------------------------------------------------------------------


class OpenAIResponsesProvider(HttpProvider):
    """The ``openai-responses`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    accept = "application/json"  # what pi's OpenAI client asks for, streaming or not

    def build_request(
        self,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        *,
        api_key: str | None,
        headers: Mapping[str, str],
    ) -> HttpRequest:
        """See :func:`build_request` (with the settings' cache retention)."""
        return build_request(
            model,
            context,
            options,
            api_key=api_key,
            headers=headers,
            cache_retention=request_cache_retention(self.settings, options),
        )

    def new_parser(self, model: Model) -> OpenAIResponsesParser:
        """A parser for one response of ``model``."""
        return OpenAIResponsesParser(model)
