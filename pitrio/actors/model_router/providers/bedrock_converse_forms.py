"""The ``bedrock-converse-stream`` request: Converse messages, the body and the URL (pure).

:mod:`.bedrock_converse_stream` sends what this builds (after :mod:`.bedrock_aws` signs it) and
parses the answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import orjson

from pitrio.actors.model_router.providers import bedrock_aws
from pitrio.actors.model_router.providers.base import (
    ProviderSettings,
    output_limit,
    request_settings,
)
from pitrio.actors.model_router.providers.convert import TranscriptPreparer
from pitrio.actors.model_router.providers.http import HttpRequest, join_url
from pitrio.actors.model_router.providers.strict_tools import (
    resolve_strict,
    supports_strict_mode,
    tool_parameters,
)
from pitrio.actors.model_router.thinking import fit_thinking_budget, thinking_budget
from pitrio.messages.agent import AssistantMessage, ToolResultMessage, UserMessage
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent
from pitrio.messages.model import LlmContext, Model, StreamOptions

API = "bedrock-converse-stream"
INTERLEAVED_BETA = "interleaved-thinking-2025-05-14"

"""pi's readable prefixes of Bedrock's exception names (its retry rules match them)."""

_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")
_IMAGE_FORMATS = {
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/png": "png",
    "image/gif": "gif",
    "image/webp": "webp",
}


def normalize_tool_id(value: str) -> str:
    """A tool-use id Bedrock accepts: ``[a-zA-Z0-9_-]``, at most 64 characters."""
    return _ID_INVALID.sub("_", value)[:64]


def _candidates(model: Model) -> list[str]:
    values = [model.id, model.name] if model.name else [model.id]
    out: list[str] = []
    for value in values:
        lower = value.lower()
        out += [lower, re.sub(r"[\s_.:]+", "-", lower)]
    return out


def is_claude(model: Model) -> bool:
    """Whether ``model`` is an Anthropic Claude model (by id, or by name for profiles)."""
    ident, name = model.id.lower(), (model.name or "").lower()
    return any(m in ident for m in ("anthropic.claude", "anthropic/claude")) or "claude" in name


def adaptive_thinking(model: Model) -> bool:
    """Claude models that take ``thinking: {type: adaptive}`` and an effort (Opus 4.6+)."""
    return any(
        key in value
        for value in _candidates(model)
        for key in ("opus-4-6", "opus-4-7", "sonnet-4-6")
    )


def supports_caching(model: Model, env: Mapping[str, str]) -> bool:
    """Whether cache points are sent: Claude 4.x, 3.7 Sonnet, 3.5 Haiku, or forced by
    ``AWS_BEDROCK_FORCE_CACHE=1`` (application inference profiles hide the model name)."""
    candidates = _candidates(model)
    if not any("claude" in value for value in candidates):
        return env.get("AWS_BEDROCK_FORCE_CACHE") == "1"
    keys = ("-4-", "claude-3-7-sonnet", "claude-3-5-haiku")
    return any(key in value for value in candidates for key in keys)


def _image(block: ImageContent) -> dict[str, Any]:
    image_format = _IMAGE_FORMATS.get(block.mime_type)
    if image_format is None:
        raise ValueError(f"Unknown image type: {block.mime_type}")
    # Blobs travel base64-encoded in the JSON protocol: the image data is already that.
    return {"image": {"format": image_format, "source": {"bytes": block.data}}}


def _user_blocks(content: str | tuple[TextContent | ImageContent, ...]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}]
    return [
        {"text": block.text} if isinstance(block, TextContent) else _image(block)
        for block in content
    ]


def _assistant_blocks(model: Model, message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"text": block.text})
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if not is_claude(model):
                blocks.append({"reasoningContent": {"reasoningText": {"text": block.thinking}}})
            elif block.thinking_signature and block.thinking_signature.strip():
                text = {"text": block.thinking, "signature": block.thinking_signature}
                blocks.append({"reasoningContent": {"reasoningText": text}})
            else:  # Bedrock rejects unsigned Claude reasoning: keep it as text
                blocks.append({"text": block.thinking})
        else:
            use = {"toolUseId": block.id, "name": block.name, "input": block.arguments}
            blocks.append({"toolUse": use})
    return blocks


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    return {
        "toolResult": {
            "toolUseId": message.tool_call_id,
            "content": _user_blocks(message.content),
            "status": "error" if message.is_error else "success",
        }
    }


def _cache_point(settings: ProviderSettings) -> dict[str, Any]:
    point: dict[str, Any] = {"type": "default"}
    if settings.cache_retention == "long":
        point["ttl"] = "1h"
    return {"cachePoint": point}


def build_messages(
    model: Model, context: LlmContext, cache: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """``context``'s messages as Converse turns (consecutive tool results in one user turn);
    ``cache`` (a cache point) ends the last turn when it is a user turn."""
    preparer = TranscriptPreparer(model, normalize_tool_id)
    prepared = [out for message in context.messages for out in preparer.feed(message)]
    prepared += preparer.finish()
    turns: list[dict[str, Any]] = []
    grouping = False
    for message in prepared:
        if isinstance(message, ToolResultMessage):
            if grouping:
                turns[-1]["content"].append(_tool_result(message))
            else:
                turns.append({"role": "user", "content": [_tool_result(message)]})
                grouping = True
            continue
        grouping = False
        if isinstance(message, UserMessage):
            turns.append({"role": "user", "content": _user_blocks(message.content)})
        elif isinstance(message, AssistantMessage):
            blocks = _assistant_blocks(model, message)
            if blocks:
                turns.append({"role": "assistant", "content": blocks})
    if cache is not None and turns and turns[-1]["role"] == "user":
        turns[-1]["content"].append(cache)
    return turns


def _effort(model: Model, level: str) -> str:
    if level == "xhigh" and any("opus-4-7" in value for value in _candidates(model)):
        return "xhigh"
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str):
        return mapped
    return {"minimal": "low", "low": "low", "medium": "medium"}.get(level, "high")


def build_body(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    settings: ProviderSettings,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The JSON body of one ConverseStream request (pure)."""
    env = env or {}
    settings = request_settings(settings, options)
    caching = settings.cache_retention != "none" and supports_caching(model, env)
    cache = _cache_point(settings) if caching else None
    body: dict[str, Any] = {"messages": build_messages(model, context, cache)}
    if context.system_prompt:
        body["system"] = [{"text": context.system_prompt}] + ([cache] if cache else [])
    inference: dict[str, Any] = {}
    max_tokens = output_limit(model, options)
    extra: dict[str, Any] | None = None
    if options.reasoning and model.reasoning and is_claude(model):
        display = None if _gov_cloud(model, env) else "summarized"
        shown = {"display": display} if display else {}
        if adaptive_thinking(model):
            extra = {
                "thinking": {"type": "adaptive", **shown},
                "output_config": {"effort": _effort(model, options.reasoning)},
            }
        else:
            level = "high" if options.reasoning == "xhigh" else options.reasoning
            budget = thinking_budget(model, level, settings.thinking_budgets)
            if budget is not None:
                max_tokens, budget = fit_thinking_budget(max_tokens or 0, model.max_tokens, budget)
                thinking = {"type": "enabled", "budget_tokens": budget, **shown}
                extra = {"thinking": thinking, "anthropic_beta": [INTERLEAVED_BETA]}
    if max_tokens:
        inference["maxTokens"] = max_tokens
    body["inferenceConfig"] = inference
    if context.tools:
        # Strict tools only where the model's compat opts in (the catalogue's Claude models).
        supported = supports_strict_mode(model, False)
        tools = []
        for tool in context.tools:
            strict = resolve_strict(tool, supported)
            spec: dict[str, Any] = {  # the AWS SDK's member order, as pi's requests have it
                "name": tool.name,
                "inputSchema": {"json": tool_parameters(tool, strict)},
                "description": tool.description,
            }
            if strict:
                spec["strict"] = True
            tools.append({"toolSpec": spec})
        body["toolConfig"] = {"tools": tools}
    if extra is not None:
        body["additionalModelRequestFields"] = extra
    return body


def _gov_cloud(model: Model, env: Mapping[str, str]) -> bool:
    region = bedrock_aws.configured_region(env) or ""
    ident = model.id.lower()
    return region.lower().startswith("us-gov-") or ident.startswith(("us-gov.", "arn:aws-us-gov:"))


def request_url(base_url: str, model: Model) -> str:
    """``{base}/model/{modelId}/converse-stream``, the id percent-encoded (ARNs hold ``:``
    and ``/``)."""
    return join_url(base_url, f"model/{quote(model.id, safe='')}/converse-stream")


def build_unsigned(
    model: Model,
    context: LlmContext,
    options: StreamOptions,
    *,
    headers: Mapping[str, str],
    settings: ProviderSettings,
    env: Mapping[str, str] | None = None,
    base_url: str | None = None,
) -> HttpRequest:
    """The request before authorisation (pure); :mod:`.bedrock_aws` signs it."""
    body = orjson.dumps(build_body(model, context, options, settings, env))
    request_headers = {"content-type": "application/json"}
    request_headers.update({name.lower(): value for name, value in headers.items()})
    url = request_url(base_url or model.base_url, model)
    return HttpRequest(url=url, headers=request_headers, body=body)
