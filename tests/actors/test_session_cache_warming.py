"""Prompt-cache warming started by a session, as pi 1.6.0 starts it: each request of the
session's conversation is kept warm (a one-token replay at 90% of the model's cache lifetime,
recorded as a ``cache_warm`` ``usage`` entry and announced with ``entry_appended``), idle
warming ends at the 30-minute horizon, ``streaming`` stops at the settle, ``off`` never warms,
a changed transcript stops it, and extensions decide through ``cache_warming_decision``.
All on trio's MockClock with the scripted (faux) model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import attrs
import trio
import trio.testing

from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.model_router.usage import make_usage
from pitrio.actors.session.cache_warming import WarmingMode
from pitrio.actors.session.commands import SessionSettings
from pitrio.actors.session.extensions.events import CacheWarmingDecisionEvent
from pitrio.actors.session.extensions.registry import Extension, SourceInfo
from pitrio.actors.session.extensions.runner import ExtensionRunner
from pitrio.messages.entries import UsageEntry
from pitrio.messages.events import EntryAppended, ExtensionError
from pitrio.messages.model import LlmContext, Model, ModelCost
from tests.actors.session_harness import FAUX_1, FIXTURE_SETTINGS, Fixture, session

PROMPT = 300_000
"""Prompt tokens each reply reports: at these prices even an idle refresh pays for itself."""
SONNET = ModelCost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
CACHED = attrs.evolve(FAUX_1, cost=SONNET, extra={"promptCache": {"short": 300, "long": 3600}})
"""The faux model with Sonnet's prices and a five-minute cache: refreshes every 270 s."""


def _reply(context: LlmContext) -> FauxReply:
    usage = make_usage(input=0, output=1, cache_read=PROMPT, model=CACHED)
    return FauxReply(text="ok", usage=usage)


def _settings(mode: WarmingMode) -> SessionSettings:
    return attrs.evolve(FIXTURE_SETTINGS, cache_warming=mode)


def _refreshes(fx: Fixture) -> list[float]:
    """When each replay reached the model (virtual seconds)."""
    return [
        request.at
        for request in fx.faux.requests
        if request.options.max_tokens == 1  # type: ignore[attr-defined]
    ]


class Timed(FauxProvider):
    """The faux model, noting the virtual time of each request."""

    async def stream(self, model: Model, context: LlmContext, options: Any, send: Any) -> None:
        """Stamp the request, then answer as the faux model does."""
        await super().stream(model, context, options, send)
        self.requests[-1] = _Stamped(self.requests[-1], trio.current_time())


@attrs.frozen
class _Stamped:
    request: Any
    at: float

    @property
    def options(self) -> Any:
        return self.request.options


async def _usage_entries(fx: Fixture) -> list[UsageEntry]:
    return [e for e in await fx.store.entries() if isinstance(e, UsageEntry)]


async def test_idle_warming_replays_the_request_until_the_30_minute_horizon(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _warming("idle") as fx:
        await fx.session.prompt("hello")
        assert fx.actor is not None and fx.actor.warming is not None
        line, _ = await fx.actor.warming.status_line()
        assert line.startswith("Decision in 4m 30s (15% continuation probability, ")
        block = await fx.session.cache_warming()  # RPC's get_cache_warming, the chat's /session
        assert (block["mode"], block["status"]) == ("idle", line)
        assert (round(block["missCost"], 6), round(block["warmCost"], 6)) == (1.035, 0.090015)
        await trio.sleep(3600)
        entries = await _usage_entries(fx)
        events = await fx.drain()
        line, _ = await fx.actor.warming.status_line()
        stats = await fx.session.session_stats()
        context = await fx.store.context_messages()
    # Planned 270 s after the request, then 270 s after each refresh; the seventh would come
    # at 1,890 s, past the 30 minutes after the request that started the run.
    assert _refreshes(fx) == [270.0, 540.0, 810.0, 1080.0, 1350.0, 1620.0]
    replay = fx.faux.requests[-1].request
    assert replay.options.disable_continuation is True
    assert replay.context == fx.faux.requests[0].request.context  # the same request again
    assert [e.kind for e in entries] == ["cache_warm"] * 6
    assert entries[0].provider == "faux" and entries[0].model == "faux-1"
    assert entries[0].usage.cache_read == PROMPT and entries[0].note is None
    announced = [e.entry for e in events if isinstance(e, EntryAppended)]
    assert [e.id for e in announced if isinstance(e, UsageEntry)] == [e.id for e in entries]
    assert line == "Inactive (30-minute idle safety limit reached)"
    # The refreshes count in the session's statistics; they never enter the model's context.
    assert stats.tokens["cacheRead"] == 7 * PROMPT
    assert [m.role for m in context] == ["user", "assistant"]


async def test_streaming_warming_stops_when_the_run_settles_and_off_never_warms(
    autojump_clock: trio.testing.MockClock,
) -> None:
    for mode, reason in (("streaming", "agent run settled"), ("off", "cache warming disabled")):
        async with _warming(mode) as fx:
            await fx.session.prompt("hello")
            await trio.sleep(3600)
            assert _refreshes(fx) == []
            assert await _usage_entries(fx) == []
            assert fx.actor is not None and fx.actor.warming is not None
            assert (await fx.actor.warming.status_line())[0] == f"Inactive ({reason})"


async def test_a_new_prompt_replaces_the_warmed_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _warming("idle") as fx:
        await fx.session.prompt("one")
        await trio.sleep(300)  # one refresh at 270 s
        await fx.session.prompt("two")
        await trio.sleep(300)
        refreshes = _refreshes(fx)
        second = fx.faux.requests[-1].request
    assert refreshes == [270.0, 570.0]
    assert "two" in str(second.context.messages[-1])


async def test_a_changed_transcript_stops_warming(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with _warming("idle") as fx:
        await fx.session.prompt("hello")
        assert fx.loop is not None and fx.actor is not None and fx.actor.warming is not None
        await fx.loop.set_messages([])  # what a compaction or a navigation does to the loop
        assert (await fx.actor.warming.status_line())[0] == (
            "Inactive (conversation context changed)"
        )
        await trio.sleep(3600)
        assert _refreshes(fx) == []


def _warming(mode: WarmingMode) -> AbstractAsyncContextManager[Fixture]:
    """A session of the cached model warming in ``mode``."""
    return session(Timed(default=_reply), model=CACHED, routed=True, settings=_settings(mode))


@asynccontextmanager
async def _with_extension(model: Model, handler: Any) -> AsyncIterator[Fixture]:
    """An idle-warming session whose one extension handles ``cache_warming_decision``."""
    extension = Extension(
        path="/x/warm.py",
        source_info=SourceInfo(path="/x/warm.py", source="cli", scope="temporary"),
    )
    extension.handlers["cache_warming_decision"] = [handler]
    runner = ExtensionRunner([extension])
    settings = _settings("idle")
    faux = Timed(default=_reply)
    async with session(faux, model=model, routed=True, settings=settings, extensions=runner) as fx:
        yield fx


async def test_an_extension_sees_the_decision_and_can_stop_or_force_warming(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[CacheWarmingDecisionEvent] = []

    def stop(event: CacheWarmingDecisionEvent, ctx: Any) -> dict[str, str]:
        seen.append(event)
        return {"action": "stop"}

    async with _with_extension(CACHED, stop) as fx:
        await fx.session.prompt("hello")
        await trio.sleep(3600)
        assert _refreshes(fx) == []
        assert fx.actor is not None and fx.actor.warming is not None
        line, status = await fx.actor.warming.status_line()
    assert len(seen) == 1 and seen[0].action == "warm" and seen[0].continuation_probability == 0.15
    assert seen[0].type == "cache_warming_decision"
    assert round(seen[0].warm_cost, 6) == 0.090015 and round(seen[0].miss_cost, 6) == 1.035
    assert status.extension_override and line.startswith("Stopped (extension override, 15% ")

    # A cheap prompt pi would not warm: an extension's "warm" forces it, noted on the entry.
    cheap = attrs.evolve(CACHED, cost=ModelCost(input=0.1, output=0.1, cache_read=0.01))

    def warm(event: CacheWarmingDecisionEvent, ctx: Any) -> dict[str, str]:
        assert event.action == "stop"
        return {"action": "warm"}

    async with _with_extension(cheap, warm) as fx:
        await fx.session.prompt("hello")
        await trio.sleep(300)
        entries = await _usage_entries(fx)
    assert [e.note for e in entries] == ["extension override"]


async def test_a_failing_decision_handler_is_reported_and_pi_decides(
    autojump_clock: trio.testing.MockClock,
) -> None:
    def broken(event: CacheWarmingDecisionEvent, ctx: Any) -> None:
        raise RuntimeError("no opinion")

    async with _with_extension(CACHED, broken) as fx:
        await fx.session.prompt("hello")
        await trio.sleep(300)
        events = await fx.drain()
        assert _refreshes(fx) == [270.0]
    errors = [e for e in events if isinstance(e, ExtensionError)]
    assert [(e.event, e.error) for e in errors] == [("cache_warming_decision", "no opinion")]


async def test_the_process_cache_retention_sets_the_lifetime_warming_plans_with(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # $PITRIO_CACHE_RETENTION=long: an hour's lifetime, a refresh planned at 54 minutes,
    # past the idle horizon once the run settles, so warming stops there (as pi's does).
    settings = attrs.evolve(_settings("idle"), cache_retention="long")
    async with session(Timed(default=_reply), model=CACHED, routed=True, settings=settings) as fx:
        await fx.session.prompt("hello")
        assert fx.actor is not None and fx.actor.warming is not None
        line, _ = await fx.actor.warming.status_line()
        await trio.sleep(3600)
        assert _refreshes(fx) == []
    assert line == "Inactive (30-minute idle safety limit reached)"
