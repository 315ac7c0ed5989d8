"""pi 1.6.0's prompt-cache warming policy (``cacheWarming``): eligibility, the $0.05 estimate,
the schedule and the texts ``/session`` and the transcript show. Pure, no clock."""

from __future__ import annotations

import pytest

from pitrio.actors.session import cache_warming as policy
from pitrio.actors.session.resources.settings import Settings
from pitrio.messages.agent import AssistantMessage, Cost, Usage
from pitrio.messages.entries import MessageEntry
from pitrio.messages.model import Model, ModelCost, StreamOptions

SONNET_PRICES = ModelCost(input=3, output=15, cache_read=0.3, cache_write=3.75)


def model(
    *,
    prompt_cache: dict[str, float] | None = None,
    cost: ModelCost = SONNET_PRICES,
    api: str = "anthropic-messages",
    compat: object = None,
) -> Model:
    return Model(
        id="claude-x",
        name="Claude X",
        api=api,
        provider="anthropic",
        base_url="http://127.0.0.1:9",
        reasoning=True,
        input=("text",),
        cost=cost,
        context_window=1_000_000,
        max_tokens=64_000,
        compat=compat,
        extra={"promptCache": prompt_cache} if prompt_cache is not None else None,
    )


def test_mode_is_read_from_the_global_settings_only_with_idle_by_default() -> None:
    assert policy.cache_warming_mode({}) == "idle"
    assert policy.cache_warming_mode({"cacheWarming": "streaming"}) == "streaming"
    assert policy.cache_warming_mode({"cacheWarming": "off"}) == "off"
    assert policy.cache_warming_mode({"cacheWarming": "always"}) == "idle"
    project_only = Settings(values={"cacheWarming": "off"}, project_values={"cacheWarming": "off"})
    assert project_only.cache_warming == "idle"
    assert Settings(global_values={"cacheWarming": "off"}).cache_warming == "off"


def test_lifetime_comes_from_the_models_prompt_cache_tier() -> None:
    both = model(prompt_cache={"short": 300, "long": 3600})
    assert policy.cache_ttl(both, None) == 300.0
    assert policy.cache_ttl(both, "short") == 300.0
    assert policy.cache_ttl(both, "long") == 3600.0
    assert policy.cache_ttl(both, "none") is None
    assert policy.cache_ttl(model(prompt_cache={"short": 300}), "long") is None
    assert policy.cache_ttl(model(), None) is None  # no lifetime declared: not eligible


def test_refresh_comes_at_ninety_percent_keeping_ten_seconds() -> None:
    assert policy.warm_delay(300) == 270.0
    assert policy.warm_delay(3600) == 3240.0
    assert policy.warm_delay(60) == 50.0  # 54 would leave only six seconds
    assert policy.warm_delay(10) is None
    assert policy.warm_delay(10.5) == 0.5


def test_budget_thinking_on_anthropic_is_not_replayable() -> None:
    thinking = StreamOptions(reasoning="high")
    assert not policy.replayable(model(), thinking)
    assert policy.replayable(model(), StreamOptions())
    assert policy.replayable(model(compat={"forceAdaptiveThinking": True}), thinking)
    assert policy.replayable(model(api="openai-responses"), thinking)
    assert policy.refresh_options(StreamOptions(max_tokens=9000, session_id="s")) == (
        StreamOptions(max_tokens=1, session_id="s", disable_continuation=True)
    )


def test_streaming_refresh_of_a_50k_prompt_pays_for_itself() -> None:
    decision = policy.evaluate(model(), 50_000, "streaming")
    assert decision.warm_cost == pytest.approx(0.015015)
    assert decision.miss_cost == pytest.approx(0.1875 - 0.015)
    assert decision.continuation_probability == 1.0
    assert decision.expected_savings == pytest.approx(0.157485)
    assert decision.economics_available and decision.action == "warm"


def test_idle_refresh_needs_a_larger_prompt_at_a_fifteen_percent_chance() -> None:
    small = policy.evaluate(model(), 50_000, "idle")
    assert small.continuation_probability == 0.15
    assert small.expected_savings == pytest.approx(0.15 * 0.1725 - 0.015015)
    assert small.action == "stop"
    large = policy.evaluate(model(), 300_000, "idle")
    assert large.expected_savings == pytest.approx(0.06525 - 0.000015)
    assert large.action == "warm"


def test_without_cache_write_price_a_miss_costs_fresh_input() -> None:
    prices = ModelCost(input=2, output=8, cache_read=0.5, cache_write=0)
    decision = policy.evaluate(model(cost=prices), 100_000, "streaming")
    assert decision.miss_cost == pytest.approx(0.2 - 0.05)


def test_unknown_prices_or_prompt_leave_the_economics_unavailable() -> None:
    free = policy.evaluate(model(cost=ModelCost()), 100_000, "streaming")
    assert not free.economics_available and free.action == "stop"
    assert not policy.evaluate(model(), 0, "streaming").economics_available
    assert policy.stop_reason(free, overridden=False) == "cache economics unavailable"
    small = policy.evaluate(model(), 1000, "streaming")
    assert policy.stop_reason(small, overridden=False) == "expected savings below threshold"
    assert policy.stop_reason(small, overridden=True) == "stopped by extension"


def _answer(input: int, cache_read: int, cache_write: int) -> MessageEntry:
    usage = Usage(
        input=input,
        output=5,
        cache_read=cache_read,
        cache_write=cache_write,
        total_tokens=input + 5 + cache_read + cache_write,
        cost=Cost(),
    )
    message = AssistantMessage(
        content=(), api="x", provider="p", model="m", usage=usage, stop_reason="stop", timestamp=0
    )
    return MessageEntry(id="a", parent_id=None, timestamp="t", message=message)


def test_prompt_size_is_the_last_answers_input_read_and_write() -> None:
    assert policy.last_prompt_tokens([]) == 0
    entries = [_answer(10, 0, 100), _answer(7, 100, 20)]
    assert policy.last_prompt_tokens(entries) == 127


def test_streaming_schedule_stops_at_the_one_hour_horizon() -> None:
    times = []
    now = 0.0
    while True:
        slot = policy.next_slot(now=now, started_at=0.0, ttl=300, delay=270, phase="streaming")
        if isinstance(slot, policy.Stop):
            assert slot.reason == "one-hour safety limit reached"
            break
        assert slot.deadline == slot.at + 15.0  # half of the 30 s left before expiry
        times.append(slot.at)
        now = slot.at
    assert times[0] == 270 and times[-1] == 3510 and len(times) == 13


def test_idle_schedule_stops_at_thirty_minutes() -> None:
    slot = policy.next_slot(now=1620.0, started_at=0.0, ttl=300, delay=270, phase="idle")
    assert isinstance(slot, policy.Stop)
    assert slot.reason == "30-minute idle safety limit reached"
    ok = policy.next_slot(now=1350.0, started_at=0.0, ttl=300, delay=270, phase="idle")
    assert isinstance(ok, policy.Slot) and ok.at == 1620.0
    assert policy.settled_stop(now=100.0, started_at=0.0, next_at=270.0) is None
    late = policy.settled_stop(now=1700.0, started_at=0.0, next_at=1890.0)
    assert late is not None and late.reason == "30-minute idle safety limit reached"


def test_status_lines_as_session_shows_them() -> None:
    warm = policy.evaluate(model(), 50_000, "streaming")
    scheduled = policy.Status(state="scheduled", next_warm_at=370.0, decision=warm)
    assert scheduled.line(100.0) == (
        "Decision in 4m 30s (100% continuation probability while agent is running, "
        "expected savings $0.157 >= $0.050 -> warm)"
    )
    assert scheduled.line(400.0).startswith("Decision now (")
    stopped = policy.Status(
        state="inactive",
        reason="expected savings below threshold",
        decision=policy.evaluate(model(), 50_000, "idle"),
    )
    assert stopped.line(0.0) == (
        "Stopped (15% continuation probability, expected savings $0.011 < $0.050 -> stop)"
    )
    idle = policy.Status(state="inactive", reason="waiting for first request")
    assert idle.line(0.0) == "Inactive (waiting for first request)"
    forced = policy.Status(state="refreshing", decision=warm, extension_override=True)
    assert forced.line(0.0).startswith("Warming cache (extension override, 100% ")


def test_usage_line_keeps_three_to_six_decimals() -> None:
    assert policy.usage_line(0.015015) == "Cache warmed: $0.015015"
    assert policy.usage_line(0.01501) == "Cache warmed: $0.01501"
    assert policy.usage_line(1.5) == "Cache warmed: $1.500"
    assert policy.usage_line(0.03, "extension override") == (
        "Cache warmed (extension override): $0.030"
    )
