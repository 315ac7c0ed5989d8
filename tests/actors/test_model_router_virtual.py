"""Virtual models: routing by reason, the fallback chain, state, and streaming through them."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio

from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    ModelRouter,
    RouterConfig,
    RouteRequest,
    VirtualModelState,
    start_model_router,
    state_entry_data,
    state_from_entry_data,
)
from pitrio.actors.model_router.virtual import route
from pitrio.errors import VirtualRoutingError
from pitrio.messages import AssistantMessage, ToolCall, ToolResultMessage, Usage, user_message
from pitrio.messages.content import TextContent
from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError


def router_with(tmp_path: Path, models: list[dict[str, Any]], env: dict[str, str] | None = None,
                faux: FauxProvider | None = None) -> ModelRouter:  # fmt: skip
    document = {"providers": {"smart": {"api": "pi-virtual", "models": models}}}
    (tmp_path / "models.json").write_bytes(orjson.dumps(document))
    config = RouterConfig(agent_dir=tmp_path, env=env or {})
    return ModelRouter.from_config(config, faux)


CODER = {
    "id": "coder",
    "fallback": [
        "faux/faux-think:high",
        "faux/faux-1",
        "anthropic/claude-sonnet-4-5",
        "faux/faux-small",
    ],
    "routes": {"direct": "faux/echo"},
    "reasoning": True,
}


def failed(model: str, text: str = "529 overloaded_error: Overloaded") -> AssistantMessage:
    return AssistantMessage(
        content=(),
        api="faux-api",
        provider="faux",
        model=model,
        usage=Usage(),
        stop_reason="error",
        error_message=text,
        timestamp=1,
    )


def setup(tmp_path: Path, models: list[dict[str, Any]] | None = None) -> tuple[ModelRouter, Any]:
    router = router_with(tmp_path, models or [CODER])
    virtual = router.registry.resolve("smart/coder")
    spec = router.registry.virtual_spec(virtual)
    assert spec is not None and not router.problems()
    return router, spec


def test_virtual_model_descriptor_takes_limits_from_the_primary(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    model = spec.model
    assert (model.api, model.provider, model.reasoning) == ("pi-virtual", "smart", True)
    assert model.context_window == 200000  # faux-think's
    assert router.availability(model) is None


def test_user_reason_uses_the_primary_with_its_thinking_level(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    result = route(spec, RouteRequest(reason="user", thinking_level="low"), router.candidate)
    assert result.model.ref == "faux/faux-think"
    assert result.thinking_level == "high"  # the pattern's level wins
    assert (result.state, result.notice, result.compact_first) == (None, None, False)


def test_user_route_and_level_clamped_to_the_physical_model(tmp_path: Path) -> None:
    router, spec = setup(tmp_path, [{**CODER, "routes": {"user": "faux/faux-1"}}])
    result = route(spec, RouteRequest(reason="user", thinking_level="high"), router.candidate)
    assert (result.model.ref, result.thinking_level) == ("faux/faux-1", "off")


def test_continuation_keeps_the_previous_physical_model(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    previous = router.registry.resolve("faux/faux-1")
    result = route(spec, RouteRequest(reason="continuation", previous=previous), router.candidate)
    assert result.model.ref == "faux/faux-1"
    stranger = router.registry.resolve("openai/gpt-5")  # not one of coder's models
    result = route(spec, RouteRequest(reason="continuation", previous=stranger), router.candidate)
    assert result.model.ref == "faux/faux-think"


def test_retry_repeats_the_failed_model_unless_escalated(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    again = route(spec, RouteRequest(reason="retry", failed=failed("faux-1")), router.candidate)
    assert again.model.ref == "faux/faux-1" and again.state is None
    escalated = route(
        spec,
        RouteRequest(reason="retry", failed=failed("faux-think"), escalate=True),
        router.candidate,
    )
    assert escalated.model.ref == "faux/faux-1"
    assert escalated.state == VirtualModelState(active=1, reason="retries exhausted")
    assert escalated.notice == (
        "smart/coder: falling back from faux/faux-think to faux/faux-1 (retries exhausted)"
    )
    assert escalated.compact_first is True  # 200000 -> 128000 tokens


def test_escalation_skips_unavailable_models_and_announces_it(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    state = VirtualModelState(active=1)
    overflow = failed("faux-1", "400 prompt is too long: 130000 tokens > 128000 maximum")
    result = route(
        spec,
        RouteRequest(reason="retry", failed=overflow, escalate=True, state=state),
        router.candidate,
    )
    # anthropic/claude-sonnet-4-5 has no key here: skipped, and said so.
    assert result.model.ref == "faux/faux-small"
    assert result.state == VirtualModelState(active=3, reason="context overflow")
    assert result.notice == (
        "smart/coder: falling back from faux/faux-1 to faux/faux-small (context overflow); "
        "smart/coder: anthropic/claude-sonnet-4-5 is unavailable "
        "(no API key for provider anthropic); smart/coder: using faux/faux-small"
    )
    assert result.compact_first is True
    # The fallback sticks for later user requests on this branch.
    later = route(spec, RouteRequest(reason="user", state=result.state), router.candidate)
    assert later.model.ref == "faux/faux-small" and later.state is None
    with pytest.raises(VirtualRoutingError, match="fallback chain of smart/coder is exhausted"):
        route(
            spec,
            RouteRequest(
                reason="retry", failed=failed("faux-small"), escalate=True, state=result.state
            ),
            router.candidate,
        )


def test_unavailable_primary_falls_back_with_a_notice(tmp_path: Path) -> None:
    models = [{"id": "coder", "fallback": ["anthropic/claude-sonnet-4-5", "faux/faux-1"]}]
    router, spec = setup(tmp_path, models)
    result = route(spec, RouteRequest(reason="user"), router.candidate)
    assert result.model.ref == "faux/faux-1"
    assert result.notice is not None and "no API key for provider anthropic" in result.notice
    with_key = router_with(tmp_path, models, env={"ANTHROPIC_API_KEY": "k"})
    spec2 = with_key.registry.virtual_spec(with_key.registry.resolve("smart/coder"))
    assert spec2 is not None
    assert route(spec2, RouteRequest(reason="user"), with_key.candidate).model.ref == (
        "anthropic/claude-sonnet-4-5"
    )
    only_missing = [{"id": "coder", "fallback": ["anthropic/claude-sonnet-4-5"]}]
    router3, spec3 = setup(tmp_path, only_missing)
    with pytest.raises(VirtualRoutingError, match="No model of smart/coder is available"):
        route(spec3, RouteRequest(reason="user"), router3.candidate)


def test_direct_requests_ignore_and_return_no_state(tmp_path: Path) -> None:
    router, spec = setup(tmp_path)
    result = route(
        spec,
        RouteRequest(reason="direct", state=VirtualModelState(active=3)),
        router.candidate,
    )
    assert result.model.ref == "faux/echo" and result.state is None


@pytest.mark.parametrize(
    ("fallback", "field", "problem"),
    [
        (["faux/nope"], "fallback[0]", "unknown model 'faux/nope'"),
        (["smart/other"], "fallback[0]", "'smart/other' is virtual"),
    ],
)
def test_bad_virtual_references_are_reported(
    tmp_path: Path, fallback: list[str], field: str, problem: str
) -> None:
    router = router_with(
        tmp_path,
        [{"id": "other", "fallback": ["faux/faux-1"]}, {"id": "coder", "fallback": fallback}],
    )
    (message,) = router.problems()
    assert message.startswith(f"{tmp_path / 'models.json'}: providers.smart.models[1].{field}: ")
    assert problem in message


def test_state_entry_round_trip() -> None:
    virtual = Model(id="coder", name="c", api="pi-virtual", provider="smart", base_url="",
                    reasoning=False, input=("text",), cost=ModelCost(), context_window=1,
                    max_tokens=1)  # fmt: skip
    state = VirtualModelState(active=2, reason="context overflow")
    data = state_entry_data(virtual, state)
    assert data == {
        "provider": "smart",
        "modelId": "coder",
        "state": {"active": 2, "reason": "context overflow"},
    }
    assert state_from_entry_data(data, virtual) == state
    assert state_from_entry_data({**data, "modelId": "x"}, virtual) is None
    assert state_from_entry_data({**data, "state": "junk"}, virtual) == VirtualModelState()


async def collect(router: Any, model: Model, context: LlmContext) -> list[AssistantMessageEvent]:
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    async with send:
        await router.stream(model, context, StreamOptions(reasoning="medium"), send)
    return [event async for event in receive]


async def test_streaming_a_virtual_model_records_the_physical_one(tmp_path: Path) -> None:
    models = [{**CODER, "routes": {"continuation": "faux/faux-small"}}]
    document = {"providers": {"smart": {"api": "pi-virtual", "models": models}}}
    (tmp_path / "models.json").write_bytes(orjson.dumps(document))
    faux = FauxProvider([FauxReply(text="first"), FauxReply(text="second")])
    async with trio.open_nursery() as nursery:
        handle = await start_model_router(
            nursery, faux, config=RouterConfig(agent_dir=tmp_path, env={})
        )
        virtual = await handle.resolve("smart/coder")
        context = LlmContext(system_prompt="", messages=(user_message("hi", timestamp=1),))
        events = await collect(handle, virtual, context)
        done = events[-1]
        assert isinstance(done, StreamDone)
        assert (done.message.provider, done.message.model) == ("faux", "faux-think")
        assert faux.requests[-1].options.reasoning == "high"
        call = ToolCall(id="c1", name="t", arguments={})
        after_tools = LlmContext(
            system_prompt="",
            messages=(
                *context.messages,
                attrs.evolve(done.message, content=(call,), stop_reason="toolUse"),
                ToolResultMessage(tool_call_id="c1", tool_name="t",
                                  content=(TextContent(text="ok"),), is_error=False, timestamp=2),
            ),
        )  # fmt: skip
        events = await collect(handle, virtual, after_tools)
        assert events[-1].message.model == "faux-small"  # type: ignore[union-attr]
        # Routing failures become an error message attributed to the virtual model.
        broken = attrs.evolve(virtual, id="ghost")
        events = await collect(handle, broken, context)
        error = events[-1]
        assert isinstance(error, StreamError)
        assert (error.error.provider, error.error.model) == ("smart", "ghost")
        assert "not a virtual model" in (error.error.error_message or "")
        await handle.aclose()
