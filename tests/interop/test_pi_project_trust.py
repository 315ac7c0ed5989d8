"""Project trust against real pi 1.6.0: the same agent directory and project (a copy for each
agent) must be trusted or not alike, as the first LLM request shows.

The project has a ``.pi`` dir (pi's layout, agent dir ``<sandbox>/.pi/agent``, where pitrio
reads ``.pi`` too) holding an ``APPEND_SYSTEM.md`` marker, a ``settings.json`` whose
``defaultTools`` is ``ls,read``, and a prompt template; a project ``.agents/skills`` skill;
and an ``AGENTS.md`` that loads either way. Each case asserts the expected value and that
both agents give it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.interop.pi_oneshot import OneShot, cleanup, pi_argv, pi_outcomes, pitrio_argv, run_print
from tests.interop.test_pi_cli_flags import MODELS, SETTINGS, system_text, tool_names, user_text

PROJECT_SKILL = """---
name: project-skill
description: PROJECT-SKILL-MARKER use for project things
---
Body.
"""
WORK_FILES = {
    "AGENTS.md": "CONTEXT-MARKER from AGENTS.md\n",
    ".pi/APPEND_SYSTEM.md": "PROJECT-APPEND-MARKER\n",
    ".pi/settings.json": json.dumps({"defaultTools": ["ls", "read"]}),
    ".pi/prompts/ptpl.md": "---\ndescription: t\n---\nPROJECT-TEMPLATE expanded $1\n",
    ".agents/skills/project-skill/SKILL.md": PROJECT_SKILL,
}
TRUSTED = {"append": True, "tools": ["ls", "read"], "template": True, "skill": True}
UNTRUSTED = {"append": False, "tools": ["read", "bash", "edit", "write"], "skill": False}
UNTRUSTED = {**UNTRUSTED, "template": False}


def observe(shot: OneShot) -> dict[str, Any]:
    """What trust changes in the first request (and the context file, which it does not)."""
    system = system_text(shot)
    return {
        "append": "PROJECT-APPEND-MARKER" in system,
        "tools": tool_names(shot),
        "template": "PROJECT-TEMPLATE expanded x" in user_text(shot),
        "skill": "PROJECT-SKILL-MARKER" in system,
        "context": "CONTEXT-MARKER" in system,
    }


@dataclass(frozen=True)
class Case:
    """Flags, agent settings and saved decisions (``{work}``: the project, ``{parent}``: its
    parent, both canonical), and the outcome both agents must give."""

    name: str
    expect: dict[str, Any]
    args: list[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    saved: dict[str, bool] = field(default_factory=dict)
    mode: list[str] = field(default_factory=lambda: ["-p"])


CASES = [
    Case("ask by default: not trusted in print mode", UNTRUSTED),
    Case("ask in JSON mode: not trusted", UNTRUSTED, mode=["--mode", "json"]),
    Case("--approve", TRUSTED, args=["--approve"]),
    Case("-a", TRUSTED, args=["-a"]),
    Case(
        "--no-approve beats a saved yes", UNTRUSTED, args=["--no-approve"], saved={"{work}": True}
    ),
    Case("-na with defaultProjectTrust always", UNTRUSTED, args=["-na"], settings={"always": 1}),
    Case("a saved yes", TRUSTED, saved={"{work}": True}),
    Case("a saved yes on the parent", TRUSTED, saved={"{parent}": True}),
    Case("the closest saved decision", UNTRUSTED, saved={"{parent}": True, "{work}": False}),
    Case("defaultProjectTrust always", TRUSTED, settings={"always": 1}),
    Case("defaultProjectTrust never", UNTRUSTED, settings={"never": 1}),
    Case("a saved yes beats never", TRUSTED, settings={"never": 1}, saved={"{work}": True}),
    Case("a saved no beats always", UNTRUSTED, settings={"always": 1}, saved={"{work}": False}),
]


def run_case(case: Case, agent: str, base: Path) -> tuple[OneShot, dict[str, Any], Any]:
    argv = pi_argv() if agent == "pi" else pitrio_argv()
    assert argv is not None
    settings = dict(SETTINGS)
    for value in case.settings:
        settings["defaultProjectTrust"] = value
    files = {"models.json": MODELS, "settings.json": settings}
    trust_file: dict[str, Any] = {}

    def save(agent_dir: Path, work: Path) -> None:
        canonical = os.path.realpath(work)
        keys = {"{work}": canonical, "{parent}": os.path.dirname(canonical)}
        if case.saved:
            data = {keys[k]: v for k, v in case.saved.items()}
            (agent_dir / "trust.json").write_text(json.dumps(data, indent=2) + "\n")
        trust_file["path"] = agent_dir / "trust.json"
        trust_file["root"] = os.path.dirname(canonical)

    shot = run_print(
        agent,
        argv,
        files,
        args=[*case.args, *case.mode, "/ptpl x"],
        base=base,
        work_files=WORK_FILES,
        before=save,
        agent_dir_name=".pi/agent",
    )
    try:
        path: Path = trust_file["path"]
        after = json.loads(path.read_text()) if path.exists() else None
        if after is not None:  # keys as the case wrote them, to compare across sandboxes
            names = {
                os.path.join(trust_file["root"], "work"): "{work}",
                trust_file["root"]: "{parent}",
            }
            after = {names.get(key, key): value for key, value in after.items()}
        return shot, observe(shot), after
    finally:
        cleanup(shot)


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[tuple[str, str], tuple[OneShot, dict[str, Any], Any]]]:
    yield from pi_outcomes(CASES, run_case, "pitrio-trust-")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_project_trust_as_pi(
    case: Case, outcomes: dict[tuple[str, str], tuple[OneShot, dict[str, Any], Any]]
) -> None:
    for agent in ("pi", "pitrio"):
        shot, seen, _ = outcomes[(case.name, agent)]
        what = f"{agent}: exit {shot.exit_code}, stderr {shot.stderr[-400:]!r}"
        assert shot.exit_code == 0, what
        assert seen == {**case.expect, "context": True}, what  # AGENTS.md loads either way
    # Neither agent writes trust.json without a dialog: the saved file is as it was.
    for agent in ("pi", "pitrio"):
        assert outcomes[(case.name, agent)][2] == (case.saved or None), agent
