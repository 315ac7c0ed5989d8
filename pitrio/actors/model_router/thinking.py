"""Which thinking levels a model supports, and clamping a requested level to them (§3.10)."""

from __future__ import annotations

from pitrio.messages.agent import THINKING_LEVELS, ThinkingLevel
from pitrio.messages.model import Model

DEFAULT_THINKING_LEVEL: ThinkingLevel = "medium"
LEVELS_WITHOUT_MODEL: tuple[ThinkingLevel, ...] = ("off", "minimal", "low", "medium", "high")


def supported_thinking_levels(model: Model | None) -> tuple[ThinkingLevel, ...]:
    """The levels ``model`` accepts, in order.

    Non-reasoning models support only ``off``; a reasoning model supports every level its
    ``thinking_level_map`` does not map to ``null``, and ``xhigh`` and ``max`` only when the
    map names them (pi 1.6.0's ``getSupportedThinkingLevels``).
    """
    if model is None:
        return LEVELS_WITHOUT_MODEL
    if not model.reasoning:
        return ("off",)
    mapping = model.thinking_level_map or {}
    levels: list[ThinkingLevel] = []
    for level in THINKING_LEVELS:
        if level in mapping and mapping[level] is None:
            continue
        if level in ("xhigh", "max") and level not in mapping:
            continue
        levels.append(level)
    return tuple(levels)


def clamp_thinking_level(model: Model | None, level: str) -> ThinkingLevel:
    """The supported level nearest to ``level``: itself, else the next one up, else down."""
    supported = supported_thinking_levels(model)
    fallback = supported[0] if supported else "off"
    if level not in THINKING_LEVELS:
        return fallback
    for candidate in supported:
        if candidate == level:
            return candidate
    index = THINKING_LEVELS.index(level)
    for candidate in THINKING_LEVELS[index + 1 :]:
        if candidate in supported:
            return candidate
    for candidate in reversed(THINKING_LEVELS[:index]):
        if candidate in supported:
            return candidate
    return fallback


# -- provider parameters (issue 5) -----------------------------------------------------------

DEFAULT_THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}
"""Token budgets of budget-style providers (Anthropic) per level; ``thinkingBudgets`` overrides."""

MIN_OUTPUT_TOKENS = 1024
"""Output tokens kept free for the answer when a thinking budget would eat ``max_tokens``."""


def effective_thinking_level(model: Model, requested: str | None) -> ThinkingLevel:
    """The level a request actually runs at: ``requested`` (``None`` = off) clamped to ``model``.

    Providers clamp again even though the session clamps on every change: a request may come
    from elsewhere (a virtual route, an SDK caller) and the vendor rejects unsupported values.
    """
    return clamp_thinking_level(model, requested or "off")


def reasoning_effort(model: Model, requested: str | None) -> str | None:
    """The effort value for effort-style APIs (OpenAI ``reasoning_effort``), or ``None`` to omit.

    A ``thinking_level_map`` string is the vendor's own name for the level (e.g. ``"none"``
    for ``off``); without one the level's name is sent, except ``off``, which is sent only
    when the map names it (most APIs have no "off" effort and reject unknown values).
    """
    if not model.reasoning:
        return None
    level = effective_thinking_level(model, requested)
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str):
        return mapped
    return None if level == "off" else level


def thinking_budget(
    model: Model, requested: str | None, budgets: dict[str, int] | None = None
) -> int | None:
    """The token budget for budget-style APIs (Anthropic), or ``None`` when thinking is off.

    Precedence: a numeric ``thinking_level_map`` value of the model, then the user's
    ``thinkingBudgets`` setting, then :data:`DEFAULT_THINKING_BUDGETS`.
    """
    if not model.reasoning:
        return None
    level = effective_thinking_level(model, requested)
    if level == "off":
        return None
    mapped = (model.thinking_level_map or {}).get(level)
    if isinstance(mapped, str) and mapped.isdigit():
        return int(mapped)
    if budgets and level in budgets:
        return budgets[level]
    # ``max`` (pi 1.6.0) has no default budget of its own: at least xhigh's
    return DEFAULT_THINKING_BUDGETS.get(level, DEFAULT_THINKING_BUDGETS["xhigh"])


def fit_thinking_budget(max_tokens: int, model_max_tokens: int, budget: int) -> tuple[int, int]:
    """``(max_tokens, budget)`` such that the budget fits inside the output limit.

    The budget is added on top of the requested output (thinking counts as output), capped by
    the model's limit; when the cap leaves no room, the budget shrinks so that at least
    :data:`MIN_OUTPUT_TOKENS` remain for the answer.
    """
    total = min(max_tokens + budget, model_max_tokens)
    if total <= budget:
        budget = max(0, total - MIN_OUTPUT_TOKENS)
    return total, budget
