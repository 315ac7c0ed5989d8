"""pi 1.6.0's model fields that live in a model's ``extra``: typed readers and merging. Pure.

pitrio's :class:`~pitrio.messages.model.Model` has attributes for the fields every pi version
had; the ones pi 1.6.0 added stay in ``Model.extra`` under pi's names, so they reach RPC
clients exactly as pi sends them and a newer pi's fields survive untouched. This module reads
them with their types (``inputLimits``, ``promptCache``, ``samplingParams``,
``samplingParamsByThinkingLevel``, ``cost.tiers``) and merges a ``models.json`` override into
them the way pi 1.6.0 composes a provider (objects merge key by key; ``cost.tiers`` replaces).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from pitrio.messages import codec
from pitrio.messages.agent import THINKING_LEVELS
from pitrio.messages.codec import Extra
from pitrio.messages.model import Model, ModelCost

INPUT_LIMITS = "inputLimits"
PROMPT_CACHE = "promptCache"
SAMPLING_PARAMS = "samplingParams"
SAMPLING_PARAMS_BY_LEVEL = "samplingParamsByThinkingLevel"
COST_TIERS = "tiers"

EXTRA_MODEL_FIELDS: tuple[str, ...] = (
    INPUT_LIMITS,
    PROMPT_CACHE,
    SAMPLING_PARAMS,
    SAMPLING_PARAMS_BY_LEVEL,
)
"""The model fields of pi 1.6.0 that pitrio keeps in ``Model.extra``."""


def _extra(model: Model) -> Mapping[str, Any]:
    return model.extra or {}


def input_limits(model: Model) -> dict[str, Any]:
    """``inputLimits`` (``maxRequestBytes``, ``images``), empty when the model has none."""
    value = _extra(model).get(INPUT_LIMITS)
    return dict(value) if isinstance(value, Mapping) else {}


def prompt_cache(model: Model) -> dict[str, float]:
    """``promptCache``: the cache lifetime in seconds of the ``short``/``long`` tiers pi
    knows (a tier it does not know is absent)."""
    value = _extra(model).get(PROMPT_CACHE)
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if k in ("short", "long") and _number(v)}


def sampling_params(model: Model, level: str | None) -> dict[str, Any]:
    """The fields merged into a request body at thinking ``level`` (``None`` = off):
    ``samplingParams`` with ``samplingParamsByThinkingLevel[level]`` over it."""
    extra = _extra(model)
    merged: dict[str, Any] = {}
    base = extra.get(SAMPLING_PARAMS)
    if isinstance(base, Mapping):
        merged.update(base)
    by_level = extra.get(SAMPLING_PARAMS_BY_LEVEL)
    if isinstance(by_level, Mapping):
        params = by_level.get(level or "off")
        if isinstance(params, Mapping):
            merged.update(params)
    return merged


def cost_tiers(cost: ModelCost) -> tuple[dict[str, float], ...]:
    """``cost.tiers``: request-wide prices above an input-token threshold, lowest first."""
    value = (cost.extra or {}).get(COST_TIERS)
    if not isinstance(value, list):
        return ()
    tiers = [
        dict(t) for t in value if isinstance(t, Mapping) and _number(t.get("inputTokensAbove"))
    ]
    return tuple(sorted(tiers, key=lambda t: t["inputTokensAbove"]))


def tier_for(cost: ModelCost, input_tokens: int) -> ModelCost:
    """The prices of a request of ``input_tokens`` (the highest tier it exceeds applies to the
    whole request, as pi prices it); ``cost`` itself below every tier."""
    chosen: dict[str, float] | None = None
    for tier in cost_tiers(cost):
        if input_tokens > tier["inputTokensAbove"]:
            chosen = tier
    if chosen is None:
        return cost
    return ModelCost(
        input=chosen.get("input", cost.input),
        output=chosen.get("output", cost.output),
        cache_read=chosen.get("cacheRead", cost.cache_read),
        cache_write=chosen.get("cacheWrite", cost.cache_write),
    )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# -- merging (models.json) -------------------------------------------------------------------


CUSTOM_MODEL_ORDER: tuple[str, ...] = (
    "id", "name", "api", "provider", "baseUrl", "reasoning", "thinkingLevelMap", "input",
    "inputLimits", "cost", "promptCache", "contextWindow", "maxTokens", "samplingParams",
    "samplingParamsByThinkingLevel", "headers", "compat",
)  # fmt: skip
"""The key order of a model pi 1.6.0 builds from a ``models.json`` entry (its wire order)."""


def with_extra(
    model: Model, fields: Mapping[str, Any], order: tuple[str, ...] | None = None
) -> Model:
    """``model`` with ``fields`` set in its extra. Keys keep the order ``model`` is written in
    (new ones follow), or take ``order`` where it names them."""
    if not fields and order is None:
        return model
    written = list(codec.to_json(model))
    keys = written + [key for key in fields if key not in written]
    if order is not None:
        keys = [key for key in order if key in keys] + [key for key in keys if key not in order]
    return attrs.evolve(model, extra=Extra({**(model.extra or {}), **fields}, tuple(keys)))


def with_cost_tiers(cost: ModelCost, tiers: list[Any]) -> ModelCost:
    """``cost`` with ``tiers`` (replacing any it had, as pi does)."""
    current = cost.extra or {}
    order = getattr(current, "order", tuple(current))
    keys = tuple(order) + (() if COST_TIERS in order else (COST_TIERS,))
    return attrs.evolve(cost, extra=Extra({**current, COST_TIERS: tiers}, keys))


def merge_override(model: Model, override: Mapping[str, Any]) -> dict[str, Any]:
    """The extra fields of ``model`` after a ``modelOverrides`` entry (pi's merge rules):
    ``inputLimits`` merges two levels deep, ``promptCache`` and ``samplingParams`` key by key,
    ``samplingParamsByThinkingLevel`` level by level."""
    extra = _extra(model)
    changes: dict[str, Any] = {}
    if isinstance(override.get(INPUT_LIMITS), Mapping):
        changes[INPUT_LIMITS] = _merge_input_limits(extra.get(INPUT_LIMITS), override[INPUT_LIMITS])
    for key in (PROMPT_CACHE, SAMPLING_PARAMS):
        if isinstance(override.get(key), Mapping):
            changes[key] = {**_mapping(extra.get(key)), **override[key]}
    if isinstance(override.get(SAMPLING_PARAMS_BY_LEVEL), Mapping):
        base = _mapping(extra.get(SAMPLING_PARAMS_BY_LEVEL))
        merged = dict(base)
        for level in THINKING_LEVELS:
            params = override[SAMPLING_PARAMS_BY_LEVEL].get(level)
            if params:
                merged[level] = {**_mapping(base.get(level)), **params}
        changes[SAMPLING_PARAMS_BY_LEVEL] = merged
    return changes


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _merge_input_limits(base: Any, override: Mapping[str, Any]) -> dict[str, Any]:
    base_map = _mapping(base)
    merged = {**base_map, **override}
    images = override.get("images")
    if isinstance(images, Mapping):
        base_images = _mapping(base_map.get("images"))
        merged_images = {**base_images, **images}
        if isinstance(images.get("resize"), Mapping):
            merged_images["resize"] = {**_mapping(base_images.get("resize")), **images["resize"]}
        elif "resize" in base_images:
            merged_images["resize"] = base_images["resize"]
        merged["images"] = merged_images
    elif "images" in base_map:
        merged["images"] = base_map["images"]
    return merged
