"""The router built from an agent dir: models.json, auth.json, patterns, availability, HTTP."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio

from pitrio.actors.model_router import (
    CATALOGUE,
    FAUX_MODELS,
    ModelRouter,
    ModelRouterHandle,
    RouterConfig,
    save_api_key,
    start_model_router,
)
from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.errors import UnknownModelError
from pitrio.messages import TextContent, user_message
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone
from tests.actors.providers.loopback import loopback_server, recording, sse

SETTINGS = ProviderSettings(http=HttpSettings(trust_env=False))


def write_models(agent: Path, document: Any) -> None:
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_bytes(orjson.dumps(document))


def config(agent: Path, env: dict[str, str] | None = None) -> RouterConfig:
    return RouterConfig(agent_dir=agent, env=env or {}, settings=SETTINGS)


async def collect(router: ModelRouterHandle, model: Model) -> list[AssistantMessageEvent]:
    context = LlmContext(system_prompt="s", messages=(user_message("hello", timestamp=1),))
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    async with send:
        await router.stream(model, context, StreamOptions(), send)
    return [event async for event in receive]


def test_registry_order_and_patterns(tmp_path: Path) -> None:
    write_models(
        tmp_path,
        {"providers": {"ollama": {"baseUrl": "http://localhost:11434/v1",
                                  "api": "openai-completions",
                                  "models": [{"id": "llama3.1:8b"}, {"id": "qwen3:high"}]}}},
    )  # fmt: skip
    router = ModelRouter.from_config(config(tmp_path))
    registry = router.registry
    models = registry.list()
    assert models[: len(FAUX_MODELS)] == FAUX_MODELS
    assert models[len(FAUX_MODELS) : len(FAUX_MODELS) + len(CATALOGUE)] == CATALOGUE
    assert registry.resolve_pattern("anthropic/claude-sonnet-4-5:high")[1] == "high"
    assert registry.resolve_pattern("anthropic/claude-sonnet-4-5")[1] is None
    # An id containing a colon wins over a thinking suffix.
    model, level = registry.resolve_pattern("ollama/llama3.1:8b")
    assert (model.id, level) == ("llama3.1:8b", None)
    model, level = registry.resolve_pattern("ollama/qwen3:high")
    assert (model.id, level) == ("qwen3:high", None)
    model, level = registry.resolve_pattern("ollama/llama3.1:8b:low")
    assert (model.id, level) == ("llama3.1:8b", "low")
    # A bare id (unique: pi's catalogue, issue 25, serves gpt-5 through several providers).
    bare = registry.resolve_pattern("anthropic.claude-sonnet-4-6:minimal")[0]
    assert bare.ref == "amazon-bedrock/anthropic.claude-sonnet-4-6"
    with pytest.raises(UnknownModelError, match=r"^Unknown model: openai/gpt-9:high$"):
        registry.resolve_pattern("openai/gpt-9:high")


def test_availability_follows_credentials(tmp_path: Path) -> None:
    write_models(
        tmp_path,
        {"providers": {
            "local": {"baseUrl": "http://localhost:1/v1", "api": "openai-completions",
                      "models": [{"id": "m"}]},
            "keyed": {"baseUrl": "http://localhost:2/v1", "api": "openai-completions",
                      "apiKey": "KEYED_VAR", "models": [{"id": "m"}]},
            "gem": {"baseUrl": "http://localhost:3", "api": "google-generative-ai",
                    "models": [{"id": "m"}]}}},
    )  # fmt: skip
    router = ModelRouter.from_config(config(tmp_path, {"GROQ_API_KEY": "g"}))
    available = {m.provider for m in router.registry.list() if router.availability(m) is None}
    # google-generative-ai has a native adapter now (issue 25): a keyless local entry is usable.
    assert available == {"faux", "groq", "local", "keyed", "gem"}
    anthropic = router.registry.resolve("anthropic/claude-haiku-4-5")
    assert router.availability(anthropic) == "no API key for provider anthropic"
    gem = router.registry.resolve("gem/m")
    assert router.availability(gem) is None
    adapterless = attrs.evolve(gem, api="no-such-api")
    assert router.availability(adapterless) == "no adapter for api no-such-api"


async def test_a_broken_models_json_is_reported_and_builtins_stay(tmp_path: Path) -> None:
    write_models(tmp_path, {"providers": {"ollama": {"api": "openai-completions",
                                                     "models": [{"id": "m"}]}}})  # fmt: skip
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, config=config(tmp_path))
        (problem,) = await router.problems()
        assert problem == (
            f"{tmp_path / 'models.json'}: providers.ollama.baseUrl: "
            "required for a provider with custom models"
        )
        assert (await router.resolve("openai/gpt-5")).provider == "openai"
        with pytest.raises(UnknownModelError) as info:
            await router.resolve("ollama/m")
        assert str(info.value) == f"Unknown model: ollama/m ({problem})"
        await router.aclose()


async def test_refused_auth_file_is_a_problem(tmp_path: Path) -> None:
    save_api_key(tmp_path / "auth.json", "openai", "sk-x")
    (tmp_path / "auth.json").chmod(0o644)
    router = ModelRouter.from_config(config(tmp_path))
    (problem,) = router.problems()
    assert "accessible by group/others" in problem and "chmod 600" in problem


async def test_end_to_end_custom_provider_with_auth_json_key(tmp_path: Path) -> None:
    async with loopback_server() as server, trio.open_nursery() as nursery:
        write_models(
            tmp_path,
            {"providers": {"proxy": {"baseUrl": server.base_url,
                                     "api": "anthropic-messages",
                                     "headers": {"x-team": "$TEAM"},
                                     "models": [{"id": "claude-x", "reasoning": True}]}}},
        )  # fmt: skip
        save_api_key(tmp_path / "auth.json", "proxy", "sk-proxy-secret-42")
        router = await start_model_router(nursery, config=config(tmp_path, {"TEAM": "blue"}))
        model = await router.resolve("proxy/claude-x")
        assert await router.availability(model) is None
        assert model in await router.available_models()
        server.push(sse(recording("anthropic_text.sse"), chunk_size=9))
        events = await collect(router, model)
        done = events[-1]
        assert isinstance(done, StreamDone)
        assert done.message.content == (TextContent(text="Hello, world! Ünïcödé ✓"),)
        assert (done.message.provider, done.message.model) == ("proxy", "claude-x")
        request = server.requests[0]
        # Anthropic base URLs stop before /v1; pi 1.6.0's beta client adds ?beta=true.
        assert request.path == "/v1/messages?beta=true"
        assert request.headers["x-api-key"] == "sk-proxy-secret-42"
        assert request.headers["x-team"] == "blue"
        # The vendor echoing the key back never puts it in a message.
        server.push(
            sse(
                b'event: error\ndata: {"type":"error","error":{"type":"authentication_error",'
                b'"message":"bad key sk-proxy-secret-42"}}\n\n'
            )
        )
        events = await collect(router, model)
        assert events[-1].error.error_message == (  # type: ignore[union-attr]
            # pi's text: the Anthropic SDK shows the whole event as JSON
            '{"type":"error","error":{"type":"authentication_error","message":"bad key ***"}}'
        )
        assert "sk-proxy-secret-42" not in repr(events)  # diagnostics included
        await router.aclose()
    # The pool was closed with the router: a new one would be created on next use.
    assert server.connections == 1


def test_provider_settings_from_pi_settings() -> None:
    from pitrio.actors.model_router.providers.base import provider_settings

    settings = provider_settings(
        {
            "thinkingBudgets": {"low": 3000, "high": "lots"},
            "retry": {"provider": {"timeoutMs": 90000, "maxRetries": 2, "maxRetryDelayMs": 0}},
        }
    )
    assert settings.thinking_budgets == {"low": 3000}
    assert (settings.http.read_timeout, settings.http.max_retries) == (90.0, 2)
    assert settings.http.max_retry_delay_ms == 0
    assert provider_settings({}) == ProviderSettings()
    assert provider_settings({}).transport == "auto"  # pi's default
    assert provider_settings({"transport": "sse"}).transport == "sse"
    assert provider_settings({"transport": "carrier-pigeon"}).transport == "auto"
