"""The ``google-generative-ai`` provider: Gemini's ``streamGenerateContent`` endpoint.

Request: ``POST {baseUrl}/models/{model}:streamGenerateContent?alt=sse`` with the key in
``x-goog-api-key``; the body holds ``contents`` (turns of role ``user`` / ``model`` made of
``parts``), ``systemInstruction``, ``tools`` (``functionDeclarations`` with
``parametersJsonSchema``) and ``generationConfig`` (``maxOutputTokens``, ``thinkingConfig``:
a token budget for Gemini 2.x, a ``thinkingLevel`` for Gemini 3 and Gemma 4). Answer: SSE
``data:`` events, each a whole ``GenerateContentResponse`` (``candidates[0].content.parts``,
``finishReason``, ``usageMetadata``); the body simply ends after the last one.

A part with ``thought: true`` is thinking; ``thoughtSignature`` may ride on any part (text,
thinking, function call) and goes back on the same kind of part next turn, but only to the
model that made it and only when it is valid base64. Function calls arrive whole (no
argument deltas) and usually without an id, so one is made up.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from pitrio.actors.model_router.providers.base import ProviderSettings, output_limit
from pitrio.actors.model_router.providers.convert import (
    TranscriptPreparer,
    encode_json_pieces,
    same_model,
)
from pitrio.actors.model_router.providers.http import (
    HttpProvider,
    HttpRequest,
    MalformedStreamError,
    SseParser,
    join_url,
)
from pitrio.actors.model_router.providers.retry import RetryPolicy
from pitrio.actors.model_router.providers.strict_tools import resolve_strict, tool_parameters
from pitrio.actors.model_router.thinking import effective_thinking_level
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import AssistantMessage, LlmMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent

API = "google-generative-ai"
UNKNOWN_ERROR = "An unknown error occurred"
"""pi's text for a response that finished for a reason other than STOP / MAX_TOKENS."""

_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_META_KEYS = frozenset(
    ("$schema", "$id", "$anchor", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
     "definitions")
)  # fmt: skip
_call_numbers = itertools.count(1)

# -- the request -----------------------------------------------------------------------------


def requires_tool_call_id(model_id: str) -> bool:
    """Models behind Google's APIs that need the call id echoed (Claude, gpt-oss)."""
    return model_id.startswith(("claude-", "gpt-oss-"))


def _gemini_major(model_id: str) -> int | None:
    match = re.match(r"^gemini(?:-live)?-(\d+)", model_id.lower())
    return int(match.group(1)) if match else None


def _multimodal_function_response(model_id: str) -> bool:
    major = _gemini_major(model_id)
    return major is None or major >= 3


def _signature(valid_here: bool, signature: str | None) -> dict[str, str]:
    """``{"thoughtSignature": ...}`` when the signature may go back (same model, base64)."""
    if (
        valid_here
        and signature
        and len(signature) % 4 == 0
        and _BASE64.match(signature) is not None
    ):
        return {"thoughtSignature": signature}
    return {}


def _user_parts(content: str | tuple[TextContent | ImageContent, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    return [
        {"text": block.text}
        if isinstance(block, TextContent)
        else {"inlineData": {"data": block.data, "mimeType": block.mime_type}}
        for block in content
    ]


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    # The preparer already turned another model's thinking into text and dropped its
    # signatures; this check keeps signatures of a same-named model of another API out.
    mine = same_model(message, model)
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append({"text": block.text, **_signature(mine, block.text_signature)})
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if mine:
                parts.append(
                    {"text": block.thinking, "thought": True,
                     **_signature(mine, block.thinking_signature)}
                )  # fmt: skip
            else:
                parts.append({"text": block.thinking})
        else:
            call: dict[str, Any] = {"args": block.arguments, "name": block.name}
            if requires_tool_call_id(model.id):
                call = {"id": block.id, **call}
            parts.append({"functionCall": call, **_signature(mine, block.thought_signature)})
    return parts


def _tool_result_turns(
    message: ToolResultMessage, model: Model, contents: list[dict[str, Any]]
) -> None:
    text = "\n".join(block.text for block in message.content if isinstance(block, TextContent))
    images = (
        [
            {"inlineData": {"data": block.data, "mimeType": block.mime_type}}
            for block in message.content
            if isinstance(block, ImageContent)
        ]
        if "image" in model.input
        else []
    )
    value = text if text else ("(see attached image)" if images else "")
    nested = _multimodal_function_response(model.id)
    response: dict[str, Any] = {
        "name": message.tool_name,
        "response": {"error": value} if message.is_error else {"output": value},
    }
    if images and nested:
        response["parts"] = images
    if requires_tool_call_id(model.id):
        response["id"] = message.tool_call_id
    part = {"functionResponse": response}
    last = contents[-1] if contents else None
    # All results of one response go in a single user turn.
    if last and last["role"] == "user" and any("functionResponse" in p for p in last["parts"]):
        last["parts"].append(part)
    else:
        contents.append({"parts": [part], "role": "user"})
    if images and not nested:
        # Gemini before 3 takes no images inside a function response: a user turn follows.
        contents.append({"parts": [{"text": "Tool result image:"}, *images], "role": "user"})


def _normalize_id(model: Model) -> Any:
    if not requires_tool_call_id(model.id):
        return None
    return lambda value: _ID_INVALID.sub("_", value)[:64]


def build_contents(model: Model, context: LlmContext) -> list[dict[str, Any]]:
    """``context``'s messages as Gemini ``contents`` (pure)."""
    preparer = TranscriptPreparer(model, _normalize_id(model))
    prepared: list[LlmMessage] = []
    for message in context.messages:
        prepared.extend(preparer.feed(message))
    prepared.extend(preparer.finish())
    contents: list[dict[str, Any]] = []
    for message in prepared:
        if isinstance(message, UserMessage):
            parts = _user_parts(message.content)
            if parts:
                contents.append({"parts": parts, "role": "user"})
        elif isinstance(message, AssistantMessage):
            parts = _model_parts(message, model)
            if parts:
                contents.append({"parts": parts, "role": "model"})
        elif isinstance(message, ToolResultMessage):
            _tool_result_turns(message, model, contents)
    return contents


def _strip_meta(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    return {key: _strip_meta(value) for key, value in schema.items() if key not in _META_KEYS}


def strict_tools_supported(model_id: str) -> bool:
    """Gemini 3 and later enforce a function's required parameters in validated mode."""
    match = re.match(r"gemini(?:-live)?-(\d+)", model_id.lower())
    return match is not None and int(match.group(1)) >= 3


def _rewrite_const(schema: Any, names: bool = False) -> Any:
    """Gemini ignores ``const`` in a JSON schema: a string or number ``const`` becomes a
    one-value ``enum`` (property names and other non-schema members are left alone)."""
    if isinstance(schema, list):
        return [_rewrite_const(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if names or key in _SUBSCHEMA_KEYS:
            out[key] = _rewrite_const(value)
        elif key in _NAME_MAP_KEYS:
            out[key] = _rewrite_const(value, names=True)
        else:
            out[key] = value
    if not names and "const" in out and "enum" not in out:
        value = out["const"]
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            del out["const"]
            out["enum"] = [value]
    return out


_SUBSCHEMA_KEYS = frozenset(
    {
        "items",
        "additionalItems",
        "prefixItems",
        "contains",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
        "not",
        "if",
        "then",
        "else",
        "allOf",
        "anyOf",
        "oneOf",
        "contentSchema",
    }
)
_NAME_MAP_KEYS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)


def function_declarations(
    context: LlmContext, *, legacy: bool = False, strict_supported: bool = False
) -> list[dict[str, Any]]:
    """The ``tools`` member: one ``functionDeclarations`` list (``legacy``: OpenAPI-style
    ``parameters`` without JSON Schema meta keys instead of ``parametersJsonSchema``); a tool
    asking for strict sampling gets its strict schema where ``strict_supported``."""
    declarations = []
    for tool in context.tools:
        parameters = tool_parameters(tool, resolve_strict(tool, strict_supported))
        declarations.append(
            {
                "name": tool.name,
                "description": tool.description,
                **(
                    {"parameters": _strip_meta(parameters)}
                    if legacy
                    else {"parametersJsonSchema": _rewrite_const(parameters)}
                ),
            }
        )
    return [{"functionDeclarations": declarations}]


def tool_config(context: LlmContext, strict_supported: bool) -> dict[str, Any] | None:
    """``toolConfig``: validated function calling when a tool goes out strict, else none."""
    if any(resolve_strict(tool, strict_supported) for tool in context.tools):
        return {"functionCallingConfig": {"mode": "VALIDATED"}}
    return None


def _gemini3_pro(model_id: str) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-pro", model_id.lower()) is not None


def _gemini3_flash(model_id: str) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-flash", model_id.lower()) is not None


def _gemma4(model_id: str) -> bool:
    return re.search(r"gemma-?4", model_id.lower()) is not None


_BUDGETS = {
    "2.5-pro": {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768},
    "2.5-flash-lite": {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576},
    "2.5-flash": {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576},
}


def thinking_config(
    model: Model, requested: str | None, budgets: Mapping[str, int] | None = None
) -> dict[str, Any] | None:
    """``generationConfig.thinkingConfig`` for a level (``None`` / ``off``: thinking off, the
    lowest the model allows, thoughts hidden); ``None`` for a model that does not think."""
    if not model.reasoning:
        return None
    level = effective_thinking_level(model, requested)
    model_id = model.id
    if requested is None or level == "off":
        if _gemini3_pro(model_id):
            return {"thinkingLevel": "LOW"}  # Gemini 3 Pro cannot switch thinking off
        if _gemini3_flash(model_id) or _gemma4(model_id):
            return {"thinkingLevel": "MINIMAL"}
        return {"thinkingBudget": 0}
    effort = "high" if level == "xhigh" else level
    if _gemini3_pro(model_id) or _gemini3_flash(model_id) or _gemma4(model_id):
        if _gemini3_pro(model_id):
            name = "LOW" if effort in ("minimal", "low") else "HIGH"
        elif _gemma4(model_id):
            name = "MINIMAL" if effort in ("minimal", "low") else "HIGH"
        else:
            name = effort.upper()
        return {"includeThoughts": True, "thinkingLevel": name}
    if budgets and effort in budgets:
        budget = budgets[effort]
    else:
        table = next((t for key, t in _BUDGETS.items() if key in model_id), None)
        budget = table[effort] if table else -1  # -1: the model chooses (dynamic thinking)
    return {"includeThoughts": True, "thinkingBudget": budget}


def build_body(
    model: Model, context: LlmContext, options: StreamOptions, settings: ProviderSettings
) -> dict[str, Any]:
    """The JSON body of one streamed request (pure)."""
    body: dict[str, Any] = {"contents": build_contents(model, context)}
    if context.system_prompt:
        body["systemInstruction"] = {"parts": [{"text": context.system_prompt}], "role": "user"}
    if context.tools:
        strict = strict_tools_supported(model.id)
        body["tools"] = function_declarations(context, strict_supported=strict)
        config = tool_config(context, strict)
        if config is not None:
            body["toolConfig"] = config
    generation: dict[str, Any] = {}
    limit = output_limit(model, options)
    if limit is not None:
        generation["maxOutputTokens"] = limit
    thinking = thinking_config(model, options.reasoning, settings.thinking_budgets)
    if thinking is not None:
        generation["thinkingConfig"] = thinking
    if generation:
        body["generationConfig"] = generation
    return body


def stream_path(model: Model) -> str:
    """The path of the streaming method under the base URL."""
    return f"models/{model.id}:streamGenerateContent?alt=sse"


def build_request(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    api_key: str | None,
    headers: Mapping[str, str],
    settings: ProviderSettings,
) -> HttpRequest:
    """The HTTP request of one streamed response (pure)."""
    request_headers = {"content-type": "application/json"}
    if api_key:
        request_headers["x-goog-api-key"] = api_key
    request_headers.update({name.lower(): value for name, value in headers.items()})
    return HttpRequest(
        url=join_url(model.base_url, stream_path(model)),
        headers=request_headers,
        body=encode_json_pieces(build_body(model, context, options, settings)),
    )


# -- the parser ------------------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class GoogleParser(SseParser):
    """``GenerateContentResponse`` events in, assistant stream events out (sans-IO)."""

    api_label = API

    def __init__(self, model: Model) -> None:
        super().__init__(model)
        self._open: tuple[int, str] | None = None  # (content index, "text" | "thinking")
        self._signature: str | None = None  # of the open block
        self._finish: str | None = None
        self._ids: set[str] = set()

    def on_event(self, event: str, data: str) -> list[AssistantMessageEvent]:
        """Events for one response chunk."""
        chunk = self.json(data, event)
        if not isinstance(chunk, dict):
            raise MalformedStreamError(f"expected a JSON object in a {event!r} event")
        out: list[AssistantMessageEvent] = []
        error = chunk.get("error")
        if isinstance(error, dict):
            text = f"got status: {error.get('status')}. {orjson.dumps(chunk).decode()}"
            return [self.fail(text, name="StreamError", code=str(error.get("status")))]
        self.ensure_started(out)
        if isinstance(chunk.get("responseId"), str) and self.builder.response_id is None:
            self.builder.set_response_id(chunk["responseId"])
        candidates = chunk.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if isinstance(candidate, dict):
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict):
                    self._part(part, out)
            if isinstance(candidate.get("finishReason"), str):
                self._finish = candidate["finishReason"]
                self.builder.set_raw_stop_reason(self._finish)
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self._usage(usage)
        return out

    def on_end(self) -> list[AssistantMessageEvent]:
        """The body ended: the response is complete (the API sends no end marker)."""
        out: list[AssistantMessageEvent] = []
        self.ensure_started(out)
        self.close_open_blocks(out)
        has_calls = any(block.type == "toolCall" for block in self.builder.partial.content)
        finish = self._finish or "STOP"
        if has_calls:
            out.append(self.builder.done("toolUse"))
        elif finish == "STOP":
            out.append(self.builder.done("stop"))
        elif finish == "MAX_TOKENS":
            out.append(self.builder.done("length"))
        else:
            out.append(self.fail(UNKNOWN_ERROR, name="StreamError", code=finish))
        return out

    def close_block(self, index: int) -> AssistantMessageEvent:
        """End event of the open text or thinking block (with its signature)."""
        assert self._open is not None and self._open[0] == index
        kind, signature = self._open[1], self._signature
        self._open, self._signature = None, None
        if kind == "text":
            return self.builder.text_end(index, signature=signature)
        return self.builder.thinking_end(index, signature=signature)

    def _close_open(self, out: list[AssistantMessageEvent]) -> None:
        if self._open is not None:
            out.append(self.close_block(self._open[0]))

    def _part(self, part: dict[str, Any], out: list[AssistantMessageEvent]) -> None:
        signature = part.get("thoughtSignature")
        signature = signature if isinstance(signature, str) and signature else None
        text = part.get("text")
        if isinstance(text, str):
            kind = "thinking" if part.get("thought") is True else "text"
            if self._open is None or self._open[1] != kind:
                self._close_open(out)
                start = (
                    self.builder.text_start() if kind == "text" else (self.builder.thinking_start())
                )
                self._open = (start.content_index, kind)
                out.append(start)
            index = self._open[0]
            # Keep the last signature given: later deltas of one block may omit it.
            self._signature = signature or self._signature
            if kind == "text":
                out.append(self.builder.text_delta(text, index))
            else:
                out.append(self.builder.thinking_delta(text, index))
        call = part.get("functionCall")
        if isinstance(call, dict):
            self._close_open(out)
            raw_name = call.get("name")
            name = raw_name if isinstance(raw_name, str) else ""
            given = call.get("id")
            if isinstance(given, str) and given and given not in self._ids:
                call_id = given
            else:
                call_id = f"{name}_{int(time.time() * 1000)}_{next(_call_numbers)}"
            self._ids.add(call_id)
            args = call.get("args") if isinstance(call.get("args"), dict) else {}
            start_event = self.builder.toolcall_start(call_id, name, thought_signature=signature)
            out.append(start_event)
            index = start_event.content_index
            out.append(self.builder.toolcall_delta(orjson.dumps(args).decode(), index))
            out.append(self.builder.toolcall_end(index, arguments=args))

    def _usage(self, usage: dict[str, Any]) -> None:
        cached = _int(usage.get("cachedContentTokenCount"))
        made = make_usage(
            input=_int(usage.get("promptTokenCount")) - cached,
            output=_int(usage.get("candidatesTokenCount")) + _int(usage.get("thoughtsTokenCount")),
            cache_read=cached,
            reasoning=_int(usage.get("thoughtsTokenCount")),
            model=self.model,
        )
        # pi reports the vendor's total (it counts tool-use prompt tokens too).
        self.builder.set_usage(attrs.evolve(made, total_tokens=_int(usage.get("totalTokenCount"))))


class GoogleProvider(HttpProvider):
    """The ``google-generative-ai`` StreamFn (:meth:`stream`) over the shared pool."""

    api_label = API
    accept = "*/*"  # what pi's Google client (fetch) sends, streaming or not

    def retry_policy(self) -> RetryPolicy:
        """No quiet repeats: pi's Google SDK makes one request (a failure goes to auto-retry)."""
        return attrs.evolve(self.pool.settings.retry_policy(), max_retries=0)

    error_style = "google"

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
            model, context, options, api_key=api_key, headers=headers, settings=self.settings
        )

    def new_parser(self, model: Model) -> GoogleParser:
        """A parser for one response of ``model``."""
        return GoogleParser(model)
