"""The openai-codex-responses provider: URL, token and headers, body, Codex's event mapping."""

from __future__ import annotations

import base64
import itertools

import attrs
import orjson
import pytest
import trio

from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.actors.model_router.providers.http_errors import codex_error_text
from pitrio.actors.model_router.providers.openai_codex_responses import (
    NO_ACCOUNT,
    CodexParser,
    OpenAICodexResponsesProvider,
    account_id,
    build_body,
    build_request,
    codex_url,
)
from pitrio.errors import CredentialError
from pitrio.messages import TextContent
from pitrio.messages.model import StreamOptions
from tests.actors.providers.loopback import LoopbackServer, json_error, recording, sse
from tests.actors.providers.support import CONTEXT, collect, final, make_model, parse_all

API = "openai-codex-responses"


def jwt(claims: dict[str, object]) -> str:
    """An unsigned JWT with ``claims`` (the provider only reads the payload)."""
    encode = lambda doc: base64.urlsafe_b64encode(orjson.dumps(doc)).rstrip(b"=").decode()  # noqa: E731
    return f"{encode({'alg': 'none'})}.{encode(claims)}.sig"


TOKEN = jwt({"https://api.openai.com/auth": {"chatgpt_account_id": "acct-42"}})
MODEL = make_model(API, "https://chatgpt.com/backend-api", id="gpt-5.2-codex", reasoning=True)


def codex_body(name: str) -> bytes:
    """A recorded Responses stream as Codex ends it (``response.done``)."""
    return recording(name).replace(b"response.completed", b"response.done")


def provider(pool: HttpPool) -> OpenAICodexResponsesProvider:
    """The SSE transport (the WebSocket one has its own tests: test_codex_websocket.py)."""
    creds = Credentials(auth_path=None, env={}, provider_keys={"test": TOKEN})
    return OpenAICodexResponsesProvider(pool, creds, ProviderSettings(transport="sse"))


@pytest.mark.parametrize(
    ("base", "url"),
    [
        ("", "https://chatgpt.com/backend-api/codex/responses"),
        ("https://chatgpt.com/backend-api/", "https://chatgpt.com/backend-api/codex/responses"),
        ("http://h/x/codex", "http://h/x/codex/responses"),
        ("http://h/x/codex/responses/", "http://h/x/codex/responses"),
    ],
)
def test_codex_url(base: str, url: str) -> None:
    assert codex_url(base) == url


def test_account_id_from_the_token_or_pi_s_error() -> None:
    assert account_id(TOKEN) == "acct-42"
    for bad in ("not-a-jwt", jwt({"sub": "x"}), "a.!!!.c"):
        with pytest.raises(CredentialError) as caught:
            account_id(bad)
        assert str(caught.value) == NO_ACCOUNT


def test_request_headers_and_body() -> None:
    options = StreamOptions(session_id="sess-1", reasoning="high")
    request = build_request(
        MODEL, CONTEXT, options, api_key=TOKEN, headers={"OpenAI-Beta": "mine", "X-A": "1"}
    )
    assert request.url == "https://chatgpt.com/backend-api/codex/responses"
    headers = request.headers
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["chatgpt-account-id"] == "acct-42"
    assert headers["originator"] == "pi"
    assert headers["openai-beta"] == "responses=experimental"  # pi's value wins
    assert headers["x-a"] == "1"
    assert headers["session-id"] == headers["x-client-request-id"] == "sess-1"
    assert headers["user-agent"].startswith("pi (")
    body = request.json()
    assert list(body) == [
        "model",
        "store",
        "stream",
        "input",
        "text",
        "include",
        "prompt_cache_key",
        "tool_choice",
        "parallel_tool_calls",
        "max_output_tokens",
        "tools",
        "reasoning",
    ]
    assert body["max_output_tokens"] == min(MODEL.max_tokens, 32000)
    # pi 1.6.0: the system prompt leads the input (0.73.1 sent it as instructions).
    assert body["input"][0] == {"role": "developer", "content": "You are terse."}
    assert body["text"] == {"verbosity": "low"}
    assert body["tools"][0]["strict"] is None
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}


def test_body_defaults() -> None:
    context = CONTEXT.__class__(system_prompt=None, messages=CONTEXT.messages, tools=())
    body = build_body(MODEL, context, StreamOptions())
    assert "instructions" not in body  # no prompt, no item for it (0.73.1 sent a default)
    assert all("role" not in item or item["role"] == "user" for item in body["input"])
    assert "tools" not in body and "prompt_cache_key" not in body
    # pi 1.6.0 switches a reasoning model's thinking off explicitly (thinkingLevelMap.off or
    # "none"), as an effort with the summary of every effort (checked against real pi 1.6.0
    # by the harness's openai-codex-responses/thinking_replay); a null off sends none.
    assert body["reasoning"] == {"effort": "none", "summary": "auto"}
    named = attrs.evolve(MODEL, thinking_level_map={"off": "minimal"})
    reasoning = build_body(named, context, StreamOptions())["reasoning"]
    assert reasoning == {"effort": "minimal", "summary": "auto"}
    silent = attrs.evolve(MODEL, thinking_level_map={"off": None})
    assert "reasoning" not in build_body(silent, context, StreamOptions())
    small = build_body(MODEL, context, StreamOptions(max_tokens=3))
    assert small["max_output_tokens"] == 16  # pi's floor for the Responses API
    capped = attrs.evolve(MODEL, compat={"supportsMaxOutputTokens": False})
    assert "max_output_tokens" not in build_body(capped, context, StreamOptions())


def test_response_done_completes_and_incomplete_is_a_length_stop() -> None:
    message = final(parse_all(CodexParser(MODEL), codex_body("openai_responses_text.sse")))
    assert message.stop_reason == "stop"
    assert [b.text for b in message.content if isinstance(b, TextContent)] == [
        "Hello, world! Ünïcödé ✓"
    ]
    incomplete = codex_body("openai_responses_text.sse").replace(
        b'"status":"completed"', b'"status":"incomplete"'
    )
    assert final(parse_all(CodexParser(MODEL), incomplete)).stop_reason == "length"


def test_codex_error_events() -> None:
    raw = b'data: {"type":"error","code":"server_error","message":"boom"}\n\n'
    assert final(parse_all(CodexParser(MODEL), raw)).error_message == "Codex error: boom"
    failed = b'data: {"type":"response.failed","response":{"error":{"message":"went wrong"}}}\n\n'
    assert final(parse_all(CodexParser(MODEL), failed)).error_message == "went wrong"
    bare = b'data: {"type":"response.failed","response":{}}\n\n'
    assert final(parse_all(CodexParser(MODEL), bare)).error_message == "Codex response failed"


def test_codex_error_texts() -> None:
    limit = b'{"error":{"code":"usage_limit_reached","plan_type":"PLUS","resets_at":1000600}}'
    assert codex_error_text(429, limit.decode(), now=1000000.0) == (
        "You have hit your ChatGPT usage limit (plus plan). Try again in ~10 min."
    )
    assert codex_error_text(400, '{"error":{"message":"bad input"}}') == "bad input"
    assert codex_error_text(502, "upstream down") == "upstream down"
    assert codex_error_text(500, "") == "Request failed"


async def test_streams_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(sse(codex_body("openai_responses_reasoning_tools.sse")))
    model = make_model(API, server.base_url + "/backend-api", reasoning=True)
    message = final(await collect(provider(pool), model))
    assert message.stop_reason == "toolUse"
    (request,) = server.requests
    assert request.path == "/backend-api/codex/responses"
    assert request.headers["chatgpt-account-id"] == "acct-42"


async def test_repeats_are_the_provider_retry_setting_one_second_doubling(
    server: LoopbackServer, autojump_clock: trio.testing.MockClock
) -> None:
    # pi 1.6.0's Codex repeats retry.provider.maxRetries times (three here; 0.73.1 always
    # made three), one second doubling.
    pool = HttpPool(HttpSettings(trust_env=False, max_retries=3))
    try:
        busy = {"error": {"message": "overloaded"}}
        server.push(
            *(json_error(503, busy) for _ in range(3)), sse(codex_body("openai_responses_text.sse"))
        )
        model = make_model(API, server.base_url)
        assert final(await collect(provider(pool), model)).stop_reason == "stop"
    finally:
        await pool.aclose()
    times = [r.first_byte_at for r in server.requests]
    assert [b - a for a, b in itertools.pairwise(times)] == pytest.approx([1.0, 2.0, 4.0])


async def test_no_repeat_by_default(server: LoopbackServer) -> None:
    # pi 1.6.0's default (retry.provider.maxRetries 0): a 503 is the reply's error at once.
    pool = HttpPool(HttpSettings(trust_env=False))
    try:
        server.push(json_error(503, {"error": {"message": "overloaded"}}))
        model = make_model(API, server.base_url)
        message = final(await collect(provider(pool), model))
    finally:
        await pool.aclose()
    assert message.stop_reason == "error" and len(server.requests) == 1


async def test_a_token_without_account_is_one_error_event(pool: HttpPool) -> None:
    creds = Credentials(auth_path=None, env={}, provider_keys={"test": "sk-plain"})
    events = await collect(OpenAICodexResponsesProvider(pool, creds), MODEL)
    assert [e.type for e in events] == ["error"]
    assert final(events).error_message == NO_ACCOUNT


def test_the_router_registers_the_api() -> None:
    router = ModelRouter.from_config(RouterConfig(catalogue=False))
    assert router.registry.has_stream_fn(API)


def test_a_request_that_turns_caching_off_sends_no_session() -> None:
    # pi 1.6.0's Codex: no cache key, no session headers, no kept socket for such a request.
    options = StreamOptions(session_id="s-1", cache_retention="none")
    assert "prompt_cache_key" not in build_body(MODEL, CONTEXT, options)
    assert build_body(MODEL, CONTEXT, StreamOptions(session_id="s-1"))["prompt_cache_key"] == "s-1"
    request = build_request(MODEL, CONTEXT, options, api_key=TOKEN, headers={})
    assert "session-id" not in request.headers and "x-client-request-id" not in request.headers
    assert request.session_id is None
