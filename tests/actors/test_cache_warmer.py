"""The cache warmer's tasks on trio's MockClock: refreshes at the planned virtual times,
recorded as ``usage`` entries of kind ``cache_warm``, replaced by a new request, stopped by
``off``/``streaming``, the 30-minute idle horizon, a lost prefix or an extension."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest
import trio
import trio.testing

from pitrio.actors.session import cache_warming as policy
from pitrio.actors.session.cache_warmer import CacheWarmer, WarmRequest, open_cache_warmer
from pitrio.messages.agent import AssistantMessage, Cost, Usage
from pitrio.messages.entries import UsageEntry
from pitrio.messages.model import LlmContext, Model, StreamOptions
from tests.actors.test_cache_warming_policy import model

PROMPT = 300_000  # large enough that even an idle refresh pays for itself at Sonnet prices


def _usage() -> Usage:
    return Usage(
        input=0,
        output=1,
        cache_read=PROMPT,
        cache_write=0,
        total_tokens=PROMPT + 1,
        cost=Cost(cache_read=0.09, output=0.000015, total=0.090015),
    )


@attrs.define
class Fake:
    """The model router and the store, as far as the warmer sees them."""

    mode: policy.WarmingMode = "idle"
    stop_reason: str = "stop"
    sent: list[tuple[float, StreamOptions]] = attrs.field(factory=list)
    recorded: list[tuple[float, UsageEntry]] = attrs.field(factory=list)
    current: bool = True

    async def send(self, m: Model, context: LlmContext, options: StreamOptions) -> AssistantMessage:
        self.sent.append((trio.current_time(), options))
        await trio.sleep(1.0)  # the provider takes a virtual second to answer
        return AssistantMessage(
            content=(),
            api=m.api,
            provider=m.provider,
            model=m.id,
            usage=_usage(),
            stop_reason=self.stop_reason,  # type: ignore[arg-type]
            timestamp=0,
            response_model="claude-x-20260101",
        )

    async def record(self, entry: UsageEntry) -> UsageEntry:
        self.recorded.append((trio.current_time(), entry))
        return entry

    async def tokens(self) -> int:
        return PROMPT

    async def is_current(self) -> bool:
        return self.current

    async def always(self) -> bool:
        return True

    def warmer(self, nursery: trio.Nursery, **kw: object) -> CacheWarmer:
        return CacheWarmer(
            nursery,
            send=self.send,
            record=self.record,
            mode=lambda: self.mode,
            prompt_tokens=self.tokens,
            **kw,  # type: ignore[arg-type]
        )


REQUEST = WarmRequest(
    model=model(prompt_cache={"short": 300, "long": 3600}),
    context=LlmContext(system_prompt="s", messages=()),
    options=StreamOptions(session_id="sess", max_tokens=32000),
)


def run_with_clock(test: Callable[[trio.testing.MockClock], object]) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    trio.run(test, clock, clock=clock)


def test_refreshes_during_a_run_then_idle_until_thirty_minutes() -> None:
    fake = Fake()

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = fake.warmer(nursery)
            warmer.start(REQUEST, fake.is_current)
            await trio.sleep_until(600.0)
            assert [t for t, _ in fake.sent] == [270.0, 541.0]
            warmer.settled()
            await trio.sleep_until(3000.0)
            status = await warmer.status()
            assert status.state == "inactive"
            assert status.reason == "30-minute idle safety limit reached"

    run_with_clock(main)
    # refresh i is planned when the previous one answered (a virtual second later)
    assert [t for t, _ in fake.sent] == [270.0, 541.0, 812.0, 1083.0, 1354.0, 1625.0]
    replay = attrs.evolve(REQUEST.options, max_tokens=1, disable_continuation=True)
    assert all(o == replay for _, o in fake.sent)
    assert len(fake.recorded) == 6
    at, entry = fake.recorded[0]
    assert at == 271.0
    assert entry.type == "usage" and entry.kind == "cache_warm"
    assert (entry.provider, entry.model) == ("anthropic", "claude-x-20260101")
    assert entry.usage == _usage() and entry.note is None


@pytest.mark.parametrize(
    ("mode", "sent", "reason"),
    [("streaming", 1, "agent run settled"), ("off", 0, "cache warming disabled")],
)
def test_streaming_mode_stops_when_the_run_settles_and_off_sends_none(
    mode: policy.WarmingMode, sent: int, reason: str
) -> None:
    fake = Fake(mode=mode)

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = fake.warmer(nursery)
            warmer.start(REQUEST, fake.always)
            await trio.sleep_until(300.0)
            warmer.settled()
            await trio.sleep_until(2000.0)
            assert (await warmer.status()).reason == reason

    run_with_clock(main)
    assert len(fake.sent) == sent


def test_a_new_request_replaces_the_run_and_a_lost_prefix_stops_it() -> None:
    fake = Fake()

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = fake.warmer(nursery)
            warmer.start(REQUEST, fake.is_current)
            await trio.sleep_until(200.0)
            warmer.start(REQUEST, fake.is_current)  # the conversation asked again
            await trio.sleep_until(480.0)
            assert [t for t, _ in fake.sent] == [470.0]
            fake.current = False  # e.g. compaction rewrote the context
            await trio.sleep_until(3000.0)
            assert (await warmer.status()).reason == "conversation context changed"

    run_with_clock(main)
    assert len(fake.sent) == 1


def test_ineligible_requests_never_warm() -> None:
    fake = Fake()
    cases = {
        "cache lifetime unavailable": attrs.evolve(REQUEST, model=model()),
        "request disabled prompt caching": attrs.evolve(
            REQUEST, options=StreamOptions(cache_retention="none")
        ),
        "request cannot be replayed safely": attrs.evolve(
            REQUEST, options=StreamOptions(reasoning="high")
        ),
    }

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = fake.warmer(nursery)
            for reason, request in cases.items():
                warmer.start(request, fake.always)
                assert (await warmer.status()).reason == reason
            await trio.sleep_until(4000.0)

    run_with_clock(main)
    assert fake.sent == []


@pytest.mark.parametrize("answer", ["stop", "warm", "boom"])
def test_the_extensions_decision_wins(answer: str) -> None:
    fake = Fake()

    async def decide(decision: policy.Decision) -> policy.Action:
        assert decision.action == "warm" and decision.phase == "streaming"
        if answer == "boom":
            raise RuntimeError("extension failed")
        return answer  # type: ignore[return-value]

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = fake.warmer(nursery, decide=decide)
            warmer.start(REQUEST, fake.always)
            await trio.sleep_until(280.0)
            status = await warmer.status()
            if answer == "stop":
                assert status.reason == "stopped by extension"
            warmer.cancel()

    run_with_clock(main)
    assert len(fake.sent) == (0 if answer == "stop" else 1)


def test_an_override_is_noted_and_a_failed_refresh_is_not_recorded() -> None:
    fake = Fake(stop_reason="error")
    cheap = attrs.evolve(REQUEST, model=attrs.evolve(REQUEST.model))

    async def force(decision: policy.Decision) -> policy.Action:
        return "warm"

    async def tokens() -> int:
        return 1000  # far too small to pay for itself: pi would stop

    async def main(clock: trio.testing.MockClock) -> None:
        async with open_cache_warmer(
            send=fake.send,
            record=fake.record,
            mode=lambda: "idle",
            prompt_tokens=tokens,
            decide=force,
        ) as warmer:
            warmer.start(cheap, fake.always)
            await trio.sleep_until(275.0)
            fake.stop_reason = "stop"
            await trio.sleep_until(541.5)  # the second refresh is in flight
            status = await warmer.status()
            assert status.state == "refreshing" and status.extension_override
            await trio.sleep_until(545.0)  # planning the next one clears the override, as pi
            assert not (await warmer.status()).extension_override

    run_with_clock(main)
    assert [t for t, _ in fake.sent] == [270.0, 541.0]
    assert len(fake.recorded) == 1 and fake.recorded[0][1].note == "extension override"


def test_a_refresh_past_its_deadline_stops_warming() -> None:
    fake = Fake()

    async def slow_tokens() -> int:
        await trio.sleep(20.0)  # the decision took longer than the 15 s of slack
        return PROMPT

    async def main(clock: trio.testing.MockClock) -> None:
        async with trio.open_nursery() as nursery:
            warmer = CacheWarmer(
                nursery,
                send=fake.send,
                record=fake.record,
                mode=lambda: "idle",
                prompt_tokens=slow_tokens,
            )
            warmer.start(REQUEST, fake.always)
            await trio.sleep_until(1000.0)
            assert (await warmer.status()).reason == "cache refresh deadline missed"

    run_with_clock(main)
    assert fake.sent == []
