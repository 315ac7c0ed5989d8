"""Reading the supervisor's numeric settings from ``settings.json`` values (pure)."""

from __future__ import annotations

from typing import Any


def int_setting(value: Any, default: int) -> int:
    """``value`` as an integer setting: a number (a float is cut to its integer part), or
    ``default`` for anything else (booleans too, which Python counts as integers)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(value)
