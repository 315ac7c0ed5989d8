"""pi 1.6.0's ``compat.thinkingFormat`` values (and the compat flags around them) against real
pi: the same models.json sends the same thinking fields in the first openai-completions request
(issue 34; the catalogue's models use ``openrouter``, ``qwen``, ``deepseek``, ``together``,
``zai``, ``ant-ling`` and ``baseten``).

Each case runs in print mode with tools (the default ones), at a thinking level, against a
loopback vendor; only the fields a thinking format or flag writes are compared (the rest of the
bodies differ in known ways: system prompt, tools).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import OneShot, both_agents, cleanup, pi_argv, pitrio_argv, run_print

_NODE, _CLI, WHY = find_pi()
FIELDS = (
    "thinking_token_budget",
    "thinking_budget",
    "reasoning_effort",
    "reasoning",
    "thinking",
    "enable_thinking",
    "chat_template_kwargs",
    "chat_template_args",
    "tool_stream",
    "priority",
)
LEVEL_MAP = {"off": "none", "minimal": None, "high": "hi", "xhigh": "xhigh"}
KWARGS = {
    "enable_thinking": {"$var": "thinking.enabled"},
    "effort": {"$var": "thinking.effort"},
    "hidden": {"$var": "thinking.effort", "omitWhenOff": True},
    "fixed": 7,
}

BUDGET = {"budget": {"$var": "thinking.budget"}, "on": {"$var": "thinking.enabled"}}


@dataclass(frozen=True)
class Case:
    """A compat block, a thinking level, and whether the model maps its levels."""

    compat: dict[str, Any]
    thinking: str
    mapped: bool = False

    @property
    def name(self) -> str:
        flags = ",".join(f"{k}={v}" for k, v in self.compat.items() if k != "chatTemplateKwargs")
        return f"{flags} {self.thinking}{' mapped' if self.mapped else ''}"


FORMATS = ["openai", "openrouter", "deepseek", "together", "zai", "qwen", "qwen-chat-template",
           "ant-ling", "string-thinking"]  # fmt: skip
CASES = [
    *(
        Case({"thinkingFormat": form}, level, mapped)
        for form in FORMATS
        for level, mapped in (("high", False), ("off", False), ("high", True), ("off", True))
    ),
    *(
        Case({"thinkingFormat": form, "supportsReasoningEffort": False}, "high")
        for form in ("openai", "zai", "qwen", "deepseek", "together")
    ),
    Case({"thinkingFormat": "chat-template", "chatTemplateKwargs": KWARGS}, "high", True),
    Case({"thinkingFormat": "chat-template", "chatTemplateKwargs": KWARGS}, "off", True),
    Case({"thinkingFormat": "baseten", "chatTemplateArgs": KWARGS}, "high", True),
    Case({"thinkingFormat": "baseten", "chatTemplateArgs": KWARGS}, "off", True),
    Case({"thinkingFormat": "baseten", "chatTemplateArgs": KWARGS}, "off"),
    Case({"zaiToolStream": True, "vllmPriority": 3}, "high"),
    Case({"thinkingFormat": "qwen", "supportsThinkingTokenBudget": True}, "high"),
    Case({"thinkingTokenBudgetField": "thinking_budget"}, "xhigh"),
    Case({"thinkingTokenBudgetField": "thinking_budget"}, "off"),
    Case({"thinkingFormat": "chat-template", "chatTemplateKwargs": BUDGET}, "low"),
    Case({"thinkingFormat": "baseten", "chatTemplateArgs": BUDGET}, "medium"),
]


def run(case: Case, agent: str, base: Path) -> OneShot:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    model: dict[str, Any] = {"id": "m", "reasoning": True}
    if case.mapped:
        model["thinkingLevelMap"] = LEVEL_MAP
    provider = {"baseUrl": "{base}/v1", "api": "openai-completions", "apiKey": "k",
                "compat": case.compat, "models": [model]}  # fmt: skip
    files = {
        "models.json": {"providers": {"mock": provider}},
        "settings.json": {"defaultProvider": "mock", "defaultModel": "m"},
    }
    args = ["-p", "hi", "--thinking", case.thinking]
    shot = run_print(agent, argv, files, args=args, kind="openai-completions", base=base)
    cleanup(shot)
    return shot


@pytest.fixture(scope="module")
def shots() -> Iterator[dict[tuple[str, str], OneShot]]:
    if _CLI is None:
        pytest.skip(WHY)
    with both_agents(CASES, run, "pitrio-thinking-formats-") as done:
        yield done


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_same_thinking_fields_as_pi(case: Case, shots: dict[tuple[str, str], OneShot]) -> None:
    fields = {}
    for agent in ("pi", "pitrio"):
        shot = shots[(case.name, agent)]
        assert shot.requests, f"{agent}: exit {shot.exit_code}, {shot.stderr[-400:]!r}"
        body = shot.requests[0]
        fields[agent] = {key: body[key] for key in FIELDS if key in body}
    assert fields["pitrio"] == fields["pi"]
