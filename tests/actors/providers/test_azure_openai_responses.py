"""The azure-openai-responses provider: Azure's URL, deployments and auth; the Responses wire."""

from __future__ import annotations

import math

import pytest
import trio

from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.azure_openai_responses import (
    NO_BASE_URL,
    NO_KEY,
    AzureOpenAIResponsesProvider,
    base_url,
    build_request,
    deployment_name,
)
from pitrio.actors.model_router.providers.base import HttpSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.errors import CredentialError
from pitrio.messages import TextContent, ToolCall
from pitrio.messages.model import Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamError, TextDelta
from tests.actors.providers.loopback import LoopbackServer, json_error, recording, sse
from tests.actors.providers.support import CONTEXT, SECRET, collect, final, make_model

API = "azure-openai-responses"
MODEL = make_model(API, "https://res.openai.azure.com", id="gpt-5.2", reasoning=True)
# Azure's error body (the OpenAI shape; Azure puts the status in "code").
RATE_LIMITED = {
    "error": {
        "code": "429",
        "message": "Requests to the Responses_Create Operation have exceeded the rate limit.",
    }
}


def provider(
    pool: HttpPool, env: dict[str, str] | None = None, key: bool = True
) -> AzureOpenAIResponsesProvider:
    keys = {"test": SECRET} if key else {}
    creds = Credentials(auth_path=None, env=env or {}, provider_keys=keys)
    return AzureOpenAIResponsesProvider(pool, creds)


def served(server: LoopbackServer, *, reasoning: bool = False) -> Model:
    return make_model(API, server.base_url + "/openai/v1", reasoning=reasoning)


# -- configuration (pure) ----------------------------------------------------------------------


def test_deployment_map() -> None:
    env = {"AZURE_OPENAI_DEPLOYMENT_NAME_MAP": " gpt-4o=prod-4o , gpt-5.2 = my-gpt5 ,bad, x="}
    assert deployment_name(MODEL, env) == "my-gpt5"
    assert deployment_name(make_model(API, id="other"), env) == "other"
    assert deployment_name(MODEL, {}) == "gpt-5.2"


@pytest.mark.parametrize(
    ("env", "model_url", "expected"),
    [
        ({}, "https://res.openai.azure.com", "https://res.openai.azure.com/openai/v1"),
        ({}, "https://res.openai.azure.com/openai/", "https://res.openai.azure.com/openai/v1"),
        (
            {},
            "https://x.cognitiveservices.azure.com/",
            "https://x.cognitiveservices.azure.com/openai/v1",
        ),
        ({}, "https://proxy.example/azure/v1/", "https://proxy.example/azure/v1"),
        (
            {"AZURE_OPENAI_RESOURCE_NAME": "mine"},
            "https://res.openai.azure.com",
            "https://mine.openai.azure.com/openai/v1",
        ),
        (
            {
                "AZURE_OPENAI_BASE_URL": " https://b.openai.azure.com ",
                "AZURE_OPENAI_RESOURCE_NAME": "m",
            },
            "",
            "https://b.openai.azure.com/openai/v1",
        ),
    ],
)
def test_base_url_order_and_normalisation(
    env: dict[str, str], model_url: str, expected: str
) -> None:
    assert base_url(make_model(API, model_url), env) == expected


def test_missing_or_invalid_base_url_is_named() -> None:
    with pytest.raises(CredentialError) as missing:
        base_url(make_model(API, ""), {})
    assert str(missing.value) == NO_BASE_URL
    with pytest.raises(CredentialError, match="Invalid Azure OpenAI base URL: not a url"):
        base_url(make_model(API, "not a url"), {})


def test_request_uses_api_key_header_version_and_deployment() -> None:
    env = {
        "AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "gpt-5.2=prod",
        "AZURE_OPENAI_API_VERSION": "preview",
    }
    options = StreamOptions(session_id="sess-1", reasoning="high", max_tokens=100)
    request = build_request(MODEL, CONTEXT, options, api_key=SECRET, headers={"X-A": "1"}, env=env)
    assert request.url == "https://res.openai.azure.com/openai/v1/responses?api-version=preview"
    assert request.headers["api-key"] == SECRET
    assert "authorization" not in request.headers
    assert request.headers["x-a"] == "1"
    body = request.json()
    assert body["model"] == "prod"
    # pi 1.6.0's Azure body: store false, no prompt_cache_retention.
    assert body["store"] is False and "prompt_cache_retention" not in body
    assert body["prompt_cache_key"] == "sess-1"
    assert body["max_output_tokens"] == 100
    assert body["reasoning"]["effort"] == "high"
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["stream"] is True
    head = ["model", "input", "stream", "prompt_cache_key", "store", "max_output_tokens", "tools"]
    assert list(body)[: len(head)] == head  # pi's Azure order
    assert list(body).index("reasoning") < list(body).index("include")


def test_entra_token_without_key_and_neither() -> None:
    env = {"AZURE_OPENAI_AD_TOKEN": "entra-token"}
    request = build_request(MODEL, CONTEXT, StreamOptions(), api_key=None, headers={}, env=env)
    assert request.headers["authorization"] == "Bearer entra-token"
    assert "api-key" not in request.headers
    assert request.url.endswith("/responses?api-version=v1")
    with pytest.raises(CredentialError) as missing:
        build_request(MODEL, CONTEXT, StreamOptions(), api_key=None, headers={}, env={})
    assert str(missing.value) == NO_KEY


# -- real HTTP -------------------------------------------------------------------------------


async def test_streams_text_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(recording("openai_responses_text.sse"), chunk_size=11))
    env = {"AZURE_OPENAI_DEPLOYMENT_NAME_MAP": "test-model=dep-1"}
    events = await collect(provider(pool, env), served(server))
    message = final(events)
    assert [b.text for b in message.content if isinstance(b, TextContent)] == [
        "Hello, world! Ünïcödé ✓"
    ]
    assert message.api == API
    assert message.usage.total_tokens > 0
    (request,) = server.requests
    assert request.path == "/openai/v1/responses?api-version=v1"
    assert request.headers["api-key"] == SECRET
    assert request.json()["model"] == "dep-1"


async def test_tools_and_reasoning_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(recording("openai_responses_reasoning_tools.sse")))
    model = served(server, reasoning=True)
    options = StreamOptions(reasoning="low")
    message = final(await collect(provider(pool), model, options=options))
    assert message.stop_reason == "toolUse"
    assert any(isinstance(b, ToolCall) for b in message.content)
    assert server.requests[0].json()["reasoning"]["effort"] == "low"


async def test_the_key_falls_back_to_the_azure_variable(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(sse(recording("openai_responses_text.sse")))
    env = {"AZURE_OPENAI_API_KEY": "azure-env-key"}
    final(await collect(provider(pool, env, key=False), served(server)))
    assert server.requests[0].headers["api-key"] == "azure-env-key"


async def test_no_credentials_is_one_error_event_with_pi_s_text(pool: HttpPool) -> None:
    events = await collect(provider(pool, key=False), MODEL)
    assert [e.type for e in events] == ["error"]
    assert final(events).error_message == NO_KEY


async def test_a_429_with_retry_after_is_repeated_as_the_sdk_does(
    server: LoopbackServer, autojump_clock: trio.testing.MockClock
) -> None:
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        server.push(
            json_error(429, RATE_LIMITED, {"retry-after": "3"}),
            sse(recording("openai_responses_text.sse")),
        )
        events = await collect(provider(retrying), served(server))
    finally:
        await retrying.aclose()
    assert final(events).stop_reason == "stop"
    assert len(server.requests) == 2
    gap = server.requests[1].first_byte_at - server.requests[0].first_byte_at
    assert gap == pytest.approx(3.0)


async def test_an_error_body_reads_as_the_openai_sdk_shows_it(
    server: LoopbackServer, pool: HttpPool
) -> None:
    server.push(json_error(429, RATE_LIMITED))
    message = final(await collect(provider(pool), served(server)))
    assert message.error_message == (
        "429 Requests to the Responses_Create Operation have exceeded the rate limit."
    )


async def test_abort_mid_stream_closes_the_connection(
    server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording("openai_responses_text.sse")
    server.push(sse(body[: body.index(b"ld! ")], ending="hang"))
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    seen: list[AssistantMessageEvent] = []
    stream = provider(pool).stream
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, TextDelta):
                    nursery.cancel_scope.cancel()

        nursery.start_soon(consume)
        await stream(served(server), CONTEXT, StreamOptions(), send)
        pytest.fail("the stream should have been cancelled")  # pragma: no cover
    assert not any(isinstance(e, StreamError) for e in seen)
    with trio.fail_after(5):
        await server.client_gone.wait()


def test_the_router_registers_the_api() -> None:
    router = ModelRouter.from_config(RouterConfig(catalogue=False))
    assert router.registry.has_stream_fn(API)


def test_azure_keeps_the_cache_key_of_a_request_that_turns_caching_off() -> None:
    # pi 1.6.0's Azure sends the request's session id as prompt_cache_key whatever the
    # retention: a summary call (retention none, its own routing id) carries it too.
    env = {"AZURE_OPENAI_BASE_URL": "https://res.openai.azure.com"}
    options = StreamOptions(session_id="route-1", cache_retention="none")
    request = build_request(MODEL, CONTEXT, options, api_key=SECRET, headers={}, env=env)
    assert request.json()["prompt_cache_key"] == "route-1"
