"""pi 1.6.0's ``ctx`` members beyond the first set (issue 35 item 5): ``thinking_level()``,
``get_context_usage()`` and ``model_registry`` (``get_all``, ``get_available``, ``find``),
seen from a command handler of a running session on the faux model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from pitrio.actors.model_router import FauxReply
from pitrio.actors.session.extensions.asks import ModelScope, ScopedModel
from pitrio.actors.session.extensions.context import ContextUsage
from pitrio.messages.agent import AssistantMessage, user_message
from pitrio.messages.content import text_of
from pitrio.messages.model import LlmContext, StreamOptions
from tests.actors.test_session_extensions import agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


async def test_thinking_level_context_usage_and_the_model_registry(
    tmp_path: Path, agent_dir: Path
) -> None:
    seen: dict[str, Any] = {}

    def setup(api: Any) -> None:
        async def probe(args: str, ctx: Any) -> None:
            seen[args] = {
                "level": await ctx.thinking_level(),
                "usage": await ctx.get_context_usage(),
                "found": await ctx.model_registry.find("faux", "faux-1"),
                "missing": await ctx.model_registry.find("faux", "no-such-model"),
                "all": [m.ref for m in await ctx.model_registry.get_all()],
                "available": [m.ref for m in await ctx.model_registry.get_available()],
            }

        api.register_command("probe", probe)

    async with session_with(tmp_path, setup) as h:
        await h.session.prompt("/probe before")
        await h.session.set_model("faux", "faux-think")  # one that reasons
        await h.session.set_thinking_level("high")
        await h.session.prompt("a question that uses some of the context")
        await h.session.prompt("/probe after")
        model = await h.session.handle.state()
    before, after = seen["before"], seen["after"]
    assert before["level"] != "high" and after["level"] == "high"
    window = model.agent.model.context_window
    assert isinstance(after["usage"], ContextUsage)
    assert after["usage"].context_window == window
    assert after["usage"].tokens is not None and after["usage"].tokens > 0
    assert before["usage"] is None or (before["usage"].tokens or 0) < after["usage"].tokens
    assert after["found"] is not None and after["found"].ref == "faux/faux-1"
    assert window == 200000  # faux-think's
    assert after["missing"] is None
    assert "faux/faux-1" in after["all"]
    assert set(after["available"]) <= set(after["all"])


async def test_the_model_registry_runs_an_extensions_own_requests(
    tmp_path: Path, agent_dir: Path
) -> None:
    """``ctx.model_registry.complete`` / ``stream_simple`` (pi's ``complete`` /
    ``streamSimple``): a request through the session's router, outside its transcript."""
    seen: dict[str, Any] = {}

    def setup(api: Any) -> None:
        async def ask(args: str, ctx: Any) -> None:
            registry = ctx.model_registry
            model = await registry.find("faux", "faux-1")
            question = LlmContext(
                system_prompt="Answer briefly.",
                messages=(user_message(args),),
            )
            short = StreamOptions(max_tokens=50)
            seen["complete"] = await registry.complete(model, question, short)
            kinds: list[str] = []
            async with registry.stream_simple(model, question) as events:
                async for event in events:
                    kinds.append(type(event).__name__)
            seen["kinds"] = kinds
            seen["failed"] = await registry.complete(model, question)

        api.register_command("ask", ask)

    replies = (
        FauxReply(text="forty-two"),
        FauxReply(text="streamed"),
        FauxReply(error="the provider is down"),
    )
    async with session_with(tmp_path, setup, replies=replies) as h:
        await h.session.prompt("/ask what is six times seven")
        requests = list(h.faux.requests)
        messages = await h.session.handle.messages()
    answer = seen["complete"]
    assert isinstance(answer, AssistantMessage)
    assert text_of(answer.content) == "forty-two" and answer.stop_reason == "stop"
    assert seen["kinds"][-1] == "StreamDone" and len(seen["kinds"]) > 1
    failed = seen["failed"]
    assert failed.stop_reason == "error" and "the provider is down" in (failed.error_message or "")
    assert len(requests) == 3
    assert requests[0].context.system_prompt == "Answer briefly."
    assert text_of(requests[0].context.messages[0].content) == "what is six times seven"
    assert requests[0].options.max_tokens == 50
    assert messages == ()  # the extension's requests are not the session's transcript


async def test_scoped_models_are_what_the_transport_resolved(
    tmp_path: Path, agent_dir: Path
) -> None:
    """pi's ``ctx.scopedModels``: the ``--models`` scope, which the transport resolves after
    the session started and puts in the options' ``ModelScope``."""
    seen: dict[str, Any] = {}

    def setup(api: Any) -> None:
        async def probe(args: str, ctx: Any) -> None:
            await trio.lowlevel.checkpoint()
            seen[args] = ctx.scoped_models

        api.register_command("probe", probe)

    scope = ModelScope()
    async with session_with(tmp_path, setup, model_scope=scope) as h:
        await h.session.prompt("/probe before")
        think = await h.session.handle.models("all")
        chosen = next(m for m in think if m.ref == "faux/faux-think")
        scope.models = (ScopedModel(chosen, "high"),)
        await h.session.prompt("/probe after")
    assert seen["before"] == ()
    assert seen["after"] == (ScopedModel(chosen, "high"),)
