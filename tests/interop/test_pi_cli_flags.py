"""pi 1.6.0's command-line flags against real pi 1.6.0: the effect of each on the first LLM
request (and on the session file where that is the effect), for the same agent directory.

Both agents run in print mode against the same loopback vendor (Anthropic Messages). System
prompts differ between the two in their wording, so a flag's effect is checked where it shows
in both: a marker that must (or must not) be in the system text, the names and order of the
tools declared, the key sent, the session file's id and name. Each case asserts the value
expected *and* that both agents give it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pi_outcomes, pitrio_argv, run_print

SETTINGS = {"defaultProvider": "mock", "defaultModel": "mock-model"}
MODELS = {
    "providers": {
        "mock": {
            "baseUrl": "{base}",
            "api": "anthropic-messages",
            "apiKey": "mock-key",
            "models": [
                {"id": "mock-model", "reasoning": False, "input": ["text"]},
                {"id": "mock-think", "reasoning": True, "input": ["text"]},
            ],
        }
    }
}
SKILL = """---
name: marker-skill
description: SKILL-MARKER-DESC use when asked about markers
---
Body of the skill.
"""
TEMPLATE = """---
description: a template
---
TEMPLATE-MARKER expanded $1
"""
WORK_FILES = {"AGENTS.md": "CONTEXT-MARKER from AGENTS.md\n", "extra-skill/SKILL.md": SKILL}
AGENT_FILES: dict[str, Any] = {
    "models.json": MODELS,
    "settings.json": SETTINGS,
    "skills/marker-skill/SKILL.md": SKILL,
    "prompts/tpl.md": TEMPLATE,
}


def system_text(shot: OneShot) -> str:
    """The first request's system prompt, as one text."""
    if not shot.requests:
        return ""
    system = shot.requests[0].get("system", "")
    if isinstance(system, list):
        return "\n".join(str(block.get("text", "")) for block in system)
    return str(system)


def tool_names(shot: OneShot) -> list[str] | None:
    """The names of the tools the first request declares (``None``: no request)."""
    if not shot.requests:
        return None
    return [tool["name"] for tool in shot.requests[0].get("tools", [])]


def user_text(shot: OneShot) -> str:
    """The text of the first request's last user message."""
    if not shot.requests:
        return ""
    content = shot.requests[0]["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content)


def session_entries(shot: OneShot) -> list[dict[str, Any]]:
    """The lines of the one session file the run left (empty when none)."""
    assert shot.root is not None
    files = sorted((shot.root / "agent" / "sessions").rglob("*.jsonl"))
    if not files:
        return []
    return [json.loads(line) for line in files[-1].read_text().splitlines() if line]


def has(marker: str) -> Callable[[OneShot], bool]:
    return lambda shot: marker in system_text(shot)


@dataclass(frozen=True)
class Case:
    """Flags, and what of the run both agents must agree on (``expect``: its value)."""

    name: str
    args: list[str]
    probe: Callable[[OneShot], Any]
    expect: Any
    env: dict[str, str] = field(default_factory=dict)
    prompt: str = "hi"
    settings: dict[str, Any] = field(default_factory=dict)
    """Keys added to ``settings.json`` (the 1.6.0 settings a case checks)."""


DEFAULT_TOOLS = ["read", "bash", "edit", "write"]
CASES = [
    Case("context files load by default", [], has("CONTEXT-MARKER"), True),
    Case("--no-context-files", ["--no-context-files"], has("CONTEXT-MARKER"), False),
    Case("-nc", ["-nc"], has("CONTEXT-MARKER"), False),
    Case("skills load by default", [], has("SKILL-MARKER-DESC"), True),
    Case("--no-skills", ["--no-skills"], has("SKILL-MARKER-DESC"), False),
    Case("-ns with --skill", ["-ns", "--skill", "extra-skill"], has("SKILL-MARKER-DESC"), True),
    Case("--system-prompt", ["--system-prompt", "SYS-MARKER"], has("SYS-MARKER"), True),
    Case(
        "--append-system-prompt twice",
        ["--append-system-prompt", "APP-ONE", "--append-system-prompt", "APP-TWO"],
        lambda s: ("APP-ONE" in system_text(s), "APP-TWO" in system_text(s)),
        (True, True),
    ),
    Case(
        "a prompt template expands",
        [],
        lambda s: "TEMPLATE-MARKER expanded x" in user_text(s),
        True,
        prompt="/tpl x",
    ),
    Case(
        "--no-prompt-templates",
        ["--no-prompt-templates"],
        lambda s: user_text(s).strip(),
        "/tpl x",
        prompt="/tpl x",
    ),
    Case(
        "--prompt-template with -np",
        ["-np", "--prompt-template", "{agent}/prompts/tpl.md"],
        lambda s: "TEMPLATE-MARKER expanded x" in user_text(s),
        True,
        prompt="/tpl x",
    ),
    Case("default tools", [], tool_names, DEFAULT_TOOLS),
    Case("--tools names", ["--tools", "ls,read"], tool_names, ["ls", "read"]),
    Case("--tools pattern", ["--tools", "ls,*i*"], tool_names, ["ls", "edit", "write", "find"]),
    Case(
        "--tools edits", ["--tools", "+grep,-bash"], tool_names, ["read", "edit", "write", "grep"]
    ),
    Case("--exclude-tools pattern", ["--exclude-tools", "*i*"], tool_names, ["read", "bash"]),
    Case("-xt with --tools", ["-t", "read,ls,find", "-xt", "f*"], tool_names, ["read", "ls"]),
    Case("--no-builtin-tools", ["--no-builtin-tools"], tool_names, []),
    Case("-nbt with --tools", ["-nbt", "--tools", "+ls"], tool_names, ["ls"]),
    Case("--no-tools", ["--no-tools"], tool_names, []),
    Case(
        "--api-key",
        ["--model", "mock/mock-model", "--api-key", "flag-key"],
        lambda s: s.headers.get("x-api-key"),
        "flag-key",
    ),
    Case(
        "--thinking max",
        ["--model", "mock/mock-think", "--thinking", "max"],
        lambda s: (s.requests[0].get("thinking") or {}).get("type") if s.requests else None,
        "enabled",
    ),
    Case(
        "--session-id names the new session",
        ["--session-id", "my-id.1"],
        lambda s: [e.get("id") for e in session_entries(s) if e.get("type") == "session"],
        ["my-id.1"],
    ),
    Case(
        "--name",
        ["--name", "  My Session  "],
        lambda s: [e.get("name") for e in session_entries(s) if e.get("type") == "session_info"],
        ["My Session"],
    ),
    Case("--verbose", ["--verbose"], tool_names, DEFAULT_TOOLS),
    Case("--no-mcp", ["--no-mcp"], tool_names, DEFAULT_TOOLS),
    Case("--approve", ["--approve"], tool_names, DEFAULT_TOOLS),
    Case("-na", ["-na"], tool_names, DEFAULT_TOOLS),
    Case(
        "defaultTools names",
        [],
        tool_names,
        ["ls", "read"],
        settings={"defaultTools": ["ls", "read"]},
    ),
    Case(
        "defaultTools edits",
        [],
        tool_names,
        ["read", "edit", "write", "grep"],
        settings={"defaultTools": ["-bash", "+grep"]},
    ),
    Case("defaultTools empty", [], tool_names, [], settings={"defaultTools": []}),
    Case(
        "--tools edits on defaultTools",
        ["--tools", "+find"],
        tool_names,
        ["ls", "read", "find"],
        settings={"defaultTools": ["ls", "read"]},
    ),
    Case(
        "modelThinkingLevels",
        ["--model", "mock/mock-think"],
        lambda s: (s.requests[0].get("thinking") or {}).get("budget_tokens") if s.requests else 0,
        1024,
        settings={"modelThinkingLevels": {"mock/mock-think": "minimal"}},
    ),
    Case(
        "--thinking beats modelThinkingLevels",
        ["--model", "mock/mock-think", "--thinking", "low"],
        lambda s: (s.requests[0].get("thinking") or {}).get("budget_tokens") if s.requests else 0,
        2048,
        settings={"modelThinkingLevels": {"mock/mock-think": "minimal"}},
    ),
]


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    holder: dict[str, Path] = {}

    def remember(agent_dir: Path, _work: Path) -> None:
        holder["agent"] = agent_dir

    # {agent} in an argument is the run's agent dir (known once the sandbox exists): the
    # sandbox is made by run_print, so such a path is given relative to the work dir instead.
    args = [a.replace("{agent}", "../agent") for a in case.args]
    files = dict(AGENT_FILES)
    files["settings.json"] = {**SETTINGS, **case.settings}
    shot = run_print(
        agent,
        argv,
        files,
        args=[*args, "-p", case.prompt],
        env=case.env,
        base=base,
        work_files=WORK_FILES,
        before=remember,
    )
    try:
        return shot, case.probe(shot)
    finally:
        cleanup(shot)


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[tuple[str, str], tuple[OneShot, Any]]]:
    yield from pi_outcomes(CASES, run_case, "pitrio-cli-flags-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_flag_has_pis_effect(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, Any]]
) -> None:
    for agent in ("pi", "pitrio"):
        shot, value = outcomes[(case.name, agent)]
        what = f"{agent}: exit {shot.exit_code}, stderr {shot.stderr[-400:]!r}"
        assert shot.exit_code == 0, what
        assert value == case.expect, what
