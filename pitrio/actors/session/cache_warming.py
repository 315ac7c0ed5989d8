"""Prompt-cache warming as pi 1.6.0 decides it (``cacheWarming``): the policy, pure.

A provider keeps a prompt's cache entry for a best-effort lifetime (the model's
``promptCache.short`` / ``.long`` seconds). Re-sending the last request with a one-token output
cap shortly before the entry expires costs a cache read; losing the entry costs the next real
request a cache write (or fresh input) of the whole prompt. pi 1.6.0 refreshes only when the
expected saving is at least $0.05: certain continuation while the agent run is active
(``streaming``), a fixed 15% chance while it sits idle. Streaming warming stops an hour after
the request that started it, idle warming 30 minutes after it.

This module owns the numbers and the schedule; :mod:`.cache_warmer` owns the clock and the
requests. Times are seconds on any monotonic clock (trio's, in the warmer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from pitrio.actors.model_router.model_fields import prompt_cache
from pitrio.actors.model_router.usage import make_usage
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import MessageEntry
from pitrio.messages.model import Model, StreamOptions

WarmingMode = Literal["off", "streaming", "idle"]
Phase = Literal["streaming", "idle"]
Action = Literal["warm", "stop"]

WARMING_MODES: tuple[WarmingMode, ...] = ("off", "streaming", "idle")
DEFAULT_MODE: WarmingMode = "idle"
"""pi 1.6.0's default (1.5 warmed only during runs)."""

MAX_STREAMING_AGE = 60 * 60.0
"""Seconds after the starting request past which streaming warming never refreshes."""
MAX_IDLE_AGE = 30 * 60.0
"""The same horizon once the run settled: idle continuation estimates age badly."""
MINIMUM_EXPECTED_SAVINGS = 0.05
"""Dollars a refresh must be expected to save to be sent."""
IDLE_CONTINUATION_PROBABILITY = 0.15
"""pi's constant chance that a real request arrives in time while the agent is idle."""
USAGE_KIND = "cache_warm"
"""The ``kind`` of the ``usage`` entry a refresh records."""
OVERRIDE_NOTE = "extension override"
"""The ``note`` of that entry when an extension forced the refresh."""


def cache_warming_mode(global_settings: Mapping[str, Any]) -> WarmingMode:
    """``cacheWarming`` of the agent dir's settings (pi reads it from the global file only,
    since warming spends money); an unknown value means the default."""
    value = global_settings.get("cacheWarming")
    for mode in WARMING_MODES:
        if value == mode:
            return mode
    return DEFAULT_MODE


def warm_delay(ttl: float) -> float | None:
    """Seconds from a request to its refresh: 90% of the lifetime, but at least ten seconds
    before expiry; ``None`` for a lifetime of ten seconds or less (nothing to gain)."""
    if ttl <= 10.0:
        return None
    # pi works in whole milliseconds; keep its rounding so schedules agree to the millisecond.
    millis = max(1, int(min(ttl * 1000 * 0.9, ttl * 1000 - 10_000)))
    return millis / 1000


def cache_ttl(model: Model, retention: str | None) -> float | None:
    """Lifetime in seconds of the entry a request with ``retention`` writes (``None``: the
    default ``short``), from the model's ``promptCache``; ``None`` when caching is off or the
    model declares no lifetime for that tier (not eligible)."""
    tier = retention or "short"
    if tier == "none":
        return None
    seconds = prompt_cache(model).get(tier)
    return None if seconds is None else float(seconds)


def replayable(model: Model, options: StreamOptions) -> bool:
    """Whether a one-token replay leaves the cache entry as it is. Anthropic's budget thinking
    derives its budget from the output limit, which the replay changes (and the budget is
    part of the cached prefix): such requests are not warmed unless thinking is adaptive."""
    if not options.reasoning or model.api != "anthropic-messages":
        return True
    compat = model.compat
    return isinstance(compat, Mapping) and compat.get("forceAdaptiveThinking") is True


def refresh_options(options: StreamOptions) -> StreamOptions:
    """A refresh's options: the request's own with a one-token output cap, never continuing
    a provider-side thread (the refresh repeats the request the thread already holds)."""
    return attrs.evolve(options, max_tokens=1, disable_continuation=True)


@attrs.frozen(kw_only=True)
class Decision:
    """One warm-or-stop decision with its inputs (pi's ``CacheWarmingDecision``)."""

    phase: Phase
    warm_cost: float
    """Price of the refresh: a cache read of the prompt and one output token."""
    miss_cost: float
    """What the next real request pays extra when the entry is lost."""
    continuation_probability: float
    expected_savings: float
    """``continuation_probability * miss_cost - warm_cost``."""
    economics_available: bool
    """False when the prompt size or the model's prices are unknown."""
    action: Action

    def to_json(self) -> dict[str, Any]:
        """pi's field names (for ``/session`` details and extension events)."""
        return {
            "phase": self.phase,
            "warmCost": self.warm_cost,
            "missCost": self.miss_cost,
            "continuationProbability": self.continuation_probability,
            "expectedSavings": self.expected_savings,
            "economicsAvailable": self.economics_available,
            "action": self.action,
        }


def _price(
    model: Model, *, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0
) -> float:
    usage = make_usage(
        input=input, output=output, cache_read=cache_read, cache_write=cache_write, model=model
    )
    return usage.cost.total


def evaluate(model: Model, prompt_tokens: int, phase: Phase) -> Decision:
    """Whether refreshing the entry of a ``prompt_tokens`` prompt pays for itself."""
    hit = _price(model, cache_read=prompt_tokens)
    if model.cost.cache_write > 0:
        miss = _price(model, cache_write=prompt_tokens)
    else:
        miss = _price(model, input=prompt_tokens)
    warm_cost = _price(model, cache_read=prompt_tokens, output=1)
    miss_cost = max(0.0, miss - hit)
    probability = IDLE_CONTINUATION_PROBABILITY if phase == "idle" else 1.0
    savings = probability * miss_cost - warm_cost
    return Decision(
        phase=phase,
        warm_cost=warm_cost,
        miss_cost=miss_cost,
        continuation_probability=probability,
        expected_savings=savings,
        economics_available=prompt_tokens > 0 and (hit > 0 or miss > 0),
        action="warm" if savings >= MINIMUM_EXPECTED_SAVINGS else "stop",
    )


def last_prompt_tokens(entries: Iterable[object]) -> int:
    """Prompt size of the branch's latest assistant answer (input + cache read + cache write
    as the provider reported them); 0 without one."""
    found = 0
    for entry in entries:
        if isinstance(entry, MessageEntry) and isinstance(entry.message, AssistantMessage):
            usage = entry.message.usage
            found = usage.input + usage.cache_read + usage.cache_write
    return found


@attrs.frozen(kw_only=True)
class Slot:
    """When the next refresh is due and the last moment it still makes sense."""

    at: float
    deadline: float
    """``at`` plus half the margin left before expiry: a refresh this late would likely
    write the cache anew at full price, so it is skipped and warming stops."""


@attrs.frozen(kw_only=True)
class Stop:
    """Warming ends (until the next real request) for ``reason`` (pi's wording)."""

    reason: str


def next_slot(
    *, now: float, started_at: float, ttl: float, delay: float, phase: Phase
) -> Slot | Stop:
    """The next refresh of a run that started at ``started_at``, planned at ``now`` (after
    the request or the previous refresh: refreshes never move the safety horizon)."""
    at = now + delay
    idle = phase == "idle"
    horizon = started_at + (MAX_IDLE_AGE if idle else MAX_STREAMING_AGE)
    if at > horizon or now >= horizon:
        reason = "30-minute idle safety limit reached" if idle else "one-hour safety limit reached"
        return Stop(reason=reason)
    return Slot(at=at, deadline=at + int((ttl - delay) * 1000 / 2) / 1000)


def settled_stop(*, now: float, started_at: float, next_at: float) -> Stop | None:
    """When the run settles in ``idle`` mode: stop if the pending refresh (or now) is past
    the idle horizon, else keep the schedule."""
    horizon = started_at + MAX_IDLE_AGE
    if next_at > horizon or now >= horizon:
        return Stop(reason="30-minute idle safety limit reached")
    return None


def stop_reason(decision: Decision, *, overridden: bool) -> str:
    """Why a ``stop`` decision ended warming."""
    if overridden:
        return "stopped by extension"
    if decision.economics_available:
        return "expected savings below threshold"
    return "cache economics unavailable"


def _dollars(value: float) -> str:
    return f"-${abs(value):.3f}" if value < 0 else f"${value:.3f}"


def describe_decision(decision: Decision) -> str:
    """The economics of a decision as ``/session`` shows them."""
    if not decision.economics_available:
        return "cache economics unavailable"
    percent = round(decision.continuation_probability * 100)
    chance = f"{percent}% continuation probability"
    if decision.phase == "streaming":
        chance += " while agent is running"
    sign = ">=" if decision.action == "warm" else "<"
    savings = _dollars(decision.expected_savings)
    return f"{chance}, expected savings {savings} {sign} ${MINIMUM_EXPECTED_SAVINGS:.3f}"


def _countdown(seconds: float) -> str:
    remaining = -int(-seconds // 1)  # whole seconds, rounded up
    hours, remaining = divmod(remaining, 3600)
    minutes, secs = divmod(remaining, 60)
    parts = [f"{hours}h"] if hours else []
    if minutes:
        parts.append(f"{minutes}m")
    if secs or not parts:
        parts.append(f"{secs}s")
    return " ".join(parts)


@attrs.frozen(kw_only=True)
class Status:
    """The warmer's state for ``/session`` (pi's ``CacheWarmingStatus``)."""

    state: Literal["inactive", "scheduled", "refreshing"]
    reason: str | None = None
    next_warm_at: float | None = None
    decision: Decision | None = None
    extension_override: bool = False

    def line(self, now: float) -> str:
        """One line as pi's ``/session`` prints after ``Status:``."""
        decision = self.decision
        quiet = self.state == "inactive" and decision is not None
        if decision is None or (
            quiet and not decision.economics_available and not self.extension_override
        ):
            return f"Inactive ({self.reason or 'unknown reason'})"
        economics = describe_decision(decision)
        if self.extension_override:
            details = f"extension override, {economics}"
        else:
            details = f"{economics} -> {decision.action}"
        if self.state == "inactive":
            return f"Stopped ({details})"
        if self.state == "refreshing":
            return f"Warming cache ({details})"
        if self.next_warm_at is None or self.next_warm_at <= now:
            return f"Decision now ({details})"
        return f"Decision in {_countdown(self.next_warm_at - now)} ({details})"


def usage_line(total_cost: float, note: str | None = None) -> str:
    """The transcript line of one or more consecutive refreshes: ``Cache warmed: $0.0123``
    (at least three decimals, at most six, trailing zeros past the third dropped)."""
    text = f"{total_cost:.6f}"
    head, _, tail = text.partition(".")
    tail = tail[:3] + tail[3:].rstrip("0")
    suffix = f" ({note})" if note else ""
    return f"Cache warmed{suffix}: ${head}.{tail}"
