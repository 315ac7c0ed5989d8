"""How far an OpenAI-compatible server follows OpenAI's Chat Completions (pi's ``compat``
flags): the defaults detected from the provider and base URL, the model's own overrides, and
the tool-call id form a server accepts (pure)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal
from urllib.parse import urlparse

import attrs

from pitrio._prefix_chat import ChatFacts
from pitrio.actors.model_router.providers.convert import short_hash
from pitrio.messages.model import Model

ThinkingFormat = str
"""pi 1.6.0's ``thinkingFormat``: ``openai``, ``openrouter``, ``deepseek``, ``together``,
``baseten``, ``zai``, ``qwen``, ``chat-template``, ``qwen-chat-template``, ``ant-ling``,
``string-thinking`` (see :mod:`.openai_thinking`); another value is treated as ``openai``."""


@attrs.frozen(kw_only=True)
class OpenAICompat:
    """How far a server follows OpenAI's Chat Completions (pi's ``compat`` flags)."""

    supports_store: bool = False
    supports_developer_role: bool = False
    supports_reasoning_effort: bool = True
    supports_usage_in_streaming: bool = True
    supports_strict_mode: bool = False
    max_tokens_field: Literal["max_completion_tokens", "max_tokens"] = "max_tokens"
    requires_tool_result_name: bool = False
    requires_assistant_after_tool_result: bool = False
    requires_thinking_as_text: bool = False
    requires_mistral_tool_ids: bool = False
    thinking_format: ThinkingFormat = "openai"
    reasoning_effort_map: dict[str, str] = attrs.field(factory=dict)
    open_router_routing: dict[str, Any] | None = None
    vercel_gateway_routing: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] = attrs.field(factory=dict)
    chat_template_args: dict[str, Any] = attrs.field(factory=dict)
    zai_tool_stream: bool = False
    vllm_priority: Any = None
    requires_tools_with_tool_history: bool = False
    supports_thinking_token_budget: bool = False
    thinking_token_budget_field: str | None = None


_COMPAT_KEYS = {
    "supportsStore": "supports_store",
    "supportsDeveloperRole": "supports_developer_role",
    "supportsReasoningEffort": "supports_reasoning_effort",
    "supportsUsageInStreaming": "supports_usage_in_streaming",
    "supportsStrictMode": "supports_strict_mode",
    "maxTokensField": "max_tokens_field",
    "requiresToolResultName": "requires_tool_result_name",
    "requiresAssistantAfterToolResult": "requires_assistant_after_tool_result",
    "requiresThinkingAsText": "requires_thinking_as_text",
    "requiresMistralToolIds": "requires_mistral_tool_ids",
    "thinkingFormat": "thinking_format",
    "reasoningEffortMap": "reasoning_effort_map",
    "openRouterRouting": "open_router_routing",
    "vercelGatewayRouting": "vercel_gateway_routing",
    "chatTemplateKwargs": "chat_template_kwargs",
    "chatTemplateArgs": "chat_template_args",
    "zaiToolStream": "zai_tool_stream",
    "vllmPriority": "vllm_priority",
    "requiresToolsWithToolHistory": "requires_tools_with_tool_history",
    "supportsThinkingTokenBudget": "supports_thinking_token_budget",
    "thinkingTokenBudgetField": "thinking_token_budget_field",
}


def detect_compat(model: Model) -> OpenAICompat:
    """The compat flags of ``model``: defaults for its server, then its own ``compat``.

    Only OpenAI itself gets ``store``, the ``developer`` role and ``max_completion_tokens``;
    ``strict`` tools only where the model's ``compat.supportsStrictMode`` says so (pi 1.6.0:
    compatibility with OpenAI's API does not imply strict tools, not even at OpenAI's own);
    other servers get the forms every compatible server understands (``system``,
    ``max_tokens``). Mistral, OpenRouter and Z.ai get their known differences.
    """
    host = (urlparse(model.base_url).hostname or "").lower()

    def on(name: str, domain: str) -> bool:
        return model.provider == name or host == domain or host.endswith("." + domain)

    flags: dict[str, Any] = {}
    if on("openai", "openai.com"):
        flags.update(
            supports_store=True,
            supports_developer_role=True,
            max_tokens_field="max_completion_tokens",
        )
    # pi 1.6.0's detected thinking formats, and the hosts that take no reasoning_effort.
    zai = on("zai", "z.ai") or on("zai", "bigmodel.cn")
    together = on("together", "together.ai") or on("together", "together.xyz")
    ant_ling = on("ant-ling", "ant-ling.com")
    if on("openrouter", "openrouter.ai"):
        flags["thinking_format"] = "openrouter"
    if ant_ling:
        flags["thinking_format"] = "ant-ling"
    if together:
        flags["thinking_format"] = "together"
    if zai:
        flags["thinking_format"] = "zai"
    if on("deepseek", "deepseek.com"):
        flags["thinking_format"] = "deepseek"
    if (
        zai
        or together
        or ant_ling
        or on("xai", "x.ai")
        or on("moonshotai", "moonshot.ai")
        or on("moonshotai-cn", "moonshot.cn")
        or on("nvidia", "integrate.api.nvidia.com")
        or on("cloudflare-ai-gateway", "gateway.ai.cloudflare.com")
    ):
        flags["supports_reasoning_effort"] = False
    if on("mistral", "mistral.ai"):
        flags.update(
            requires_tool_result_name=True,
            requires_thinking_as_text=True,
            requires_mistral_tool_ids=True,
        )
    if isinstance(model.compat, Mapping):
        for key, value in model.compat.items():
            attribute = _COMPAT_KEYS.get(key)
            if attribute is not None:
                flags[attribute] = value
    return OpenAICompat(**flags)


_LAST: list[tuple[Model, OpenAICompat]] = []
"""The model :func:`compat_of` was last asked about, and its flags (one entry)."""


def compat_of(model: Model) -> OpenAICompat:
    """:func:`detect_compat` of ``model``, kept for the model object last asked about.

    A session asks at every request, with the same model object until it changes model; the
    URL parse and the flags took ~30 us of each turn (issue 38). Kept by identity: a model
    is frozen (its ``compat`` mapping is read, never changed), so the same object has the
    same flags; another object, even an equal one, is detected afresh. The flags are frozen
    too, so handing the same ones out again is safe.
    """
    last = _LAST
    if last and last[0][0] is model:
        return last[0][1]
    compat = detect_compat(model)
    last[:] = [(model, compat)]
    return compat


def normalize_tool_id(compat: OpenAICompat) -> Callable[[str], str]:
    """The tool-call id rewrite for a server: Mistral wants 9 alphanumerics, OpenAI <= 40."""

    def normalize(value: str) -> str:
        if compat.requires_mistral_tool_ids:
            if len(value) == 9 and value.isalnum():
                return value
            return short_hash(value, 9)
        # Responses-API ids are "<call id>|<item id>": the call id is the tool-call id.
        call_id = value.split("|", 1)[0] or value
        if len(call_id) > 40:
            return "call_" + short_hash(call_id, 24)
        return call_id

    return normalize


def facts_of(model: Model, compat: OpenAICompat, *, block_images: bool = False) -> ChatFacts:
    """What converting a transcript for ``model`` reads of it, its server's ``compat`` and
    the session's ``images.blockImages``, as the plain value :mod:`pitrio._prefix_chat` takes."""
    return ChatFacts(
        provider=model.provider,
        api=model.api,
        model_id=model.id,
        images="image" in model.input,
        thinking_as_text=bool(compat.requires_thinking_as_text),
        tool_result_name=bool(compat.requires_tool_result_name),
        assistant_after_tool_result=bool(compat.requires_assistant_after_tool_result),
        mistral_tool_ids=bool(compat.requires_mistral_tool_ids),
        block_images=block_images,
    )


__all__ = [
    "OpenAICompat",
    "ThinkingFormat",
    "compat_of",
    "detect_compat",
    "facts_of",
    "normalize_tool_id",
]
