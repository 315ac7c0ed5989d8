"""Supported thinking levels and clamping (spec §3.10)."""

from __future__ import annotations

import attrs
import pytest

from pitrio.actors.model_router import FAUX_MODELS
from pitrio.actors.model_router.thinking import clamp_thinking_level, supported_thinking_levels

THINK = next(m for m in FAUX_MODELS if m.id == "faux-think")
PLAIN = next(m for m in FAUX_MODELS if m.id == "faux-1")


def test_supported_levels() -> None:
    assert supported_thinking_levels(PLAIN) == ("off",)
    assert supported_thinking_levels(THINK) == ("off", "minimal", "low", "medium", "high")
    assert supported_thinking_levels(None) == ("off", "minimal", "low", "medium", "high")
    mapped = attrs.evolve(THINK, thinking_level_map={"minimal": None, "xhigh": "max"})
    assert supported_thinking_levels(mapped) == ("off", "low", "medium", "high", "xhigh")


@pytest.mark.parametrize(
    ("model_map", "requested", "expected"),
    [
        (None, "high", "high"),
        (None, "xhigh", "high"),  # nothing above: scan down
        ({"minimal": None}, "minimal", "low"),  # scan up first
        ({"minimal": None, "low": None, "medium": None, "high": None}, "low", "off"),
        (None, "bogus", "off"),
    ],
)
def test_clamp(model_map: dict[str, str | None] | None, requested: str, expected: str) -> None:
    model = attrs.evolve(THINK, thinking_level_map=model_map)
    assert clamp_thinking_level(model, requested) == expected


def test_clamp_non_reasoning_is_off() -> None:
    assert clamp_thinking_level(PLAIN, "high") == "off"
