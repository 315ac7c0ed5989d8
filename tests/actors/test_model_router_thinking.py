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
    # pi 1.6.0's max: like xhigh, only where the map names it
    both = attrs.evolve(THINK, thinking_level_map={"xhigh": "xhigh", "max": "max"})
    assert supported_thinking_levels(both)[-2:] == ("xhigh", "max")


@pytest.mark.parametrize(
    ("model_map", "requested", "expected"),
    [
        (None, "high", "high"),
        (None, "xhigh", "high"),  # nothing above: scan down
        ({"minimal": None}, "minimal", "low"),  # scan up first
        ({"minimal": None, "low": None, "medium": None, "high": None}, "low", "off"),
        (None, "bogus", "off"),
        (None, "max", "high"),  # pi 1.6.0's level, nearest below (it used to become "off")
        ({"xhigh": "xhigh"}, "max", "xhigh"),
        ({"max": "max"}, "xhigh", "max"),  # scan up first
        ({"max": "max"}, "max", "max"),
    ],
)
def test_clamp(model_map: dict[str, str | None] | None, requested: str, expected: str) -> None:
    model = attrs.evolve(THINK, thinking_level_map=model_map)
    assert clamp_thinking_level(model, requested) == expected


def test_clamp_non_reasoning_is_off() -> None:
    assert clamp_thinking_level(PLAIN, "high") == "off"


# -- provider parameters (issue 5) -----------------------------------------------------------

from pitrio.actors.model_router.thinking import (  # noqa: E402
    fit_thinking_budget,
    reasoning_effort,
    thinking_budget,
)


def test_reasoning_effort_maps_and_clamps() -> None:
    assert reasoning_effort(PLAIN, "high") is None
    assert reasoning_effort(THINK, None) is None
    assert reasoning_effort(THINK, "off") is None
    assert reasoning_effort(THINK, "medium") == "medium"
    assert reasoning_effort(THINK, "xhigh") == "high"  # clamped down: no xhigh in the map
    levels: dict[str, str | None] = {"off": "none", "minimal": None, "xhigh": "max"}
    mapped = attrs.evolve(THINK, thinking_level_map=levels)
    assert reasoning_effort(mapped, None) == "none"
    assert reasoning_effort(mapped, "minimal") == "low"  # clamped up, then sent by name
    assert reasoning_effort(mapped, "xhigh") == "max"


def test_thinking_budget() -> None:
    assert thinking_budget(PLAIN, "high") is None
    assert thinking_budget(THINK, "off") is None
    assert [thinking_budget(THINK, level) for level in ("minimal", "low", "medium", "high")] == [
        1024,
        2048,
        8192,
        16384,
    ]
    assert thinking_budget(THINK, "high", {"high": 30000}) == 30000
    numeric = attrs.evolve(THINK, thinking_level_map={"low": "3000"})
    assert thinking_budget(numeric, "low", {"low": 1}) == 3000


def test_fit_thinking_budget() -> None:
    assert fit_thinking_budget(32000, 64000, 8192) == (40192, 8192)
    assert fit_thinking_budget(32000, 32000, 16384) == (32000, 16384)
    assert fit_thinking_budget(4096, 4096, 16384) == (4096, 3072)
    assert fit_thinking_budget(500, 800, 1024) == (800, 0)
