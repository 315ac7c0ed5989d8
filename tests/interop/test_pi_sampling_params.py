"""pi 1.6.0's ``samplingParams`` and ``samplingParamsByThinkingLevel`` against real pi: the same
models.json sends the same fields in the first request body (issue 34).

Both agents run once in print mode against a loopback vendor speaking the API of the case; the
fields the model's sampling parameters name must carry the same values in both bodies (the
rest of the bodies differ in known ways: system prompt, tools).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pi_outcomes, pitrio_argv, run_print

FIELDS = ("temperature", "top_p", "top_k", "presence_penalty", "reasoning_effort", "reasoning")


def models(api: str, model: dict[str, Any]) -> Any:
    base = "{base}/v1" if api != "anthropic-messages" else "{base}"
    provider = {"baseUrl": base, "api": api, "apiKey": "k", "models": [{"id": "m", **model}]}
    return {"providers": {"mock": provider}}


@dataclass(frozen=True)
class Case:
    """A model and a thinking level; ``sent`` the fields both agents must send."""

    name: str
    api: str
    model: dict[str, Any]
    thinking: str
    sent: dict[str, Any]


SAMPLING = {"temperature": 0.6, "top_p": 0.95}
BY_LEVEL = {"high": {"temperature": 1.0, "top_k": 20}, "off": {"presence_penalty": 1.5}}
CASES = [
    Case(
        "completions, a level with its own params",
        "openai-completions",
        {"reasoning": True, "samplingParams": SAMPLING, "samplingParamsByThinkingLevel": BY_LEVEL},
        "high",
        {"temperature": 1.0, "top_p": 0.95, "top_k": 20},
    ),
    Case(
        "completions, thinking off",
        "openai-completions",
        {"reasoning": True, "samplingParams": SAMPLING, "samplingParamsByThinkingLevel": BY_LEVEL},
        "off",
        {"temperature": 0.6, "top_p": 0.95, "presence_penalty": 1.5},
    ),
    Case(
        "completions, a non-reasoning model runs at off",
        "openai-completions",
        {"samplingParams": SAMPLING, "samplingParamsByThinkingLevel": BY_LEVEL},
        "high",
        {"temperature": 0.6, "top_p": 0.95, "presence_penalty": 1.5},
    ),
    Case(
        "completions, params override a named field",
        "openai-completions",
        {"reasoning": True, "samplingParams": {"reasoning_effort": "custom"}},
        "low",
        {"reasoning_effort": "custom"},
    ),
    Case(
        "responses",
        "openai-responses",
        {"reasoning": True, "samplingParams": SAMPLING, "samplingParamsByThinkingLevel": BY_LEVEL},
        "high",
        {"temperature": 1.0, "top_p": 0.95, "top_k": 20},
    ),
]


def run(case: Case, agent: str, base: Path) -> OneShot:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files = {
        "models.json": models(case.api, case.model),
        "settings.json": {"defaultProvider": "mock", "defaultModel": "m"},
    }
    args = ["-p", "hi", "--thinking", case.thinking]
    shot = run_print(agent, argv, files, args=args, kind=case.api, base=base)
    cleanup(shot)
    return shot


@pytest.fixture(scope="module")
def shots() -> Iterator[dict[tuple[str, str], OneShot]]:
    yield from pi_outcomes(CASES, run, "pitrio-sampling-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_sampling_fields_as_pi(case: Case, shots: dict[tuple[str, str], OneShot]) -> None:
    bodies = {}
    for agent in ("pi", "pitrio"):
        shot = shots[(case.name, agent)]
        assert shot.requests, f"{agent}: exit {shot.exit_code}, {shot.stderr[-400:]!r}"
        body = shot.requests[0]
        bodies[agent] = {key: body[key] for key in (*FIELDS, *case.sent) if key in body}
        for key, value in case.sent.items():
            assert body.get(key) == value, (agent, key, body.get(key))
    assert bodies["pitrio"] == bodies["pi"]
