"""pi 1.6.0's ``register_virtual_model`` in a Python extension: the model is the session's
own (selectable, listed, routed by the extension's ``route`` before each request), assistant
messages record the physical model, and another session of the same router never sees it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pitrio
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.session.extensions.virtual_models import (
    ExtensionVirtualModel,
    ModelRoute,
    ModelRouteRequest,
    VirtualModelError,
)
from pitrio.messages.agent import AssistantMessage
from tests.actors.test_session_extensions import agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


async def test_a_virtual_model_routes_each_request_through_the_extension(
    tmp_path: Path, agent_dir: Path
) -> None:
    asked: list[tuple[ModelRouteRequest, Any]] = []
    apis: list[Any] = []

    async def route(request: ModelRouteRequest, ctx: Any) -> ModelRoute:
        asked.append((request, ctx))
        if request.reason == "continuation":
            return ModelRoute(model="faux/faux-think", thinking_level="high")
        return ModelRoute(model="faux/faux-1")

    def setup(api: Any) -> None:
        apis.append(api)
        api.register_virtual_model(
            ExtensionVirtualModel(
                provider="router",
                id="smart",
                name="Smart router",
                route=route,
                thinking_levels=("off", "high"),
                context_window=100_000,
            )
        )

    (tmp_path / "proj").mkdir()
    replies = (FauxReply(tool_calls=(FauxToolCall(name="ls"),)), FauxReply(text="done"))
    async with session_with(tmp_path, setup, replies=replies) as h:
        listed = [m.ref for m in await h.session.handle.models("available")]
        await h.session.set_model("router", "smart")
        await h.session.set_thinking_level("high")
        selected = (await h.session.handle.state()).agent.model
        await h.session.prompt("look around")
        requests = list(h.faux.requests)
        messages = await h.session.handle.messages()
        with pytest.raises(VirtualModelError):  # another extension's name: refused
            apis[0]._holder.virtual_models.register(
                ExtensionVirtualModel(provider="router", id="smart", name="x", route=route),
                "/elsewhere.py",
            )
        async with pitrio.create_session(  # another session: the model is not there
            cwd=str(tmp_path / "proj"), model="faux/faux-1", faux=FauxProvider(), persist=False
        ) as other:
            elsewhere = [m.ref for m in await other.handle.models("all")]
    assert "router/smart" in listed and "router/smart" not in elsewhere
    assert selected.ref == "router/smart" and selected.api == "pi-virtual"
    assert [r.reason for r, _ in asked] == ["user", "continuation"]
    assert asked[0][0].model.ref == "router/smart" and asked[0][0].thinking_level == "high"
    assert asked[1][0].previous is not None and asked[1][0].previous.ref == "faux/faux-1"
    assert all(ctx is not None for _, ctx in asked)  # the route gets a ctx
    assert [r.model.ref for r in requests] == ["faux/faux-1", "faux/faux-think"]
    assert [r.options.reasoning for r in requests] == [None, "high"]
    replies_seen = [m for m in messages if isinstance(m, AssistantMessage)]
    assert [(m.provider, m.model) for m in replies_seen] == [
        ("faux", "faux-1"),
        ("faux", "faux-think"),
    ]


async def test_a_failing_route_fails_the_request_and_unregistering_removes_the_model(
    tmp_path: Path, agent_dir: Path
) -> None:
    apis: list[Any] = []

    def route(request: ModelRouteRequest, ctx: Any) -> ModelRoute:
        raise RuntimeError("no route today")

    def setup(api: Any) -> None:
        apis.append(api)
        api.register_virtual_model(
            ExtensionVirtualModel(provider="router", id="broken", name="Broken", route=route)
        )

    (tmp_path / "proj").mkdir()
    async with session_with(tmp_path, setup) as h:
        await h.session.set_model("router", "broken")
        await h.session.prompt("hello")
        messages = await h.session.handle.messages()
        apis[0].unregister_virtual_model("router", "broken")
        listed = [m.ref for m in await h.session.handle.models("all")]
    failed = [m for m in messages if isinstance(m, AssistantMessage)][-1]
    assert failed.stop_reason == "error" and "no route today" in (failed.error_message or "")
    assert "router/broken" not in listed
