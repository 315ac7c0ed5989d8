"""The built-in model catalogue: the main providers and a representative current set of models.

Pure data. Every model carries what pi's model descriptor carries (spec §1.8): id, display
name, API, base URL, context window, output limit, prices in USD per million tokens,
reasoning support and input modalities; ``thinking_level_map`` names the vendor's value for a
level (or ``None`` where the model lacks it), ``compat`` holds OpenAI-compatibility flags.

Prices and limits are the vendors' published list figures at the time of writing; they go
stale, so ``models.json`` can override any of them (``modelOverrides``) or add models.
Google's models are served through its OpenAI-compatible endpoint (``openai-completions``),
because pitrio has no native ``google-generative-ai`` adapter yet.
"""

from __future__ import annotations

from typing import Any

from pitrio.messages.model import Model, ModelCost

OPENAI_COMPLETIONS = "openai-completions"
OPENAI_RESPONSES = "openai-responses"
ANTHROPIC_MESSAGES = "anthropic-messages"
VIRTUAL_API = "pi-virtual"
"""The API of a virtual model: resolved to a physical model before every request."""

PROVIDER_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "google": "https://generativelanguage.googleapis.com/v1beta/openai",
    "openrouter": "https://openrouter.ai/api/v1",
    "groq": "https://api.groq.com/openai/v1",
    "xai": "https://api.x.ai/v1",
    "mistral": "https://api.mistral.ai/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "cerebras": "https://api.cerebras.ai/v1",
}
"""Base URL of each built-in provider."""

PROVIDER_APIS: dict[str, str] = {
    "openai": OPENAI_RESPONSES,
    "anthropic": ANTHROPIC_MESSAGES,
    "google": OPENAI_COMPLETIONS,
    "openrouter": OPENAI_COMPLETIONS,
    "groq": OPENAI_COMPLETIONS,
    "xai": OPENAI_COMPLETIONS,
    "mistral": OPENAI_COMPLETIONS,
    "deepseek": OPENAI_COMPLETIONS,
    "cerebras": OPENAI_COMPLETIONS,
}
"""The API each built-in provider speaks."""

PROVIDER_ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "zai": ("ZAI_API_KEY",),
    "vercel-ai-gateway": ("AI_GATEWAY_API_KEY",),
    "huggingface": ("HF_TOKEN",),
}
"""Environment variables holding each provider's key, first found wins (pi's names)."""

_TEXT: tuple[Any, ...] = ("text",)
_IMAGE: tuple[Any, ...] = ("text", "image")


def _model(
    provider: str,
    id: str,
    name: str,
    *,
    context: int,
    max_out: int,
    cost: tuple[float, float, float, float],
    reasoning: bool = False,
    image: bool = False,
    levels: dict[str, str | None] | None = None,
    compat: dict[str, Any] | None = None,
) -> Model:
    input_price, output_price, cache_read, cache_write = cost
    return Model(
        id=id,
        name=name,
        api=PROVIDER_APIS[provider],
        provider=provider,
        base_url=PROVIDER_BASE_URLS[provider],
        reasoning=reasoning,
        thinking_level_map=levels,
        input=_IMAGE if image else _TEXT,
        cost=ModelCost(
            input=input_price, output=output_price, cache_read=cache_read, cache_write=cache_write
        ),
        context_window=context,
        max_tokens=max_out,
        compat=compat,
    )


# Levels the vendors lack: clamping (spec §3.10) moves a request to the nearest level they have.
_NO_MINIMAL: dict[str, str | None] = {"minimal": None}
_GPT5_1: dict[str, str | None] = {"off": "none"}
_GEMINI_PRO: dict[str, str | None] = {"minimal": "low"}
_GEMINI_FLASH: dict[str, str | None] = {"off": "none", "minimal": "low"}
_LOW_HIGH_ONLY: dict[str, str | None] = {"minimal": None, "medium": None}
_QWEN3: dict[str, str | None] = {
    "off": "none",
    "minimal": None,
    "low": None,
    "medium": "default",
    "high": None,
}
_NO_EFFORT: dict[str, Any] = {"supportsReasoningEffort": False}

CATALOGUE: tuple[Model, ...] = (
    # -- OpenAI (Responses API) ------------------------------------------------------------
    _model("openai", "gpt-5.1", "GPT-5.1", context=400000, max_out=128000,
           cost=(1.25, 10, 0.125, 0), reasoning=True, image=True, levels=_GPT5_1),
    _model("openai", "gpt-5", "GPT-5", context=400000, max_out=128000,
           cost=(1.25, 10, 0.125, 0), reasoning=True, image=True),
    _model("openai", "gpt-5-mini", "GPT-5 Mini", context=400000, max_out=128000,
           cost=(0.25, 2, 0.025, 0), reasoning=True, image=True),
    _model("openai", "gpt-5-nano", "GPT-5 Nano", context=400000, max_out=128000,
           cost=(0.05, 0.4, 0.005, 0), reasoning=True, image=True),
    _model("openai", "o3", "o3", context=200000, max_out=100000,
           cost=(2, 8, 0.5, 0), reasoning=True, image=True, levels=_NO_MINIMAL),
    _model("openai", "o4-mini", "o4-mini", context=200000, max_out=100000,
           cost=(1.1, 4.4, 0.275, 0), reasoning=True, image=True, levels=_NO_MINIMAL),
    _model("openai", "gpt-4.1", "GPT-4.1", context=1047576, max_out=32768,
           cost=(2, 8, 0.5, 0), image=True),
    _model("openai", "gpt-4.1-mini", "GPT-4.1 Mini", context=1047576, max_out=32768,
           cost=(0.4, 1.6, 0.1, 0), image=True),
    _model("openai", "gpt-4o", "GPT-4o", context=128000, max_out=16384,
           cost=(2.5, 10, 1.25, 0), image=True),
    _model("openai", "gpt-4o-mini", "GPT-4o Mini", context=128000, max_out=16384,
           cost=(0.15, 0.6, 0.075, 0), image=True),
    # -- Anthropic (Messages API; token-budget thinking) ----------------------------------
    _model("anthropic", "claude-opus-4-5", "Claude Opus 4.5", context=200000, max_out=64000,
           cost=(5, 25, 0.5, 6.25), reasoning=True, image=True),
    _model("anthropic", "claude-opus-4-1", "Claude Opus 4.1", context=200000, max_out=32000,
           cost=(15, 75, 1.5, 18.75), reasoning=True, image=True),
    _model("anthropic", "claude-sonnet-4-5", "Claude Sonnet 4.5", context=200000,
           max_out=64000, cost=(3, 15, 0.3, 3.75), reasoning=True, image=True),
    _model("anthropic", "claude-sonnet-4-0", "Claude Sonnet 4", context=200000, max_out=64000,
           cost=(3, 15, 0.3, 3.75), reasoning=True, image=True),
    _model("anthropic", "claude-haiku-4-5", "Claude Haiku 4.5", context=200000, max_out=64000,
           cost=(1, 5, 0.1, 1.25), reasoning=True, image=True),
    _model("anthropic", "claude-3-5-haiku-latest", "Claude Haiku 3.5", context=200000,
           max_out=8192, cost=(0.8, 4, 0.08, 1), image=True),
    # -- Google (OpenAI-compatible endpoint) -----------------------------------------------
    _model("google", "gemini-2.5-pro", "Gemini 2.5 Pro", context=1048576, max_out=65536,
           cost=(1.25, 10, 0.31, 0), reasoning=True, image=True, levels=_GEMINI_PRO),
    _model("google", "gemini-2.5-flash", "Gemini 2.5 Flash", context=1048576, max_out=65536,
           cost=(0.3, 2.5, 0.075, 0), reasoning=True, image=True, levels=_GEMINI_FLASH),
    _model("google", "gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", context=1048576,
           max_out=65536, cost=(0.1, 0.4, 0.025, 0), reasoning=True, image=True,
           levels=_GEMINI_FLASH),
    _model("google", "gemini-2.0-flash", "Gemini 2.0 Flash", context=1048576, max_out=8192,
           cost=(0.1, 0.4, 0.025, 0), image=True),
    # -- OpenRouter ------------------------------------------------------------------------
    _model("openrouter", "anthropic/claude-sonnet-4.5", "Claude Sonnet 4.5 (OpenRouter)",
           context=1000000, max_out=64000, cost=(3, 15, 0.3, 3.75), reasoning=True, image=True),
    _model("openrouter", "anthropic/claude-haiku-4.5", "Claude Haiku 4.5 (OpenRouter)",
           context=200000, max_out=64000, cost=(1, 5, 0.1, 1.25), reasoning=True, image=True),
    _model("openrouter", "openai/gpt-5", "GPT-5 (OpenRouter)", context=400000,
           max_out=128000, cost=(1.25, 10, 0.125, 0), reasoning=True, image=True),
    _model("openrouter", "openai/gpt-5-mini", "GPT-5 Mini (OpenRouter)", context=400000,
           max_out=128000, cost=(0.25, 2, 0.025, 0), reasoning=True, image=True),
    _model("openrouter", "google/gemini-2.5-pro", "Gemini 2.5 Pro (OpenRouter)",
           context=1048576, max_out=65536, cost=(1.25, 10, 0.31, 0), reasoning=True,
           image=True),
    _model("openrouter", "google/gemini-2.5-flash", "Gemini 2.5 Flash (OpenRouter)",
           context=1048576, max_out=65536, cost=(0.3, 2.5, 0.075, 0), reasoning=True,
           image=True),
    _model("openrouter", "x-ai/grok-4", "Grok 4 (OpenRouter)", context=256000, max_out=64000,
           cost=(3, 15, 0.75, 0), reasoning=True, image=True),
    # -- Groq ------------------------------------------------------------------------------
    _model("groq", "openai/gpt-oss-120b", "GPT OSS 120B (Groq)", context=131072,
           max_out=65536, cost=(0.15, 0.75, 0, 0), reasoning=True, levels=_NO_MINIMAL),
    _model("groq", "openai/gpt-oss-20b", "GPT OSS 20B (Groq)", context=131072,
           max_out=65536, cost=(0.1, 0.5, 0, 0), reasoning=True, levels=_NO_MINIMAL),
    _model("groq", "llama-3.3-70b-versatile", "Llama 3.3 70B Versatile", context=131072,
           max_out=32768, cost=(0.59, 0.79, 0, 0)),
    _model("groq", "llama-3.1-8b-instant", "Llama 3.1 8B Instant", context=131072,
           max_out=131072, cost=(0.05, 0.08, 0, 0)),
    _model("groq", "moonshotai/kimi-k2-instruct-0905", "Kimi K2 Instruct (Groq)",
           context=262144, max_out=16384, cost=(1, 3, 0.5, 0)),
    _model("groq", "qwen/qwen3-32b", "Qwen3 32B (Groq)", context=131072, max_out=40960,
           cost=(0.29, 0.59, 0, 0), reasoning=True, levels=_QWEN3),
    # -- xAI -------------------------------------------------------------------------------
    _model("xai", "grok-4", "Grok 4", context=256000, max_out=64000, cost=(3, 15, 0.75, 0),
           reasoning=True, image=True, compat=_NO_EFFORT),
    _model("xai", "grok-4-fast", "Grok 4 Fast", context=2000000, max_out=30000,
           cost=(0.2, 0.5, 0.05, 0), reasoning=True, image=True, compat=_NO_EFFORT),
    _model("xai", "grok-code-fast-1", "Grok Code Fast 1", context=256000, max_out=10000,
           cost=(0.2, 1.5, 0.02, 0), reasoning=True, compat=_NO_EFFORT),
    _model("xai", "grok-3-mini", "Grok 3 Mini", context=131072, max_out=8192,
           cost=(0.3, 0.5, 0.075, 0), reasoning=True, levels=_LOW_HIGH_ONLY),
    _model("xai", "grok-3", "Grok 3", context=131072, max_out=8192, cost=(3, 15, 0.75, 0)),
    # -- Mistral ---------------------------------------------------------------------------
    _model("mistral", "mistral-medium-latest", "Mistral Medium", context=131072,
           max_out=16384, cost=(0.4, 2, 0, 0), image=True),
    _model("mistral", "mistral-small-latest", "Mistral Small", context=131072,
           max_out=16384, cost=(0.1, 0.3, 0, 0), image=True),
    _model("mistral", "devstral-medium-latest", "Devstral Medium", context=131072,
           max_out=16384, cost=(0.4, 2, 0, 0)),
    _model("mistral", "codestral-latest", "Codestral", context=256000, max_out=16384,
           cost=(0.3, 0.9, 0, 0)),
    _model("mistral", "magistral-medium-latest", "Magistral Medium", context=131072,
           max_out=40000, cost=(2, 5, 0, 0), reasoning=True, compat=_NO_EFFORT),
    # -- DeepSeek --------------------------------------------------------------------------
    _model("deepseek", "deepseek-chat", "DeepSeek Chat", context=128000, max_out=8192,
           cost=(0.28, 0.42, 0.028, 0)),
    _model("deepseek", "deepseek-reasoner", "DeepSeek Reasoner", context=128000,
           max_out=64000, cost=(0.28, 0.42, 0.028, 0), reasoning=True, compat=_NO_EFFORT),
    # -- Cerebras --------------------------------------------------------------------------
    _model("cerebras", "gpt-oss-120b", "GPT OSS 120B (Cerebras)", context=131072,
           max_out=32768, cost=(0.35, 0.75, 0, 0), reasoning=True, levels=_NO_MINIMAL),
    _model("cerebras", "qwen-3-235b-a22b-instruct-2507", "Qwen 3 235B Instruct (Cerebras)",
           context=131072, max_out=32768, cost=(0.6, 1.2, 0, 0)),
    _model("cerebras", "qwen-3-coder-480b", "Qwen 3 Coder 480B (Cerebras)", context=131072,
           max_out=32768, cost=(2, 2, 0, 0)),
    _model("cerebras", "llama-3.3-70b", "Llama 3.3 70B (Cerebras)", context=65536,
           max_out=8192, cost=(0.85, 1.2, 0, 0)),
)  # fmt: skip
"""Every built-in model, grouped by provider."""

BUILTIN_PROVIDERS: tuple[str, ...] = tuple(dict.fromkeys(model.provider for model in CATALOGUE))
"""The providers of the catalogue, in catalogue order."""
