"""``pitrio.sdk``, the transports' way to the actors (issue 22): what importing it loads.

The SDK is split into modules so a plain start does not pay for the parts it does not use
(``DESIGN-NOTES.md``, issue 22). Checked in a fresh interpreter, since this test process has
imported everything already.
"""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

# What the command line's start (print mode; ``--mode rpc`` adds the session runtime) must
# not load: the optional PostgreSQL driver and store, the trace reader, the daemon's host.
NOT_AT_START = (
    "psycopg",
    "pitrio.sdk.postgres",
    "pitrio.actors.session_store.postgres.backend",
    "pitrio.sdk.trace",
    "pitrio.actors.trace.replay",
    "pitrio.actors.trace.summary",
    "pitrio.sdk.host",
    "pitrio.actors.host",
)


def loaded_after(*modules: str) -> set[str]:
    """The modules a fresh interpreter holds after importing ``modules``."""
    code = (
        "import importlib, sys, json\n"
        f"for name in {list(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(orjson.loads(result.stdout))


@pytest.mark.parametrize(
    "transport",
    [
        "pitrio.transports.cli",
        "pitrio.transports.rpc.server",
        "pitrio.transports.rpc.process",
        "pitrio.sdk",
    ],
)
def test_a_plain_start_loads_no_optional_part(transport: str) -> None:
    loaded = loaded_after(transport)
    assert not loaded & set(NOT_AT_START), sorted(loaded & set(NOT_AT_START))


def test_the_sdk_package_itself_loads_nothing_but_pitrio() -> None:
    """``pitrio.sdk`` imports none of its modules: importing it costs nothing over ``pitrio``."""
    extra = loaded_after("pitrio", "pitrio.sdk") - loaded_after("pitrio")
    assert extra == {"pitrio.sdk"}


def test_the_lazy_parts_load_what_they_name() -> None:
    """The lazy modules do carry the optional parts (so importing them late is what defers
    them): the trace reader, and the store when the driver is installed."""
    assert {"pitrio.actors.trace.replay", "pitrio.actors.trace.summary"} <= loaded_after(
        "pitrio.sdk.trace"
    )
    pytest.importorskip("psycopg")
    assert "psycopg" in loaded_after("pitrio.sdk.postgres")


def test_pitrio_serves_exactly_the_sdk_modules_names() -> None:
    # pitrio/__init__.py serves pitrio.sdk.agent's __all__ (what type checkers see through
    # pitrio), and nothing else of that module.
    import pitrio
    from pitrio.sdk import agent

    assert all(getattr(pitrio, name) is getattr(agent, name) for name in agent.__all__)
    assert set(pitrio.__all__) <= set(agent.__all__) <= set(dir(pitrio))
    for other in ("asynccontextmanager", "trio", "os", "_attrs_cache_missing"):
        assert not hasattr(pitrio, other), other


def test_a_submodule_taken_from_pitrio_does_not_load_the_sdk() -> None:
    # The import system asks pitrio for a submodule's name before importing it.
    code = (
        "import json, sys\n"
        "from pitrio import telemetry, errors\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    loaded = set(orjson.loads(result.stdout))
    assert {"pitrio.telemetry", "pitrio.errors"} <= loaded
    assert "pitrio.sdk.agent" not in loaded
