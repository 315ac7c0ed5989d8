"""models.json: validation naming file, entry and field; merging with the catalogue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.model_router.catalogue import BUILTIN_PROVIDERS, CATALOGUE, PROVIDER_APIS
from pitrio.actors.model_router.models_json import (
    load_models_json,
    merge_models,
    parse_models_json,
)
from pitrio.errors import ModelsJsonError
from pitrio.messages.model import ModelCost

FILE = "/agent/models.json"


def parse(document: Any) -> Any:
    return parse_models_json(orjson.dumps(document), FILE)


def error_of(document: Any) -> ModelsJsonError:
    with pytest.raises(ModelsJsonError) as info:
        merge_models(CATALOGUE, parse(document))
    return info.value


def test_catalogue_covers_the_main_providers() -> None:
    # Issue 25: the catalogue is pi's (pi 1.6.0: 43 providers, issue 34; 0.73.1 had 31).
    assert set(BUILTIN_PROVIDERS) >= {
        "openai",
        "anthropic",
        "google",
        "openrouter",
        "groq",
        "xai",
        "mistral",
        "cerebras",
    }
    refs = [model.ref for model in CATALOGUE]
    assert len(refs) == len(set(refs))
    for model in CATALOGUE:
        # pi's providers may mix APIs (a gateway serves Claude and GPT); the provider's API
        # is that of most of its models.
        assert PROVIDER_APIS[model.provider] in {
            m.api for m in CATALOGUE if m.provider == model.provider
        }
        # Azure's base URL is the user's resource, so pi leaves it empty (pi 1.6.0's azure
        # provider also serves a Foundry chat-completions model, azure/deepseek-v4-pro).
        assert model.base_url.startswith("https://") or model.provider == "azure"
        assert model.context_window > 0 and model.max_tokens > 0
        # pi prices its auto router -1000000: the price depends on the model it picks.
        if model.ref != "openrouter/openrouter/auto":
            assert model.cost.input >= 0 and model.cost.output >= 0
        assert model.input[0] == "text"
    anthropic = [m for m in CATALOGUE if m.provider == "anthropic"]
    assert all(m.cost.cache_write > 0 for m in anthropic)  # prompt caching is priced


def test_minimal_local_provider_gets_pi_defaults() -> None:
    user = parse(
        {
            "providers": {
                "ollama": {
                    "baseUrl": "http://localhost:11434/v1",
                    "api": "openai-completions",
                    "models": [{"id": "llama3.1:8b"}, {"id": "qwen2.5-coder:7b"}],
                }
            }
        }
    )
    models, virtual = merge_models(CATALOGUE, user)
    assert virtual == []
    local = models[-2:]
    assert [m.ref for m in local] == ["ollama/llama3.1:8b", "ollama/qwen2.5-coder:7b"]
    first = local[0]
    assert (first.name, first.api, first.base_url) == (
        "llama3.1:8b",
        "openai-completions",
        "http://localhost:11434/v1",
    )
    assert (first.reasoning, first.input, first.context_window, first.max_tokens) == (
        False,
        ("text",),
        128000,
        16384,
    )
    assert first.cost == ModelCost()


def test_full_model_fields_and_compat_layers() -> None:
    user = parse(
        {
            "providers": {
                "vllm": {
                    "baseUrl": "http://gpu:8000/v1",
                    "api": "openai-completions",
                    "apiKey": "VLLM_KEY",
                    "headers": {"x-team": "a"},
                    "compat": {"supportsDeveloperRole": False, "maxTokensField": "max_tokens"},
                    "models": [
                        {
                            "id": "qwen3",
                            "name": "Qwen 3",
                            "reasoning": True,
                            "input": ["text", "image"],
                            "contextWindow": 32768,
                            "maxTokens": 8192,
                            # pi 1.6.0's schema wants all four prices of a custom model.
                            "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0, "cacheWrite": 0},
                            "headers": {"x-model": "b"},
                            "compat": {"supportsDeveloperRole": True},
                            "thinkingLevelMap": {"minimal": None, "xhigh": "max"},
                            "someFutureField": 1,
                        }
                    ],
                }
            }
        }
    )
    model = merge_models(CATALOGUE, user)[0][-1]
    assert (model.name, model.reasoning, model.input) == ("Qwen 3", True, ("text", "image"))
    assert (model.context_window, model.max_tokens) == (32768, 8192)
    assert model.cost == ModelCost(input=0.1, output=0.2)
    assert model.headers == {"x-team": "a", "x-model": "b"}
    assert model.compat == {"supportsDeveloperRole": True, "maxTokensField": "max_tokens"}
    assert model.thinking_level_map == {"minimal": None, "xhigh": "max"}


def test_builtin_provider_override_overrides_and_upserts() -> None:
    user = parse(
        {
            "providers": {
                "anthropic": {
                    "baseUrl": "https://proxy.example.com",
                    "headers": {"x-proxy": "1"},
                    "modelOverrides": {
                        "claude-haiku-4-5": {"name": "Haiku (proxied)", "cost": {"input": 0.5}},
                        "no-such-model": {"name": "ignored"},
                    },
                    "models": [
                        {"id": "claude-sonnet-4-5", "name": "Replaced", "contextWindow": 1000},
                        {"id": "claude-new", "api": "anthropic-messages"},
                    ],
                    "authHeader": True,
                }
            }
        }
    )
    models, _ = merge_models(CATALOGUE, user)
    anthropic = [m for m in models if m.provider == "anthropic"]
    assert all(m.base_url == "https://proxy.example.com" for m in anthropic)
    assert all(m.headers == {"x-proxy": "1"} for m in anthropic)
    by_id = {m.id: m for m in anthropic}
    haiku = by_id["claude-haiku-4-5"]
    assert haiku.name == "Haiku (proxied)"
    assert haiku.cost.input == 0.5 and haiku.cost.output == 5  # a partial cost override
    replaced = by_id["claude-sonnet-4-5"]
    assert (replaced.name, replaced.context_window) == ("Replaced", 1000)
    assert replaced.api == "anthropic-messages"  # the provider's api is the default
    assert by_id["claude-new"].compat == {"authHeader": True}
    # Replaced in place, new ones right after the provider's built-ins.
    ids = [m.id for m in anthropic]
    builtin_ids = [m.id for m in CATALOGUE if m.provider == "anthropic"]
    assert ids == [*builtin_ids, "claude-new"]
    assert len(models) == len(CATALOGUE) + 1


@pytest.mark.parametrize(
    ("document", "where", "problem"),
    [
        ([], "(top level)", "expected an object, got a list"),
        ({"providers": []}, "providers", "expected an object, got a list"),
        ({"providers": {"x": 3}}, "providers.x", "expected an object, got the number 3"),
        (
            {"providers": {"x": {"baseUrl": "localhost:1"}}},
            "providers.x.baseUrl",
            "expected an http(s) URL, got 'localhost:1'",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"name": "no id"}]}}},
            "providers.x.models[0].id",
            "required",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a"}, {"id": "a"}]}}},
            "providers.x.models[1].id",
            "duplicate model id 'a'",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "contextWindow": "big"}]}}},
            "providers.x.models[0].contextWindow",
            "expected a positive number, got the string 'big'",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "maxTokens": -5}]}}},
            "providers.x.models[0].maxTokens",
            "expected a positive number, got the number -5",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "reasoning": "yes"}]}}},
            "providers.x.models[0].reasoning",
            "expected true or false",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "input": ["text", "audio"]}]}}},
            "providers.x.models[0].input[1]",
            "expected one of text, image, got the string 'audio'",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "cost": {"input": -1, "output": 0,
                                     "cacheRead": 0, "cacheWrite": 0}}]}}},
            "providers.x.models[0].cost.input",
            "expected a non-negative number",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "thinkingLevelMap": {"max": 3}}]}}},
            "providers.x.models[0].thinkingLevelMap.max",
            "expected a string or null, got the number 3",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "models": [{"id": "a", "cost": {"input": 1}}]}}},
            "providers.x.models[0].cost.output",
            "required (also: providers.x.models[0].cost.cacheRead: required; "
            "providers.x.models[0].cost.cacheWrite: required)",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "api": "openai-completions",
                                 "compat": {"maxTokensField": "tokens"}}}},
            "providers.x.compat.maxTokensField",
            "expected one of max_completion_tokens, max_tokens, got the string 'tokens'",
        ),
        (
            {"providers": {"x": {"api": "openai-completions", "models": [{"id": "a"}]}}},
            "providers.x.baseUrl",
            "required for a provider with custom models",
        ),
        (
            {"providers": {"x": {"baseUrl": "http://h", "models": [{"id": "a"}]}}},
            "providers.x.models[0].api",
            "required (on the model or its provider)",
        ),
        (
            {"providers": {"x": {"apiKey": 12}}},
            "providers.x.apiKey",
            "expected a string, got the number 12",
        ),
        (
            {"providers": {"x": {"headers": {"h": 1}}}},
            "providers.x.headers.h",
            "expected a string",
        ),
        (
            {"providers": {"anthropic": {
                "modelOverrides": {"claude-haiku-4-5": {"maxTokens": 0}}}}},
            "providers.anthropic.modelOverrides.claude-haiku-4-5.maxTokens",
            "expected a positive number, got the number 0",
        ),
        (
            {"providers": {"r": {"api": "pi-virtual", "models": [{"id": "v"}]}}},
            "providers.r.models[0].fallback",
            "required for a pi-virtual model",
        ),
        (
            {"providers": {"r": {"api": "pi-virtual", "models": [
                {"id": "v", "fallback": ["a/b"], "routes": {"retry": "previous"}}]}}},
            "providers.r.models[0].routes.retry",
            '"previous" is only for continuation',
        ),
    ],
)  # fmt: skip
def test_validation_errors_name_file_entry_and_field(
    document: Any, where: str, problem: str
) -> None:
    error = error_of(document)
    assert str(error).startswith(f"{FILE}: {where}: {problem}"), str(error)
    assert error.file == FILE


def test_invalid_json_and_files(tmp_path: Path) -> None:
    with pytest.raises(ModelsJsonError, match=r"^/agent/models.json: \(top level\): invalid JSON"):
        parse_models_json(b"{nope", FILE)
    assert load_models_json(tmp_path / "missing.json") is None
    path = tmp_path / "models.json"
    path.write_text('{"providers": {"x": {"api": 1}}}')
    with pytest.raises(ModelsJsonError) as info:
        load_models_json(path)
    assert str(info.value) == f"{path}: providers.x.api: expected a string, got the number 1"
    assert (info.value.entry, info.value.field) == ("providers.x", "api")


def test_virtual_model_spec() -> None:
    user = parse(
        {
            "providers": {
                "smart": {
                    "api": "pi-virtual",
                    "models": [
                        {
                            "id": "coder",
                            "name": "Coder",
                            "fallback": ["anthropic/claude-sonnet-4-5:high", "openai/gpt-5"],
                            "routes": {"direct": "anthropic/claude-haiku-4-5"},
                            "reasoning": True,
                        }
                    ],
                }
            }
        }
    )
    models, virtual = merge_models(CATALOGUE, user)
    assert len(models) == len(CATALOGUE)  # virtual models are not physical ones
    (spec,) = virtual
    assert spec.model.ref == "smart/coder"
    assert spec.model.api == "pi-virtual" and spec.model.reasoning is True
    assert spec.fallback == ("anthropic/claude-sonnet-4-5:high", "openai/gpt-5")
    assert spec.routes == {"direct": "anthropic/claude-haiku-4-5"}
    assert spec.entry == "providers.smart.models[0]"
