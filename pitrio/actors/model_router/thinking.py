"""Which thinking levels a model supports, and clamping a requested level to them (§3.10)."""

from __future__ import annotations

from pitrio.messages.agent import THINKING_LEVELS, ThinkingLevel
from pitrio.messages.model import Model

DEFAULT_THINKING_LEVEL: ThinkingLevel = "medium"
LEVELS_WITHOUT_MODEL: tuple[ThinkingLevel, ...] = ("off", "minimal", "low", "medium", "high")


def supported_thinking_levels(model: Model | None) -> tuple[ThinkingLevel, ...]:
    """The levels ``model`` accepts, in order.

    Non-reasoning models support only ``off``; a reasoning model supports every level its
    ``thinking_level_map`` does not map to ``null``, and ``xhigh`` only when the map names it.
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
        if level == "xhigh" and level not in mapping:
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
