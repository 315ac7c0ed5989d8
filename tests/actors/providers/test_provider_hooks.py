"""The provider side of pi 1.6.0's provider-request hooks (``model_router/provider_hooks.py``
and ``HttpProvider``), with a recording hooks object and the loopback vendor: the request
stages run once per request (a repeated try reuses their result), every HTTP answer is
reported, and stream events arrive before the parser's events, in order."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.model_router import provider_hooks
from pitrio.actors.model_router.providers.base import HttpSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages.model import StreamOptions
from tests.actors.providers.loopback import LoopbackServer, json_error, recording, sse
from tests.actors.providers.support import collect, final, make_model, make_provider

API = "openai-completions"


class Recorder:
    """Hooks that record each stage and change the request as a handler would."""

    def __init__(self, stages: set[str]) -> None:
        self.stages = stages
        self.calls: list[tuple[str, Any]] = []

    def wants(self, stage: str) -> bool:
        return stage in self.stages

    async def headers(self, headers: dict[str, str | None]) -> None:
        await trio.lowlevel.checkpoint()
        self.calls.append(("headers", dict(headers)))
        headers["x-added"] = "yes"
        headers["authorization"] = None

    async def payload(self, payload: Any) -> Any:
        await trio.lowlevel.checkpoint()
        self.calls.append(("payload", payload.get("model")))
        return {**payload, "temperature": 0.25}

    async def response(self, status: int, headers: dict[str, str]) -> None:
        await trio.lowlevel.checkpoint()
        self.calls.append(("response", status))

    async def stream_event(self, provider: str, api: str, model: str, data: Any) -> None:
        await trio.lowlevel.checkpoint()
        self.calls.append(("event", (provider, api, model, data)))


async def test_request_stages_run_once_and_every_answer_is_reported(
    server: LoopbackServer, autojump_clock: trio.testing.MockClock
) -> None:
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    hooks = Recorder(
        {
            provider_hooks.HEADERS,
            provider_hooks.PAYLOAD,
            provider_hooks.RESPONSE,
            provider_hooks.STREAM_EVENT,
        }
    )
    try:
        server.push(
            json_error(503, {"error": {"message": "busy"}}, {"retry-after": "1"}),
            sse(recording("openai_completions_text.sse")),
        )
        model = make_model(API, f"{server.base_url}/v1")
        events = await collect(
            make_provider(API, retrying), model, options=StreamOptions(hooks=hooks)
        )
    finally:
        await retrying.aclose()
    assert final(events).stop_reason == "stop"
    stages = [name for name, _ in hooks.calls]
    assert stages[:4] == ["headers", "payload", "response", "response"]
    assert set(stages[4:]) == {"event"}
    assert [value for name, value in hooks.calls if name == "response"] == [503, 200]
    for request in server.requests:  # the repeat sends what the hooks made of the first
        assert request.headers["x-added"] == "yes" and "authorization" not in request.headers
        assert request.json()["temperature"] == 0.25
    first = hooks.calls[4][1]
    assert first[:3] == ("test", API, "test-model") and isinstance(first[3], dict)
    assert hooks.calls[-1][1][3] == "[DONE]"  # not JSON: the text


async def test_a_stage_nobody_wants_is_never_called(server: LoopbackServer, pool: HttpPool) -> None:
    hooks = Recorder(set())
    server.push(sse(recording("openai_completions_text.sse")))
    model = make_model(API, f"{server.base_url}/v1")
    events = await collect(make_provider(API, pool), model, options=StreamOptions(hooks=hooks))
    assert final(events).stop_reason == "stop"
    assert hooks.calls == []
    assert "temperature" not in server.requests[0].json()


@pytest.mark.parametrize(
    ("data", "seen"), [('{"a": 1}', {"a": 1}), ("[DONE]", "[DONE]"), ("{broken", "{broken")]
)
def test_event_data_is_json_when_it_is_json(data: str, seen: Any) -> None:
    assert provider_hooks.event_data(data) == seen


def test_applied_headers_drop_removed_ones() -> None:
    assert provider_hooks.applied_headers({"a": "1", "b": None}) == {"a": "1"}
