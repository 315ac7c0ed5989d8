"""Configured values against real pi 1.6.0: the same agent directory (a copy for each agent)
and environment give the same key and header values at a loopback vendor.

Each case is run by both agents in print mode (``-p``); the vendor (Anthropic's Messages API,
whose ``x-api-key`` header carries the key) records the first request. A case names what both
must send, so a test fails when pitrio differs from pi *or* when pi changed under us; ``None``
means neither may send a request (no key: exit 1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pi_outcomes, pitrio_argv, run_print

SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}
BUILTIN = {"defaultProvider": "anthropic", "defaultModel": "claude-sonnet-4-5"}


def mock_models(api_key: str | None = "mk", headers: dict[str, str] | None = None) -> Any:
    """A custom provider ``mock`` on the vendor (Anthropic Messages)."""
    provider: dict[str, Any] = {
        "baseUrl": "{base}",
        "api": "anthropic-messages",
        "models": [{"id": "mock-model", "reasoning": False, "input": ["text"]}],
    }
    if api_key is not None:
        provider["apiKey"] = api_key
    if headers is not None:
        provider["headers"] = headers
    return {"providers": {"mock": provider}}


def anthropic_models(api_key: str | None = None) -> Any:
    """The built-in ``anthropic`` provider routed to the vendor."""
    provider: dict[str, Any] = {"baseUrl": "{base}"}
    if api_key is not None:
        provider["apiKey"] = api_key
    return {"providers": {"anthropic": provider}}


@dataclass(frozen=True)
class Case:
    """One agent directory and environment, and the key (and header) both agents send."""

    name: str
    models: Any
    key: str | None
    env: dict[str, str] = field(default_factory=dict)
    auth: Any = None
    header: str | None = None
    settings: Any = field(default_factory=lambda: SETTINGS)


CASES = [
    Case("bare name is a literal", mock_models("MYKEY"), "MYKEY", {"MYKEY": "from-env"}),
    Case("dollar name", mock_models("$MYKEY"), "from-env", {"MYKEY": "from-env"}),
    Case(
        "template with escapes",
        mock_models("pre-${MYKEY}-$MYKEY2.x$$y$!z$-${bad name}"),
        "pre-A-B.x$y!z$-${bad name}",
        {"MYKEY": "A", "MYKEY2": "B"},
    ),
    Case("unset variable", mock_models("$NOPE"), None),
    Case("empty variable", mock_models("$EMPTY"), None, {"EMPTY": ""}),
    Case("command", mock_models("!echo '  from-cmd  '"), "from-cmd"),
    Case("two bangs are one command", mock_models("!!echo x"), None),
    Case(
        "header template",
        mock_models("k", {"X-Custom": "v-$MYKEY"}),
        "k",
        {"MYKEY": "A"},
        header="v-A",
    ),
    Case("header with an unset variable", mock_models("k", {"X-Custom": "v-$NOPE"}), None),
    Case(
        "auth.json template",
        mock_models(),
        "a-A",
        {"MYKEY": "A"},
        auth={"mock": {"type": "api_key", "key": "a-$MYKEY"}},
    ),
    Case(
        "auth.json env object first",
        mock_models(),
        "a-scoped",
        {"MYKEY": "A"},
        auth={"mock": {"type": "api_key", "key": "a-$MYKEY", "env": {"MYKEY": "scoped"}}},
    ),
    Case(
        "auth.json key unresolved: no fallback to models.json",
        mock_models(),
        None,
        auth={"mock": {"type": "api_key", "key": "a-$NOPE"}},
    ),
    Case(
        "auth.json without a key",
        mock_models(),
        None,
        auth={"mock": {"type": "api_key", "env": {"X": "y"}}},
    ),
    Case(
        "auth.json env object in headers",
        mock_models("k", {"X-Custom": "$HV"}),
        "k",
        auth={"mock": {"type": "api_key", "key": "k", "env": {"HV": "from-entry"}}},
        header="from-entry",
    ),
    Case(
        "models.json key beats the variable",
        anthropic_models("from-models"),
        "from-models",
        {"ANTHROPIC_API_KEY": "from-env"},
        settings=BUILTIN,
    ),
    Case(
        "auth.json beats models.json",
        anthropic_models("from-models"),
        "from-auth",
        {"ANTHROPIC_API_KEY": "from-env"},
        auth={"anthropic": {"type": "api_key", "key": "from-auth"}},
        settings=BUILTIN,
    ),
    Case(
        "auth.json key unresolved: a built-in's variable",
        anthropic_models(),
        "from-env",
        {"ANTHROPIC_API_KEY": "from-env"},
        auth={"anthropic": {"type": "api_key", "key": "$NOPE"}},
        settings=BUILTIN,
    ),
    Case(
        "auth.json env object is not a key source",
        anthropic_models(),
        None,
        auth={"anthropic": {"type": "api_key", "env": {"ANTHROPIC_API_KEY": "from-entry"}}},
        settings=BUILTIN,
    ),
    Case(
        "models.json variable unset: the built-in's variable is not tried",
        anthropic_models("$NOPE"),
        None,
        {"ANTHROPIC_API_KEY": "from-env"},
        settings=BUILTIN,
    ),
]


def run_case(case: Case, agent: str, base: Path) -> OneShot:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files: dict[str, Any] = {"models.json": case.models, "settings.json": case.settings}
    if case.auth is not None:
        files["auth.json"] = case.auth
    shot = run_print(agent, argv, files, args=["-p", "hi"], env=case.env, base=base)
    cleanup(shot)
    return shot


@pytest.fixture(scope="module")
def shots() -> Iterator[dict[tuple[str, str], OneShot]]:
    yield from pi_outcomes(CASES, run_case, "pitrio-config-values-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_resolved_values_as_pi(case: Case, shots: dict[tuple[str, str], OneShot]) -> None:
    for agent in ("pi", "pitrio"):
        shot = shots[(case.name, agent)]
        what = f"{agent}: exit {shot.exit_code}, stderr {shot.stderr[-400:]!r}"
        if case.key is None:
            assert shot.requests == [], what
            assert shot.exit_code == 1, what
            continue
        assert shot.exit_code == 0, what
        assert shot.headers.get("x-api-key") == case.key, what
        assert shot.headers.get("x-custom") == case.header, what
