"""A bridge between a test and the extension file it writes: the file's ``setup(api)`` calls
:data:`setup`, which the test sets to a closure, so handlers can be written inline."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

setup: Callable[[Any], Any] = lambda api: None  # noqa: E731 - replaced by each test

BRIDGE = (
    "from tests.actors import extension_probe as probe\n"
    "\n"
    "def setup(api):\n"
    "    return probe.setup(api)\n"
)


def write_bridge(directory: Path, name: str = "probe_ext.py") -> Path:
    """Write an extension file that defers to :data:`setup`; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(BRIDGE)
    return path
