"""The bedrock-converse-stream provider: request body, SigV4, event-stream frames, real HTTP."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials as AwsCredentials

from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers import bedrock_aws
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.bedrock_converse_forms import build_body
from pitrio.actors.model_router.providers.bedrock_converse_stream import (
    BedrockParser,
    BedrockProvider,
)
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages import ImageContent, TextContent, ThinkingContent, ToolCall, user_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError, TextDelta
from tests.actors.providers import eventstream as es
from tests.actors.providers.loopback import (
    LoopbackServer,
    Received,
    Reply,
    json_error,
    loopback_server,
)
from tests.actors.providers.support import (
    CONTEXT,
    assistant,
    collect,
    final,
    kinds,
    make_model,
    tool_result,
)

API = "bedrock-converse-stream"
CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"
KEY_ID, SECRET_KEY = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": KEY_ID,
    "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
    "AWS_REGION": "eu-west-1",
}
SETTINGS = ProviderSettings()


def provider(pool: HttpPool, env: dict[str, str] | None = None) -> BedrockProvider:
    creds = Credentials(auth_path=None, env=AWS_ENV if env is None else env, provider_keys={})
    return BedrockProvider(pool, creds, SETTINGS)


def parse(parser: BedrockParser, body: bytes) -> list[AssistantMessageEvent]:
    """Feed a whole encoded body, frame by frame, through botocore's decoder."""
    out: list[AssistantMessageEvent] = []
    for frame in bedrock_aws.FrameDecoder().feed(body):
        if frame.exception is not None:
            out += parser.feed_exception(frame.exception, frame.payload)
        else:
            out += parser.feed(frame.event, frame.payload.decode())
    return out + parser.end()


def verify_sigv4(request: Received, region: str) -> None:
    """Recompute the signature of what the server received with botocore, as AWS would."""
    auth = request.headers["authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
    assert f"/{region}/bedrock/aws4_request" in auth
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    headers = {name: request.headers[name] for name in signed}
    url = f"http://{request.headers['host']}{request.path}"
    aws = AWSRequest(method=request.method, url=url, data=request.body, headers=headers)
    aws.context["timestamp"] = request.headers["x-amz-date"]
    signer = SigV4Auth(AwsCredentials(KEY_ID, SECRET_KEY), "bedrock", region)
    canonical = signer.canonical_request(aws)
    expected = signer.signature(signer.string_to_sign(aws, canonical), aws)
    assert auth.endswith(f"Signature={expected}")


# -- request body ----------------------------------------------------------------------------


def test_body_shape_with_cache_points_tools_and_images() -> None:
    model = make_model(API, id=CLAUDE)
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    context = LlmContext(
        system_prompt="You are terse.",
        messages=(user_message("look", (image,), timestamp=1),),
        tools=CONTEXT.tools,
    )
    body = build_body(model, context, StreamOptions(), SETTINGS)
    assert body["system"] == [{"text": "You are terse."}, {"cachePoint": {"type": "default"}}]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"text": "look"},
                {"image": {"format": "png", "source": {"bytes": "aGVsbG8="}}},
                {"cachePoint": {"type": "default"}},
            ],
        }
    ]
    assert body["inferenceConfig"] == {"maxTokens": 16384}
    assert body["toolConfig"]["tools"][1] == {
        "toolSpec": {
            "name": "bash",
            "description": "Run a command",
            "inputSchema": {"json": CONTEXT.tools[1].parameters},
        }
    }
    assert "additionalModelRequestFields" not in body
    # Models without prompt caching (not Claude) get no cache points.
    plain = build_body(
        make_model(API, id="amazon.nova-pro-v1:0"), context, StreamOptions(), SETTINGS
    )
    assert plain["system"] == [{"text": "You are terse."}]
    long = build_body(model, context, StreamOptions(), ProviderSettings(cache_retention="long"))
    assert long["system"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


def test_tool_round_trip_and_signed_reasoning_go_back() -> None:
    model = make_model(API, id=CLAUDE)
    call = ToolCall(id="call.1", name="read", arguments={"path": "a.txt"})
    thinking = ThinkingContent(thinking="hmm", thinking_signature="sig==")
    unsigned = ThinkingContent(thinking="cut off")
    context = LlmContext(
        system_prompt=None,
        messages=(
            user_message("read a.txt", timestamp=1),
            assistant(
                thinking, unsigned, TextContent(text="Reading."), call, api=API, model=CLAUDE
            ),
            tool_result(call.id, "ok"),
        ),
    )
    body = build_body(model, context, StreamOptions(), ProviderSettings(cache_retention="none"))
    assert body["messages"][1]["content"] == [
        {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig=="}}},
        {"text": "cut off"},
        {"text": "Reading."},
        {"toolUse": {"toolUseId": "call_1", "name": "read", "input": {"path": "a.txt"}}},
    ]
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "call_1",
                    "content": [{"text": "ok"}],
                    "status": "success",
                }
            }
        ],
    }


def test_thinking_budget_and_adaptive_effort() -> None:
    model = make_model(API, id=CLAUDE, reasoning=True, max_tokens=64000)
    body = build_body(model, CONTEXT, StreamOptions(reasoning="medium"), SETTINGS)
    extra = body["additionalModelRequestFields"]
    assert extra["thinking"] == {"type": "enabled", "budget_tokens": 8192, "display": "summarized"}
    assert extra["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]
    assert body["inferenceConfig"]["maxTokens"] > 8192
    adaptive = make_model(API, id="anthropic.claude-opus-4-6-v1", reasoning=True)
    body = build_body(adaptive, CONTEXT, StreamOptions(reasoning="minimal"), SETTINGS)
    assert body["additionalModelRequestFields"] == {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "low"},
    }
    gov = build_body(
        model, CONTEXT, StreamOptions(reasoning="low"), SETTINGS, {"AWS_REGION": "us-gov-west-1"}
    )
    assert "display" not in gov["additionalModelRequestFields"]["thinking"]


def test_endpoint_follows_the_configured_region() -> None:
    standard = make_model(API, "https://bedrock-runtime.us-east-1.amazonaws.com", id=CLAUDE)
    assert bedrock_aws.endpoint(standard, {}) == (standard.base_url, "us-east-1")
    assert bedrock_aws.endpoint(standard, {"AWS_REGION": "eu-west-1"}) == (
        "https://bedrock-runtime.eu-west-1.amazonaws.com",
        "eu-west-1",
    )
    custom = make_model(API, "http://proxy.local:8080", id=CLAUDE)
    assert bedrock_aws.endpoint(custom, {"AWS_DEFAULT_REGION": "ap-south-1"}) == (
        "http://proxy.local:8080",
        "ap-south-1",
    )


# -- the parser ------------------------------------------------------------------------------


def test_parser_text_usage_and_cost() -> None:
    model = make_model(API, id=CLAUDE)
    usage = {"inputTokens": 1000, "outputTokens": 100, "cacheReadInputTokens": 400,
             "cacheWriteInputTokens": 200, "totalTokens": 1700}  # fmt: skip
    events = parse(BedrockParser(model), es.text_stream("Hel", "lo!", usage=usage))
    assert kinds(events) == ["start", "text_start", "text_delta", "text_end", "done"]
    message = final(events)
    assert message.content == (TextContent(text="Hello!"),)
    assert message.stop_reason == "stop"
    assert (message.usage.input, message.usage.output) == (1000, 100)
    assert (message.usage.cache_read, message.usage.cache_write) == (400, 200)
    # $2/M input, $10/M output, $0.5/M cache read, $2.5/M cache write
    assert message.usage.cost.total == pytest.approx((2000 + 1000 + 200 + 500) / 1e6)


def test_parser_tool_call_and_thinking() -> None:
    body = es.event("messageStart", {"role": "assistant"})
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0,
                     "delta": {"reasoningContent": {"text": "Let me "}}})  # fmt: skip
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0,
                     "delta": {"reasoningContent": {"text": "look."}}})  # fmt: skip
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0,
                     "delta": {"reasoningContent": {"signature": "c2ln"}}})  # fmt: skip
    body += es.event("contentBlockStop", {"contentBlockIndex": 0})
    body += es.event("contentBlockStart", {"contentBlockIndex": 1,
                     "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "read"}}})  # fmt: skip
    for piece in ('{"pa', 'th": "a.txt"}'):
        body += es.event("contentBlockDelta", {"contentBlockIndex": 1,
                         "delta": {"toolUse": {"input": piece}}})  # fmt: skip
    body += es.event("contentBlockStop", {"contentBlockIndex": 1})
    body += es.event("messageStop", {"stopReason": "tool_use"})
    body += es.event("metadata", {"usage": {"inputTokens": 5, "outputTokens": 7}})
    events = parse(BedrockParser(make_model(API, id=CLAUDE)), body)
    message = final(events)
    assert message.stop_reason == "toolUse"
    assert message.content == (
        ThinkingContent(thinking="Let me look.", thinking_signature="c2ln"),
        ToolCall(id="tooluse_1", name="read", arguments={"path": "a.txt"}),
    )


def test_parser_exception_frame_and_cut_stream() -> None:
    model = make_model(API, id=CLAUDE)
    body = es.event("messageStart", {"role": "assistant"})
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hi"}})
    body += es.exception("throttlingException", "Too many tokens, please wait.")
    message = final(parse(BedrockParser(model), body))
    assert message.stop_reason == "error"
    assert message.error_message == "Throttling error: Too many tokens, please wait."
    assert message.content == (TextContent(text="Hi"),)
    cut = final(parse(BedrockParser(model), body[: body.index(b"\x00\x00", 30)]))
    assert cut.error_message is not None and "ended without messageStop" in cut.error_message
    assert (
        final(parse(BedrockParser(model), es.text_stream("x", stop="max_tokens"))).stop_reason
        == "length"
    )


def test_damaged_frame_is_refused() -> None:
    frame = bytearray(es.event("messageStart", {"role": "assistant"}))
    frame[-6] ^= 0xFF  # inside the payload: the message CRC no longer matches
    with pytest.raises(bedrock_aws.FrameError):
        bedrock_aws.FrameDecoder().feed(bytes(frame))


# -- over HTTP -------------------------------------------------------------------------------


async def test_streams_signed_request_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(es.stream_reply(es.text_stream("Hello", " world!"), chunk_size=5))
    model = make_model(API, server.base_url, id=CLAUDE)
    events = await collect(provider(pool), model)
    message = final(events)
    assert message.content == (TextContent(text="Hello world!"),)
    assert (message.usage.input, message.usage.output) == (10, 5)
    [request] = server.requests
    assert request.path == "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"
    assert "accept" not in request.headers  # pi's AWS client names no format
    assert request.json()["messages"][0]["content"][0] == {"text": "hello"}
    verify_sigv4(request, "eu-west-1")


async def test_session_token_and_bearer_token(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(es.stream_reply(es.text_stream("a")), es.stream_reply(es.text_stream("b")))
    model = make_model(API, server.base_url, id=CLAUDE)
    await collect(provider(pool, {**AWS_ENV, "AWS_SESSION_TOKEN": "tok123"}), model)
    await collect(provider(pool, {"AWS_BEARER_TOKEN_BEDROCK": "bedrock-key"}), model)
    first, second = server.requests
    assert first.headers["x-amz-security-token"] == "tok123"
    assert "x-amz-security-token" in first.headers["authorization"]
    assert second.headers["authorization"] == "Bearer bedrock-key"


async def test_a_configured_api_key_goes_as_a_bearer_token(
    server: LoopbackServer, pool: HttpPool
) -> None:
    # pi 1.6.0: a Bedrock API key (models.json apiKey) wins over the AWS credentials.
    server.push(es.stream_reply(es.text_stream("a")))
    model = make_model(API, server.base_url, id=CLAUDE)
    creds = Credentials(auth_path=None, env=AWS_ENV, provider_keys={model.provider: "bk-1"})
    await collect(BedrockProvider(pool, creds, SETTINGS), model)
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer bk-1"
    assert "x-amz-date" not in request.headers


async def test_missing_credentials_name_the_variables(
    pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # botocore's own chain must find nothing either: no profile files, no metadata service.
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/pitrio/creds")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/pitrio/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    message = final(await collect(provider(pool, {}), make_model(API, id=CLAUDE)))
    assert message.stop_reason == "error"
    assert message.error_message is not None
    assert "AWS_ACCESS_KEY_ID" in message.error_message


async def test_http_error_bodies_get_pi_prefixes(server: LoopbackServer, pool: HttpPool) -> None:
    # pi's AWS client makes three attempts at a throttled request whatever the provider retry
    # setting says (standard retry mode); a validation error is not repeated.
    throttling = json_error(
        429, {"message": "Too many requests, please wait before trying again."},
        {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/"},
    )  # fmt: skip
    server.push(
        throttling, throttling, throttling,
        json_error(400, {"message": "The model returned the following errors: input is too long"},
                   {"x-amzn-ErrorType": "ValidationException"}),
    )  # fmt: skip
    model = make_model(API, server.base_url, id=CLAUDE)
    throttled = final(await collect(provider(pool), model))
    invalid = final(await collect(provider(pool), model))
    assert (
        throttled.error_message
        == "Throttling error: Too many requests, please wait before trying again."
    )
    assert invalid.error_message == (
        "Validation error: The model returned the following errors: input is too long"
    )
    assert len(server.requests) == 4


async def test_429_with_retry_after_is_retried(server: LoopbackServer) -> None:
    from pitrio.actors.model_router.providers.base import HttpSettings

    server.push(
        json_error(429, {"message": "slow down"},
                   {"x-amzn-ErrorType": "ThrottlingException", "retry-after": "0"}),
        es.stream_reply(es.text_stream("after retry")),
    )  # fmt: skip
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        message = final(
            await collect(provider(retrying), make_model(API, server.base_url, id=CLAUDE))
        )
    finally:
        await retrying.aclose()
    assert message.content == (TextContent(text="after retry"),)
    assert len(server.requests) == 2


async def test_exception_frame_mid_stream_over_http(server: LoopbackServer, pool: HttpPool) -> None:
    body = es.event("messageStart", {"role": "assistant"})
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "par"}})
    body += es.exception("modelStreamErrorException", "The model stopped unexpectedly")
    server.push(es.stream_reply(body))
    message = final(await collect(provider(pool), make_model(API, server.base_url, id=CLAUDE)))
    assert message.error_message == "Model stream error: The model stopped unexpectedly"
    assert message.content == (TextContent(text="par"),)


async def test_not_an_event_stream(server: LoopbackServer, pool: HttpPool) -> None:
    server.push(Reply(body=b"<html>", headers=[("content-type", "text/html")]))
    message = final(await collect(provider(pool), make_model(API, server.base_url, id=CLAUDE)))
    assert message.error_message == (
        "200 Expected application/vnd.amazon.eventstream but got text/html"
    )


async def test_abort_mid_stream_closes_the_connection(
    server: LoopbackServer, pool: HttpPool
) -> None:
    body = es.event("messageStart", {"role": "assistant"})
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "wor"}})
    server.push(es.stream_reply(body, ending="hang"))
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    seen: list[AssistantMessageEvent] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, TextDelta):
                    nursery.cancel_scope.cancel()

        nursery.start_soon(consume)
        model = make_model(API, server.base_url, id=CLAUDE)
        await provider(pool).stream(model, CONTEXT, StreamOptions(), send)
        pytest.fail("the stream should have been cancelled")  # pragma: no cover
    assert not any(isinstance(e, StreamError) for e in seen)
    assert seen[-1].type == "text_delta"
    with trio.fail_after(5):
        await server.client_gone.wait()


async def test_missing_botocore_names_the_pip_command(
    server: LoopbackServer, pool: HttpPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    for name in [m for m in sys.modules if m == "botocore" or m.startswith("botocore.")]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now fails
    monkeypatch.setitem(sys.modules, "botocore", None)
    message = final(await collect(provider(pool), make_model(API, server.base_url, id=CLAUDE)))
    assert message.stop_reason == "error"
    assert message.error_message == (
        "The bedrock-converse-stream API needs botocore: pip install 'pitrio[bedrock]'"
    )
    assert server.requests == []


async def test_end_to_end_through_the_model_router(tmp_path: Path) -> None:
    """A models.json provider of this api is routed to the adapter, signed, and answered."""
    from pitrio.actors.model_router import start_model_router
    from tests.actors.test_model_router_config import collect as router_collect
    from tests.actors.test_model_router_config import config, write_models

    async with loopback_server() as server, trio.open_nursery() as nursery:
        write_models(
            tmp_path,
            {"providers": {"aws-proxy": {"baseUrl": server.base_url, "api": API,
                                         "models": [{"id": CLAUDE}]}}},
        )  # fmt: skip
        router = await start_model_router(nursery, config=config(tmp_path, AWS_ENV))
        model = await router.resolve(f"aws-proxy/{CLAUDE}")
        assert await router.availability(model) is None
        server.push(es.stream_reply(es.text_stream("routed"), chunk_size=3))
        events = await router_collect(router, model)
        assert isinstance(events[-1], StreamDone)
        assert events[-1].message.content == (TextContent(text="routed"),)
        assert events[-1].message.api == API
        verify_sigv4(server.requests[0], "eu-west-1")
        await router.aclose()


async def test_profile_from_the_aws_files_through_botocore_chain(
    server: LoopbackServer, pool: HttpPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No key variables: botocore's chain reads the named profile's keys and region."""
    (tmp_path / "credentials").write_text(
        f"[dev]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    (tmp_path / "config").write_text("[profile dev]\nregion = ap-southeast-2\n")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(bedrock_aws, "_CHAIN", {})
    server.push(es.stream_reply(es.text_stream("from profile")))
    model = make_model(API, server.base_url, id=CLAUDE)
    message = final(await collect(provider(pool, {"AWS_PROFILE": "dev"}), model))
    assert message.content == (TextContent(text="from profile"),)
    verify_sigv4(server.requests[0], "ap-southeast-2")


async def test_unknown_image_type_fails_before_sending(
    server: LoopbackServer, pool: HttpPool
) -> None:
    image = ImageContent(data="Qk0=", mime_type="image/bmp")
    context = LlmContext(system_prompt=None, messages=(user_message("see", (image,), timestamp=1),))
    model = make_model(API, server.base_url, id=CLAUDE)
    message = final(await collect(provider(pool), model, context))
    assert (message.stop_reason, message.error_message) == (
        "error",
        "Unknown image type: image/bmp",
    )
    assert server.requests == []
