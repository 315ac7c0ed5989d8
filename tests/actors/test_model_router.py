"""The model registry (pure) and the ModelRouter actor behind its handle."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.model_router import (
    FAUX_MODELS,
    EventSender,
    FauxProvider,
    FauxReply,
    ModelRegistry,
    ModelRouterHandle,
    start_model_router,
)
from pitrio.errors import ActorStoppedError, UnknownModelError
from pitrio.messages import TextContent, user_message
from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError


def model(provider: str, id: str, api: str = "test-api") -> Model:
    return Model(
        id=id,
        name=id,
        api=api,
        provider=provider,
        base_url="http://example.invalid",
        reasoning=False,
        input=("text",),
        cost=ModelCost(),
        context_window=1000,
        max_tokens=100,
    )


async def noop_stream(
    model: Model, context: LlmContext, options: StreamOptions, send: EventSender
) -> None:
    """A stream function that sends nothing (only its identity matters in registry tests)."""


CTX = LlmContext(system_prompt="", messages=(user_message("hello router", timestamp=1),))


async def collect(
    router: ModelRouterHandle, target: Model, ctx: LlmContext = CTX
) -> list[AssistantMessageEvent]:
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    await router.stream(target, ctx, StreamOptions(), send)
    send.close()
    return [event async for event in receive]


# -- registry --------------------------------------------------------------------------------


def test_builtin_faux_models() -> None:
    by_id = {m.id: m for m in FAUX_MODELS}
    assert [m.id for m in FAUX_MODELS] == ["faux-1", "faux-think", "faux-small", "echo"]
    for m in FAUX_MODELS:
        assert (m.provider, m.api, m.base_url, m.cost) == (
            "faux",
            "faux-api",
            "http://localhost:0",
            ModelCost(),
        )
    assert (by_id["echo"].reasoning, by_id["echo"].input) == (False, ("text", "image"))
    assert (by_id["echo"].context_window, by_id["echo"].max_tokens) == (128000, 16384)
    assert (by_id["faux-1"].reasoning, by_id["faux-1"].input) == (False, ("text", "image"))
    assert (by_id["faux-1"].context_window, by_id["faux-1"].max_tokens) == (128000, 16384)
    assert (by_id["faux-think"].reasoning, by_id["faux-think"].input) == (True, ("text",))
    assert (by_id["faux-think"].context_window, by_id["faux-think"].max_tokens) == (200000, 16384)
    assert (by_id["faux-small"].reasoning, by_id["faux-small"].input) == (False, ("text",))
    assert (by_id["faux-small"].context_window, by_id["faux-small"].max_tokens) == (20000, 4096)
    assert by_id["faux-1"].name == "Faux One"


def test_registry_resolve() -> None:
    registry = ModelRegistry()
    registry.register_all(FAUX_MODELS, noop_stream)
    assert registry.resolve("faux/faux-1") is FAUX_MODELS[0]
    assert registry.resolve("faux-think") is FAUX_MODELS[1]  # bare and unambiguous
    with pytest.raises(UnknownModelError, match=r"^Unknown model: foo/bar$"):
        registry.resolve("foo/bar")
    with pytest.raises(UnknownModelError, match=r"^Unknown model: nope$"):
        registry.resolve("nope")


def test_registry_ids_with_slashes_and_ambiguity() -> None:
    registry = ModelRegistry()
    routed = model("openrouter", "anthropic/claude")
    registry.register(routed, noop_stream)
    registry.register(model("a", "shared"))
    registry.register(model("b", "shared"))
    assert registry.resolve("openrouter/anthropic/claude") is routed
    assert registry.resolve("anthropic/claude") is routed  # the bare id contains a slash
    with pytest.raises(UnknownModelError, match="Ambiguous model: shared"):
        registry.resolve("shared")
    assert registry.resolve("b/shared").provider == "b"


def test_registry_list_and_replace() -> None:
    registry = ModelRegistry()
    first, second = model("p", "one"), model("p", "two")
    registry.register(first, noop_stream)
    registry.register(second)
    replacement = model("p", "one", api="other-api")
    registry.register(replacement)
    assert registry.list() == (replacement, second)  # replaced in place, order kept
    assert registry.resolve("one") is replacement
    assert registry.find("p", "two") is second
    assert registry.find("p", "three") is None


def test_registry_stream_fn_by_api() -> None:
    registry = ModelRegistry()
    registry.register(model("p", "one"), noop_stream)
    registry.register(model("p", "two"))  # same api: served by the same function
    assert registry.stream_fn(model("p", "two")) is noop_stream
    with pytest.raises(UnknownModelError, match="No provider"):
        registry.stream_fn(model("p", "x", api="missing-api"))
    registry.register_api("missing-api", noop_stream)
    assert registry.stream_fn(model("p", "x", api="missing-api")) is noop_stream


# -- actor -----------------------------------------------------------------------------------


async def test_router_resolve_list_register() -> None:
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery)
        assert await router.resolve("faux/echo") is FAUX_MODELS[3]
        # The faux models come first (pi's listing order), then the catalogue.
        assert (await router.list_models())[: len(FAUX_MODELS)] == FAUX_MODELS
        with pytest.raises(UnknownModelError, match=r"^Unknown model: foo/bar$"):
            await router.resolve("foo/bar")
        # The actor survives a failed command.
        extra = model("test", "extra")
        await router.register(extra, noop_stream)
        assert await router.resolve("test/extra") is extra
        assert await router.stream_fn(extra) is noop_stream
        assert (await router.list_models())[-1] is extra
        with pytest.raises(UnknownModelError):
            await router.stream_fn(model("test", "y", api="unknown-api"))
        await router.aclose()


async def test_router_stops_with_its_handles() -> None:
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery)
        await router.aclose()
    with pytest.raises(ActorStoppedError):
        await router.list_models()


async def test_router_stream_uses_the_given_faux() -> None:
    faux = FauxProvider([FauxReply(text="scripted")])
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux)
        events = await collect(router, FAUX_MODELS[0])
        assert isinstance(events[-1], StreamDone)
        assert events[-1].message.content == (TextContent(text="scripted"),)
        # Queue empty: the echo model repeats the last user message.
        echo = await router.resolve("faux/echo")
        events = await collect(router, echo)
        assert events[-1].message.content == (TextContent(text="hello router"),)  # type: ignore[union-attr]
        assert [r.model.id for r in faux.requests] == ["faux-1", "echo"]
        await router.aclose()


async def test_stream_runs_in_the_callers_task() -> None:
    tasks: list[trio.lowlevel.Task] = []

    async def spy(m: Model, ctx: LlmContext, options: StreamOptions, send: EventSender) -> None:
        tasks.append(trio.lowlevel.current_task())
        await FauxProvider(["spied"]).stream(m, ctx, options, send)

    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery)
        target = model("spy", "m", api="spy-api")
        await router.register(target, spy)
        events = await collect(router, target)
        assert tasks == [trio.lowlevel.current_task()]
        assert events[-1].type == "done"
        await router.aclose()


async def test_stream_functions_are_read_without_a_round_trip() -> None:
    calls: list[str] = []

    def provider(text: str) -> Any:
        async def stream(
            m: Model, ctx: LlmContext, options: StreamOptions, send: EventSender
        ) -> None:
            calls.append(text)
            await FauxProvider([text]).stream(m, ctx, options, send)

        return stream

    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery)
        target = model("pub", "m", api="pub-api")
        await router.register(target, provider("first"))
        received = router.stats().received
        await collect(router, target)
        await collect(router, target)
        assert router.stats().received == received  # the published function, no command
        await router.register(model("pub", "n", api="pub-api"), provider("second"))
        events = await collect(router, target)  # the replacement, as soon as it was awaited
        assert calls == ["first", "first", "second"]
        assert events[-1].message.content == (TextContent(text="second"),)  # type: ignore[union-attr]
        await router.aclose()


async def test_stream_converts_a_raising_provider_to_an_error_event() -> None:
    async def broken(m: Model, ctx: LlmContext, options: StreamOptions, send: EventSender) -> None:
        raise ValueError("provider blew up")

    async def broken_in_group(
        m: Model, ctx: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        async with trio.open_nursery():
            raise KeyError("inside a nursery")

    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery)
        target = model("broken", "m", api="broken-api")
        await router.register(target, broken)
        events = await collect(router, target)
        assert len(events) == 1
        error = events[0]
        assert isinstance(error, StreamError)
        assert error.reason == "error"
        assert error.error.stop_reason == "error"
        assert error.error.error_message == "provider blew up"
        assert (error.error.provider, error.error.model) == ("broken", "m")

        grouped = model("broken", "g", api="group-api")
        await router.register(grouped, broken_in_group)
        events = await collect(router, grouped)
        assert events[-1].error.error_message == "'inside a nursery'"  # type: ignore[union-attr]

        # No provider for the api at all: also an error event, not an exception.
        events = await collect(router, model("nobody", "m", api="no-api"))
        assert events[-1].type == "error"
        assert "No provider" in (events[-1].error.error_message or "")
        await router.aclose()


async def test_abort_of_the_callers_scope_stops_the_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    faux = FauxProvider([FauxReply(text="long " * 50, chunk_delay=0.015)])
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux)
        send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
        with trio.move_on_after(0.05) as scope:
            await router.stream(FAUX_MODELS[0], CTX, StreamOptions(), send)
        assert scope.cancelled_caught
        send.close()
        events = [event async for event in receive]
        # 0.05 s at 0.015 s per chunk: three deltas went out, then nothing (no done, no error).
        assert [e.type for e in events] == ["start", "text_start"] + ["text_delta"] * 3
        # The router itself is unaffected.
        assert await router.resolve("faux-1") is FAUX_MODELS[0]
        await router.aclose()
