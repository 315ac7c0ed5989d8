"""Token and cost arithmetic shared by providers (spec §1.2). Pure functions."""

from __future__ import annotations

import math

import attrs

from pitrio.actors.model_router.model_fields import tier_for
from pitrio.messages.agent import Cost, Usage
from pitrio.messages.model import Model


def js_length(text: str) -> int:
    """Length of ``text`` as JavaScript counts it (UTF-16 code units).

    pi's estimates divide JavaScript string lengths; characters outside the BMP count twice
    there, so estimates agree with pi's on any text.
    """
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", errors="surrogatepass")) // 2


def estimate_tokens(text: str) -> int:
    """pi's rough token estimate: one token per four characters, rounded up."""
    return math.ceil(js_length(text) / 4)


def make_usage(
    *,
    input: int = 0,
    output: int = 0,
    cache_read: int = 0,
    cache_write: int = 0,
    cache_write_1h: int | None = None,
    reasoning: int | None = None,
    model: Model | None = None,
    mark_computed: bool = True,
) -> Usage:
    """A :class:`Usage` with ``total_tokens`` summed and, given a model, its cost computed.

    ``reasoning`` (already counted in ``output``) and ``cache_write_1h`` (part of
    ``cache_write``) are given by the providers whose pi counterpart reports them;
    ``mark_computed`` as in :func:`with_cost`."""
    usage = Usage(
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=cache_write,
        cache_write_1h=cache_write_1h,
        reasoning=reasoning,
        total_tokens=input + output + cache_read + cache_write,
    )
    return with_cost(usage, model, mark_computed=mark_computed) if model is not None else usage


def with_cost(usage: Usage, model: Model, *, mark_computed: bool = True) -> Usage:
    """``usage`` with its cost computed from ``model``'s prices (USD per million tokens), as
    pi-ai's ``calculateCost``: one-hour cache writes cost twice the input price, and the cost
    is marked as computed, not the provider's (``totalFromProvider: false``) unless
    ``mark_computed`` is false (pi's faux provider, which writes no such flag).

    A model with ``cost.tiers`` (pi 1.6.0) is priced by the highest tier whose threshold the
    request's input (fresh, cached and cache-written tokens) exceeds, for the whole request."""
    prices = tier_for(model.cost, usage.input + usage.cache_read + usage.cache_write)
    long_write = usage.cache_write_1h or 0
    short_write = usage.cache_write - long_write
    cost_input = prices.input / 1_000_000 * usage.input
    cost_output = prices.output / 1_000_000 * usage.output
    cost_cache_read = prices.cache_read / 1_000_000 * usage.cache_read
    cost_cache_write = (
        prices.cache_write * short_write + prices.input * 2 * long_write
    ) / 1_000_000
    return attrs.evolve(
        usage,
        cost=Cost(
            input=cost_input,
            output=cost_output,
            cache_read=cost_cache_read,
            cache_write=cost_cache_write,
            total=cost_input + cost_output + cost_cache_read + cost_cache_write,
            total_from_provider=False if mark_computed else None,
        ),
    )
