"""pi 1.6.0's ``compat.thinkingFormat`` values (and the compat flags around them) against real
pi: the same models.json sends the same thinking fields in the first openai-completions request
(issue 34; the catalogue's models use ``openrouter``, ``qwen``, ``deepseek``, ``together``,
``zai``, ``ant-ling`` and ``baseten``).

Every case runs in one RPC process of each agent (``pi_rpc_batch``), with tools (the default
ones): provider ``cN`` of the one models.json is case N's compat block, and each case is a new
session, ``set_model`` to it, ``set_thinking_level`` and one prompt against a loopback vendor
(one process per case cost about a minute of CPU). Two cases also run in print mode, the level
given by ``--thinking``, and must send what their RPC run sent. Only the fields a thinking
format or flag writes are compared (the rest of the bodies differ in known ways: system prompt,
tools).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_install import find_pi
from tests.interop.pi_oneshot import AGENTS, OneShot, cleanup, pi_argv, pitrio_argv, run_print
from tests.interop.pi_rpc_batch import BatchRun, run_cases

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


def provider(case: Case, base: str = "{base}") -> dict[str, Any]:
    """The ``models.json`` provider of a case: its compat block and one reasoning model."""
    model: dict[str, Any] = {"id": "m", "reasoning": True}
    if case.mapped:
        model["thinkingLevelMap"] = LEVEL_MAP
    return {"baseUrl": f"{base}/v1", "api": "openai-completions", "apiKey": "k",
            "compat": case.compat, "models": [model]}  # fmt: skip


def fields_of(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that a thinking format or flag writes."""
    return {key: body[key] for key in FIELDS if key in body}


def run_batch(agent: str) -> BatchRun:
    """Every case by one RPC process of ``agent``: provider ``cN`` is case N's, and each case
    is a new session, that model and thinking level, and one prompt."""
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files = {
        "models.json": {"providers": {f"c{n}": provider(c) for n, c in enumerate(CASES)}},
        "settings.json": {"defaultProvider": "c0", "defaultModel": "m"},
    }
    steps = [
        [
            {"type": "new_session"},
            {"type": "set_model", "provider": f"c{n}", "modelId": "m"},
            {"type": "set_thinking_level", "level": case.thinking},
            {"type": "prompt", "message": "hi"},
        ]
        for n, case in enumerate(CASES)
    ]
    return run_cases(agent, argv, files, steps, kind="openai-completions")


@pytest.fixture(scope="module")
def batches() -> dict[str, BatchRun]:
    if _CLI is None:
        pytest.skip(WHY)
    with ThreadPoolExecutor(2) as pool:
        return dict(zip(AGENTS, pool.map(run_batch, AGENTS), strict=True))


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c.name for c in CASES])
def test_same_thinking_fields_as_pi(index: int, batches: dict[str, BatchRun]) -> None:
    fields = {}
    for agent in AGENTS:
        batch = batches[agent]
        run = batch.cases[index]
        what = f"{agent}: {run.failures}, exit {batch.exit_code}, {batch.stderr[-400:]!r}"
        assert run.requests and not run.failures, what
        fields[agent] = fields_of(run.requests[0])
    assert fields["pitrio"] == fields["pi"]


def run_print_case(case: Case, agent: str, base: Path) -> OneShot:
    """``case`` by ``agent`` in print mode, its level given by ``--thinking``."""
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    files = {
        "models.json": {"providers": {"mock": provider(case)}},
        "settings.json": {"defaultProvider": "mock", "defaultModel": "m"},
    }
    args = ["-p", "hi", "--thinking", case.thinking]
    shot = run_print(agent, argv, files, args=args, kind="openai-completions", base=base)
    cleanup(shot)
    return shot


PRINT_CASES = [CASES[2], CASES[3]]
"""A level reached through ``--thinking`` in print mode (one on, one off, a mapped model)."""


@pytest.mark.parametrize("case", PRINT_CASES, ids=[c.name for c in PRINT_CASES])
def test_same_thinking_fields_as_pi_in_print_mode(
    case: Case, batches: dict[str, BatchRun], tmp_path: Path
) -> None:
    index = CASES.index(case)
    for agent in AGENTS:
        shot = run_print_case(case, agent, tmp_path)
        assert shot.requests, f"{agent}: exit {shot.exit_code}, {shot.stderr[-400:]!r}"
        # the same fields as the case's RPC run, where the level came from set_thinking_level
        assert fields_of(shot.requests[0]) == fields_of(batches[agent].cases[index].requests[0])
