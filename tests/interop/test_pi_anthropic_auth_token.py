"""``ANTHROPIC_AUTH_TOKEN`` against real pi 1.6.0: the same credential headers reach a loopback
Anthropic for the same environment and agent directory (the built-in ``anthropic`` provider,
its base URL pointed at the mock by ``models.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import (
    OneShot,
    cleanup,
    outcomes_fixture,
    pi_argv,
    pitrio_argv,
    run_print,
)

MODELS = {"providers": {"anthropic": {"baseUrl": "{base}"}}}
MODEL = "anthropic/claude-haiku-4-5"


@dataclass(frozen=True)
class Case:
    """The environment (and ``auth.json``) of a run, and the headers both must send."""

    name: str
    env: dict[str, str]
    expect: tuple[str | None, str | None]
    auth: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("the token alone", {"ANTHROPIC_AUTH_TOKEN": "tok-1"}, ("Bearer tok-1", None)),
    Case(
        "the token before a key",
        {"ANTHROPIC_AUTH_TOKEN": "tok-2", "ANTHROPIC_API_KEY": "key-2"},
        ("Bearer tok-2", None),
    ),
    Case(
        "a stored key before the token",
        {"ANTHROPIC_AUTH_TOKEN": "tok-3"},
        (None, "stored-3"),
        auth={"anthropic": {"type": "api_key", "key": "stored-3"}},
    ),
    Case("a key alone", {"ANTHROPIC_API_KEY": "key-4"}, (None, "key-4")),
]


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files: dict[str, Any] = {"models.json": MODELS}
    if case.auth:
        files["auth.json"] = case.auth
    shot = run_print(
        agent, argv, files, args=["--model", MODEL, "-p", "hi"], env=case.env, base=base
    )
    try:
        return shot, (shot.headers.get("authorization"), shot.headers.get("x-api-key"))
    finally:
        cleanup(shot)


outcomes = outcomes_fixture(CASES, run_case, "pitrio-auth-token-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_same_credential_headers_as_pi(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, Any]]
) -> None:
    for agent in ("pi", "pitrio"):
        shot, value = outcomes[(case.name, agent)]
        assert shot.exit_code == 0, (agent, shot.stderr[-400:])
        assert value == case.expect, agent
