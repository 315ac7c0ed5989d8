"""The harness's provider-kind dimension on its own (no pi needed).

Each loopback vendor's answers are read back by pitrio's parser of that API (parsers tested
against the vendors' recorded streams): a vendor that spoke a wrong dialect would make the
differential comparison meaningless. Also the choice of (kind, scenario) pairs and the
normalisation of headers and system prompts.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from pitrio.actors.model_router.providers import bedrock_aws
from pitrio.actors.model_router.providers.anthropic import AnthropicParser
from pitrio.actors.model_router.providers.bedrock_converse_stream import BedrockParser
from pitrio.actors.model_router.providers.google import GoogleParser
from pitrio.actors.model_router.providers.mistral import MistralParser
from pitrio.actors.model_router.providers.openai_codex_responses import account_id
from pitrio.actors.model_router.providers.openai_responses_stream import OpenAIResponsesParser
from pitrio.actors.model_router.providers.sse import SseParser
from pitrio.messages import TextContent, ThinkingContent, ToolCall
from pitrio.messages.stream import AssistantMessageEvent
from tests.actors.providers.support import final, make_model, parse_all
from tests.interop import pi_wire
from tests.interop.pi_compare_kinds import headers, system_prompt
from tests.interop.pi_kinds import (
    BODY_SCENARIOS,
    KIND_SCENARIOS,
    KINDS,
    KINDS_ENV,
    UNFIT,
    matrix,
)
from tests.interop.pi_scenarios import SCENARIOS

PARSERS: dict[str, Any] = {
    "anthropic": (AnthropicParser, "anthropic-messages"),
    "responses": (OpenAIResponsesParser, "openai-responses"),
    "google": (GoogleParser, "google-generative-ai"),
    "mistral": (MistralParser, "mistral-conversations"),
    "bedrock": (BedrockParser, "bedrock-converse-stream"),
}


def _body(wire: pi_wire.Wire) -> bytes:
    return b"".join([*wire.head, *wire.deltas, *wire.tail])


def _parse(family: str, wire: pi_wire.Wire) -> list[AssistantMessageEvent]:
    cls, api = PARSERS[family]
    parser: SseParser = cls(make_model(api, reasoning=True, id="mock-vision"))
    if family != "bedrock":
        return parse_all(parser, _body(wire))
    out: list[AssistantMessageEvent] = []
    for frame in bedrock_aws.FrameDecoder().feed(_body(wire)):
        out += parser.feed(frame.event, frame.payload.decode())
    return out + parser.end()


@pytest.mark.parametrize("family", sorted(pi_wire.ENCODERS))
def test_each_vendor_speaks_its_api(family: str) -> None:
    spec = {
        "kind": "tool_call",
        "name": "read",
        "arguments": {"path": "hello.txt"},
        "id": "call_fixed1",
        "text_before": "Reading.",
        "thinking": "Let me look.",
        "usage": {"prompt_tokens": 100, "completion_tokens": 10},
    }
    answer = pi_wire.read_answer(spec, 3, "mock-vision", 400)
    message = final(_parse(family, pi_wire.ENCODERS[family](answer)))
    blocks = message.content
    assert [type(b) for b in blocks] == [ThinkingContent, TextContent, ToolCall]
    assert isinstance(blocks[0], ThinkingContent) and blocks[0].thinking == "Let me look."
    assert isinstance(blocks[1], TextContent) and blocks[1].text == "Reading."
    call = blocks[2]
    assert isinstance(call, ToolCall)
    assert (call.name, call.arguments) == ("read", {"path": "hello.txt"})
    assert call.id.split("|")[0] == "call_fixed1"
    assert message.stop_reason == "toolUse"
    assert (message.usage.input, message.usage.output) == (100, 10)


@pytest.mark.parametrize("family", sorted(pi_wire.ENCODERS))
def test_text_in_pieces_and_a_length_stop(family: str) -> None:
    spec = {"kind": "text", "text": "alpha beta gamma", "deltas": 3, "finish_reason": "length"}
    wire = pi_wire.ENCODERS[family](pi_wire.read_answer(spec, 0, "mock-vision", 40))
    assert len(wire.deltas) == 3  # paced one by one when the spec has a delay
    message = final(_parse(family, wire))
    assert [b.text for b in message.content if isinstance(b, TextContent)] == ["alpha beta gamma"]
    assert message.stop_reason == "length"


@pytest.mark.parametrize("family", sorted(pi_wire.ENCODERS))
def test_errors_are_the_vendors_json(family: str) -> None:
    status, head, body = pi_wire.error(family, {"kind": "error", "preset": "rate_limit"})
    assert status == 429 and head["Content-Type"] == "application/json"
    assert "Rate limit reached" in body.decode()


def test_the_codex_token_names_an_account_for_both_decoders() -> None:
    token = KINDS["openai-codex-responses"].api_key
    assert account_id(token) == "acct_mock"
    payload = token.split(".")[1]
    assert json.loads(base64.b64decode(payload))["https://api.openai.com/auth"] == {
        "chatgpt_account_id": "acct_mock"
    }  # atob's alphabet, as pi reads it


def test_the_kinds_a_run_covers() -> None:
    names = {sc.name for sc in SCENARIOS}
    assert set(BODY_SCENARIOS) <= names
    default = matrix(SCENARIOS, {})
    assert {k for k, _ in default} == set(KINDS)
    own = sum(len(names) for names in KIND_SCENARIOS.values())
    assert len(default) == len(KINDS) * len(BODY_SCENARIOS) + own
    assert ("anthropic-messages", "anthropic_threads") in {(k, sc.name) for k, sc in default}
    assert {n for names in KIND_SCENARIOS.values() for n in names} <= names
    unfit = sum(len(names) for names in UNFIT.values())
    assert len(matrix(SCENARIOS, {KINDS_ENV: "all"})) == len(KINDS) * len(SCENARIOS) - unfit
    assert not set(BODY_SCENARIOS) & {n for names in UNFIT.values() for n in names}
    assert {n for names in UNFIT.values() for n in names} <= names
    assert matrix(SCENARIOS, {KINDS_ENV: "none"}) == []
    two = matrix(SCENARIOS, {KINDS_ENV: "mistral-conversations, google-vertex"})
    assert {k for k, _ in two} == {"mistral-conversations", "google-vertex"}
    with pytest.raises(ValueError, match="unknown kind"):
        matrix(SCENARIOS, {KINDS_ENV: "faux"})


def test_headers_keep_what_matters() -> None:
    sigv4 = (
        "AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/bedrock/aws4_request, "
        "SignedHeaders=host;x-amz-date, Signature=abc"
    )
    raw = {
        "user-agent": "x",
        "x-stainless-os": "Linux",
        "x-api-key": "k",
        "authorization": sigv4,
        "x-amz-date": "20260101T000000Z",
        "accept": "application/json",
    }
    assert headers(raw) == {
        "accept": "application/json",
        "authorization": "AWS4-HMAC-SHA256 us-east-1/bedrock",
        "x-api-key": "k",
    }


@pytest.mark.parametrize(
    "request_body",
    [
        {"system": [{"type": "text", "text": "SP", "cache_control": {}}], "messages": []},
        {"instructions": "SP", "input": []},
        {"input": [{"role": "developer", "content": "SP"}]},
        {"systemInstruction": {"parts": [{"text": "SP"}], "role": "user"}},
        {"messages": [{"role": "system", "content": "SP"}]},
        {"system": [{"text": "SP"}, {"cachePoint": {"type": "default"}}]},
    ],
)
def test_the_system_prompt_is_taken_out_wherever_it_is(request_body: dict[str, Any]) -> None:
    assert system_prompt(request_body) == ["SP"]
    assert "SP" not in json.dumps(request_body)
