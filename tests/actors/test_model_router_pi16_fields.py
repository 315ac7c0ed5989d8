"""pi 1.6.0's models.json in the router: new fields load, unknown keys never drop a model, the
renamed azure provider, and APIs without an adapter (issue 34)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from pitrio.actors.model_router import ModelRouter, RouterConfig, model_fields
from pitrio.actors.model_router.catalogue import CATALOGUE
from pitrio.actors.model_router.models_json import merge_models, parse_models_json
from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.thinking import supported_thinking_levels
from pitrio.errors import ModelsJsonError, UnknownModelError
from pitrio.messages import codec

FILE = "/agent/models.json"
SETTINGS = ProviderSettings(http=HttpSettings(trust_env=False))


def router_for(agent: Path, document: Any, env: dict[str, str] | None = None) -> ModelRouter:
    agent.mkdir(parents=True, exist_ok=True)
    (agent / "models.json").write_bytes(orjson.dumps(document))
    return ModelRouter.from_config(RouterConfig(agent_dir=agent, env=env or {}, settings=SETTINGS))


def local(model: dict[str, Any], **provider: Any) -> Any:
    return {
        "providers": {
            "local": {
                "baseUrl": "http://127.0.0.1:9/v1",
                "api": "openai-completions",
                "apiKey": "k",
                **provider,
                "models": [model],
            }
        }
    }


def test_unknown_keys_never_drop_the_model(tmp_path: Path) -> None:
    # 0.73.1-era pitrio refused the whole file for thinkingLevelMap.max (then "Unknown model").
    document = local(
        {
            "id": "m",
            "reasoning": True,
            "thinkingLevelMap": {"max": "max", "ultra": "u", "minimal": None},
            "someFutureField": {"x": 1},
            "compat": {"someFutureFlag": True, "thinkingFormat": "baseten"},
        }
    )
    router = router_for(tmp_path, document)
    assert router.problems() == ()
    model = router.registry.resolve("local/m")
    assert model.thinking_level_map == {"max": "max", "ultra": "u", "minimal": None}
    assert model.compat == {"someFutureFlag": True, "thinkingFormat": "baseten"}
    # max is offered because the map names it; the unknown level is never offered.
    assert supported_thinking_levels(model) == ("off", "low", "medium", "high", "max")


def test_a_schema_violation_names_file_path_and_expectation(tmp_path: Path) -> None:
    document = local({"id": "m", "contextWindow": "big", "inputLimits": {"maxRequestBytes": 0}})
    router = router_for(tmp_path, document)
    [problem] = router.problems()
    path = tmp_path / "models.json"
    # One problem, naming every violation (in the schema's order of properties, pi's).
    assert problem.startswith(f"{path}: providers.local.models[0].inputLimits.maxRequestBytes: ")
    assert "maxRequestBytes: expected a minimum of 1, got the number 0" in problem
    assert "models[0].contextWindow: expected a positive number, got the string 'big'" in problem
    # As in pi, the file is refused whole: the custom model is unknown (the router's answer
    # to a resolve then carries the problem), the built-in models stay.
    with pytest.raises(UnknownModelError, match="Unknown model: local/m"):
        router.registry.resolve("local/m")
    assert len(router.registry.list()) > len(CATALOGUE)


def test_new_fields_load_and_reach_the_wire_as_pi_names_them() -> None:
    tiers = [{"inputTokensAbove": 200000, "input": 6, "output": 22, "cacheRead": 0.6,
              "cacheWrite": 7}]  # fmt: skip
    document = local(
        {
            "id": "m",
            "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75,
                     "tiers": tiers},
            "inputLimits": {"maxRequestBytes": 1000, "images": {"maxPerRequest": 5}},
            "promptCache": {"short": 300},
            "samplingParams": {"temperature": 0.2, "top_p": 0.9},
            "samplingParamsByThinkingLevel": {"high": {"temperature": 1}},
        }
    )  # fmt: skip
    user = parse_models_json(orjson.dumps(document), FILE)
    model = merge_models((), user)[0][0]
    assert model_fields.input_limits(model) == {
        "maxRequestBytes": 1000,
        "images": {"maxPerRequest": 5},
    }
    assert model_fields.prompt_cache(model) == {"short": 300}
    assert model_fields.sampling_params(model, "high") == {"temperature": 1, "top_p": 0.9}
    assert model_fields.sampling_params(model, None) == {"temperature": 0.2, "top_p": 0.9}
    assert model_fields.cost_tiers(model.cost) == tuple(tiers)
    assert model_fields.tier_for(model.cost, 200001).input == 6
    wire = codec.to_json(model)
    assert wire["cost"]["tiers"] == tiers
    assert wire["promptCache"] == {"short": 300}
    assert wire["samplingParamsByThinkingLevel"] == {"high": {"temperature": 1}}


def test_model_overrides_merge_the_new_fields_by_pis_rules() -> None:
    [fable] = [m for m in CATALOGUE if m.ref == "anthropic/claude-fable-5"]
    override = {
        "thinkingLevelMap": {"high": None},
        "inputLimits": {"images": {"resize": {"maxWidth": 1000}}},
        "promptCache": {"long": 60},
        "samplingParams": {"temperature": 0.5},
        "cost": {"input": 1},
    }
    document = {"providers": {"anthropic": {"modelOverrides": {"claude-fable-5": override}}}}
    merged = {
        m.ref: m
        for m in merge_models(CATALOGUE, parse_models_json(orjson.dumps(document), FILE))[0]
    }["anthropic/claude-fable-5"]
    # The map merges key by key (pi 1.6.0's applyModelOverride): max stays.
    assert merged.thinking_level_map == {"off": None, "xhigh": "xhigh", "max": "max", "high": None}
    limits = model_fields.input_limits(merged)
    assert limits["maxRequestBytes"] == 33554432
    assert limits["images"]["maxPerRequest"] == 600
    assert limits["images"]["resize"] == {"maxWidth": 1000, "maxHeight": 2000,
                                           "maxBytes": 4718592, "jpegQuality": 80}  # fmt: skip
    assert model_fields.prompt_cache(merged) == {"short": 300, "long": 60}
    assert model_fields.sampling_params(merged, None) == {"temperature": 0.5}
    assert (merged.cost.input, merged.cost.output) == (1, fable.cost.output)
    # Key order stays pi's: the override adds samplingParams after the catalogue's keys.
    assert list(codec.to_json(merged))[: len(codec.to_json(fable))] == list(codec.to_json(fable))


def test_send_session_id_header_is_noted_and_ignored(tmp_path: Path) -> None:
    document = local({"id": "m", "compat": {"sendSessionIdHeader": False}})
    router = router_for(tmp_path, document)
    [note] = router.problems()
    assert "providers.local.models[0].compat.sendSessionIdHeader is ignored since pi 1.6.0" in note
    assert '"sessionAffinityFormat": "openai-nosession"' in note
    assert router.registry.resolve("local/m").id == "m"  # the model loads


def test_the_renamed_azure_provider_is_read_as_azure_and_named(tmp_path: Path) -> None:
    document = {"providers": {"azure-openai-responses": {"baseUrl": "https://r.example/openai/v1"}}}
    router = router_for(tmp_path, document, {"AZURE_OPENAI_API_KEY": "k"})
    [note] = router.problems()
    assert "providers.azure-openai-responses: provider 'azure-openai-responses' was renamed" in note
    azure = [m for m in router.registry.list() if m.provider == "azure"]
    assert azure and all(m.base_url == "https://r.example/openai/v1" for m in azure)
    assert not [m for m in router.registry.list() if m.provider == "azure-openai-responses"]
    # The old reference resolves to the new provider, and the rename is said once.
    model = router.registry.resolve("azure-openai-responses/gpt-4.1")
    assert model.ref == "azure/gpt-4.1"
    router.registry.resolve("azure-openai-responses/gpt-4.1")
    notes = [p for p in router.problems() if p.startswith("model azure-openai-responses/")]
    assert notes == [
        "model azure-openai-responses/gpt-4.1: provider 'azure-openai-responses' was renamed "
        "'azure' in pi 1.6.0; pitrio reads it as 'azure' (rename it to keep pi reading it)"
    ]
    with pytest.raises(UnknownModelError, match="Unknown model: azure-openai-responses/nope"):
        router.registry.resolve("azure-openai-responses/nope")


async def test_an_auth_json_entry_under_the_old_azure_id_serves_azure(tmp_path: Path) -> None:
    auth = tmp_path / "auth.json"
    auth.write_text('{"azure-openai-responses": {"type": "api_key", "key": "from-old-id"}}')
    auth.chmod(0o600)
    router = ModelRouter.from_config(RouterConfig(agent_dir=tmp_path, env={}, settings=SETTINGS))
    assert router.credentials.configured("azure")
    assert await router.credentials.api_key("azure") == "from-old-id"
    [note] = router.problems()
    assert note.startswith(f"{auth}: entry 'azure-openai-responses': provider ")


def test_an_api_without_an_adapter_loads_lists_and_fails_naming_it(tmp_path: Path) -> None:
    document = local({"id": "m"}, api="carrier-pigeon")
    router = router_for(tmp_path, document)
    assert router.problems() == ()
    model = router.registry.resolve("local/m")
    assert router.availability(model) == "no adapter for api carrier-pigeon"
    with pytest.raises(UnknownModelError, match="no adapter for the carrier-pigeon API"):
        router.registry.stream_fn(model)


def test_an_extension_provider_block_is_not_held_to_the_file_schema() -> None:
    # pi checks an extension's registerProvider by its own rules; only the file gets the schema.
    block = {"providers": {"ext": {"baseUrl": "http://h", "api": "openai-completions",
                                   "models": [{"id": "m", "cost": {"input": 1}}]}}}  # fmt: skip
    with pytest.raises(ModelsJsonError, match=r"cost\.output: required"):
        parse_models_json(orjson.dumps(block), FILE)
    user = parse_models_json(orjson.dumps(block), "extension x", schema=False)
    assert merge_models((), user)[0][0].cost.input == 1


async def test_cloudflare_needs_its_ids_and_its_urls_get_them(tmp_path: Path) -> None:
    from pitrio.actors.model_router.credentials import Credentials
    from pitrio.errors import CredentialError

    key_only = Credentials(auth_path=None, env={"CLOUDFLARE_API_KEY": "k"})
    assert not key_only.configured("cloudflare-workers-ai")  # pi 1.6.0: the account id too
    url = "https://api.cloudflare.com/client/v4/accounts/{CLOUDFLARE_ACCOUNT_ID}/ai/v1"
    with pytest.raises(CredentialError, match="set CLOUDFLARE_ACCOUNT_ID"):
        key_only.base_url("cloudflare-workers-ai", url)
    env = {"CLOUDFLARE_API_KEY": "k", "CLOUDFLARE_ACCOUNT_ID": "acct"}
    workers = Credentials(auth_path=None, env=env)
    assert workers.configured("cloudflare-workers-ai")
    assert not workers.configured("cloudflare-ai-gateway")  # and the gateway's id
    assert workers.base_url("cloudflare-workers-ai", url) == url.replace(
        "{CLOUDFLARE_ACCOUNT_ID}", "acct"
    )
    # The auth.json entry's env names them too (pi's login stores them there).
    auth = tmp_path / "auth.json"
    auth.write_text(
        '{"cloudflare-ai-gateway": {"type": "api_key", "key": "k", '
        '"env": {"CLOUDFLARE_ACCOUNT_ID": "a1", "CLOUDFLARE_GATEWAY_ID": "g1"}}}'
    )
    auth.chmod(0o600)
    gateway = Credentials(auth_path=auth, env={})
    assert gateway.configured("cloudflare-ai-gateway")
    assert (
        gateway.base_url(
            "cloudflare-ai-gateway",
            "https://x/{CLOUDFLARE_ACCOUNT_ID}/{CLOUDFLARE_GATEWAY_ID}/openai",
        )
        == "https://x/a1/g1/openai"
    )


def test_listing_order_is_javascripts_locale_compare() -> None:
    from pitrio.transports.models_cli import collation_key

    # What pi 1.6.0 prints (localeCompare): case only breaks ties, punctuation before digits
    # before letters (checked against node 22).
    ids = ["~openai/gpt-latest", "Qwen/Qwen3-8B", "openai/gpt-5:batch", "openai/gpt-5",
           "MiniMax-M2.5", "minimax-m2", "deepseek-v4", "a_b", "a-b", "a.b", "a1"]  # fmt: skip
    assert sorted(ids, key=collation_key) == [
        "~openai/gpt-latest", "a_b", "a-b", "a.b", "a1", "deepseek-v4", "minimax-m2",
        "MiniMax-M2.5", "openai/gpt-5", "openai/gpt-5:batch", "Qwen/Qwen3-8B",
    ]  # fmt: skip
    assert sorted(["B", "b", "a"], key=collation_key) == ["a", "b", "B"]


def test_a_tiered_price_applies_to_the_whole_request_as_pi_prices_it() -> None:
    from pitrio.actors.model_router.usage import make_usage

    [model] = [m for m in CATALOGUE if model_fields.cost_tiers(m.cost)][:1]
    [tier, *_] = model_fields.cost_tiers(model.cost)
    edge = int(tier["inputTokensAbove"])
    below = make_usage(input=edge - 100, cache_read=100, output=1000, model=model)
    assert below.cost.input == model.cost.input / 1_000_000 * (edge - 100)
    assert below.cost.output == model.cost.output / 1_000_000 * 1000
    above = make_usage(input=edge - 100, cache_read=101, output=1000, model=model)
    assert above.cost.input == tier["input"] / 1_000_000 * (edge - 100)
    assert above.cost.output == tier["output"] / 1_000_000 * 1000
    assert above.cost.cache_read == tier["cacheRead"] / 1_000_000 * 101


def test_sampling_params_go_last_into_openai_bodies() -> None:
    import attrs

    from pitrio.actors.model_router.providers import openai_completions, openai_responses
    from pitrio.messages import user_message
    from pitrio.messages.model import LlmContext, StreamOptions

    user = parse_models_json(
        orjson.dumps(
            local(
                {
                    "id": "m",
                    "reasoning": True,
                    "samplingParams": {"temperature": 0.6, "stream": True},
                    "samplingParamsByThinkingLevel": {"high": {"temperature": 1}},
                }
            )
        ),
        FILE,
    )
    model = merge_models((), user)[0][0]
    context = LlmContext(system_prompt="s", messages=(user_message("hi", timestamp=1),))
    body = openai_completions.build_body(model, context, StreamOptions(reasoning="high"))
    assert body["temperature"] == 1 and list(body)[-1] == "temperature"
    assert openai_completions.build_body(model, context, StreamOptions())["temperature"] == 0.6
    responses = attrs.evolve(model, api="openai-responses")
    body = openai_responses.build_body(responses, context, StreamOptions(reasoning="high"))
    assert body["temperature"] == 1


def test_a_model_reference_under_the_old_azure_id_is_warned_about(tmp_path: Path) -> None:
    import subprocess
    import sys

    from pitrio.actors.model_router.catalogue import renamed_reference

    assert renamed_reference("azure/gpt-4.1") is None
    assert renamed_reference("openai/gpt-5") is None
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PITRIO_AGENT_DIR": str(tmp_path / "agent"),
        "AZURE_OPENAI_API_KEY": "k",
        "AZURE_OPENAI_BASE_URL": "http://127.0.0.1:9/openai/v1",  # nothing listens: fails fast
    }
    # ... and is not retried (three retries with real backoff were 14 of the test's 15 s).
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "settings.json").write_text('{"retry": {"enabled": false}}')
    argv = [sys.executable, "-m", "pitrio.transports.cli", "--no-session"]
    done = subprocess.run(
        [*argv, "--model", "azure-openai-responses/gpt-4.1", "-p", "hi"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert (
        "Warning: model azure-openai-responses/gpt-4.1: provider 'azure-openai-responses' was "
        "renamed 'azure' in pi 1.6.0" in done.stderr
    ), done.stderr
