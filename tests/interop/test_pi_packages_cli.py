"""``pitrio install|remove|uninstall|list|update`` against real pi 1.6.0's package commands,
offline: a local package directory and an npm tarball of it (``npm:name@file:...``, which npm
installs without a registry). The same command lines give the same exit statuses, leave the
same ``packages`` in the user's and the project's settings, print the same messages (pi's
name replaced by pitrio's) and list the same packages at the same places.

Each agent runs the whole sequence in its own sandbox. npm's own output (``added 1 package``,
its notices) is left out of the comparison: it is npm's, not the agent's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest

from tests.interop.pi_oneshot import base_env, outcomes_fixture, run_in, sandbox

TARBALL = "@TARBALL@"
STEPS: list[list[str]] = [
    ["install", "../demo"],
    ["install", f"npm:demo-pkg@file:{TARBALL}"],
    ["install", "./missing"],
    ["install", "-l", "../demo"],
    ["list"],  # the project's settings make it one to trust: its packages are left out
    ["list", "-a"],
    ["remove", "npm:demo-pkg"],
    ["remove", "npm:nothere"],
    ["uninstall", "-l", "../demo"],  # its settings now make the project one to trust
    ["uninstall", "-l", "--approve", "../demo"],
    ["list"],
    ["install"],
    ["list", "--bogus"],
    ["list", "extra"],
    ["install", "--extensions", "x"],
    ["update", "--models", "--all"],
    ["update", "--extension"],
    ["update", "x", "--all"],
    ["update", "--extension", "npm:nothere"],
    ["remove", "../demo"],
    ["list"],
]
OWN_PREFIXES = ("Install", "Remov", "User packages", "Project", "No ", "  ", "Usage")
OWN_ERRORS = ("Error", "Unknown", "Unexpected", "--", "Missing", "positional")
"""The lines the agents print themselves (the rest is npm's)."""


def _own(text: str, agent: str, root: Path) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = line.replace(str(root), "<root>").replace(str(root.resolve()), "<root>")
        if agent == "pi":  # the agents name themselves in usage lines
            line = line.replace("pi ", "pitrio ").replace('"pi --help"', '"pitrio --help"')
        if line.startswith((*OWN_PREFIXES, *OWN_ERRORS)):
            lines.append(line)
    return lines


def _demo(root: Path) -> Path:
    """A package with one skill, and its npm tarball."""
    demo = root / "demo"
    (demo / "skills" / "hello").mkdir(parents=True)
    (demo / "package.json").write_text(json.dumps({"name": "demo-pkg", "version": "1.0.0"}))
    (demo / "skills" / "hello" / "SKILL.md").write_text(
        "---\nname: hello\ndescription: Say hello\n---\nSay hello.\n"
    )
    (demo / "prompts").mkdir()
    (demo / "prompts" / "review.md").write_text("---\ndescription: Review it\n---\nReview $1\n")
    subprocess.run(["npm", "pack", "--silent"], cwd=demo, check=True, capture_output=True)
    return demo / "demo-pkg-1.0.0.tgz"


def run_all(agent: str, base: Path) -> dict[str, Any]:
    """Run :data:`STEPS` in a fresh sandbox; statuses, messages and the settings left."""
    box = sandbox(agent, base)
    argv, root, agent_dir, work = box.argv, box.root, box.agent_dir, box.work
    tarball = _demo(root)
    env = base_env(root, agent_dir)
    codes, out, err = [], [], []
    for step in STEPS:
        args = [word.replace(TARBALL, str(tarball)) for word in step]
        done = run_in([*argv, *args], work, env)
        codes.append(done.returncode)
        out.append(_own(done.stdout, agent, root))
        err.append(_own(done.stderr, agent, root))
    # Installed again: what a session of this directory offers from it.
    run_in([*argv, "install", "../demo"], work, env)
    request = json.dumps({"id": "c", "type": "get_commands"}) + "\n"
    asked = run_in([*argv, "--mode", "rpc", "--no-session"], work, env, request)
    answer = next(json.loads(x) for x in asked.stdout.splitlines() if '"id":"c"' in x)
    offered = [
        json.loads(json.dumps(c).replace(str(root), "<root>"))
        for c in answer["data"]["commands"]
        if c["sourceInfo"]["origin"] == "package"
    ]
    project = work / (".pi" if agent == "pi" else ".pitrio") / "settings.json"
    settings = {
        "user": json.loads((agent_dir / "settings.json").read_text()),
        "project": json.loads(project.read_text()) if project.exists() else None,
    }
    return {"codes": codes, "out": out, "err": err, "settings": settings, "offered": offered}


@attrs.frozen
class Sequence:
    """The one case: :data:`STEPS`, run by each agent in its own sandbox."""

    name: str = "packages"


pytestmark = pytest.mark.skipif(
    shutil.which("npm") is None, reason="no npm to pack and install the package with"
)
outcomes_by_case = outcomes_fixture(
    [Sequence()], lambda _case, agent, base: run_all(agent, base), "pitrio-packages-cli-"
)


@pytest.fixture(scope="module")
def outcomes(outcomes_by_case: dict[tuple[str, str], Any]) -> dict[str, dict[str, Any]]:
    """Each agent's statuses, messages and settings."""
    return {agent: outcomes_by_case[("packages", agent)] for agent in ("pi", "pitrio")}


def test_exit_statuses_are_pis(outcomes: dict[str, dict[str, Any]]) -> None:
    # "list extra": pi's list takes a source word and ignores it.
    expected = [0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0]
    assert outcomes["pi"]["codes"] == expected
    assert outcomes["pitrio"]["codes"] == expected


def test_the_settings_left_are_pis(outcomes: dict[str, dict[str, Any]]) -> None:
    settings = outcomes["pi"]["settings"]
    assert settings == {"user": {"packages": ["../demo"]}, "project": {"packages": []}}
    assert outcomes["pi"]["err"][8] == [
        "Project is not trusted. Use --approve to modify local package config."
    ]
    assert outcomes["pitrio"]["settings"] == settings


def test_the_messages_and_listings_are_pis(outcomes: dict[str, dict[str, Any]]) -> None:
    pi, pitrio = outcomes["pi"], outcomes["pitrio"]
    user = [
        "User packages:",
        "  ../demo",
        "    <root>/demo",
        "  npm:demo-pkg@file:<root>/demo/demo-pkg-1.0.0.tgz",
        "    <root>/agent/npm/node_modules/demo-pkg",
    ]
    assert pi["out"][4] == user
    assert pi["out"][5] == [
        *user,
        "Project packages:",
        "  ../../demo",
        "    <root>/demo",
    ]
    for index, step in enumerate(STEPS):
        assert (index, step, pitrio["out"][index]) == (index, step, pi["out"][index])
        assert (index, step, pitrio["err"][index]) == (index, step, pi["err"][index])


def test_a_session_offers_the_packages_skill_and_prompt_as_pi(
    outcomes: dict[str, dict[str, Any]],
) -> None:
    offered = outcomes["pi"]["offered"]
    assert [(c["name"], c["source"]) for c in offered] == [
        ("review", "prompt"),
        ("skill:hello", "skill"),
    ]
    assert offered[1]["sourceInfo"] == {
        "path": "<root>/demo/skills/hello/SKILL.md",
        "source": "../demo",
        "scope": "user",
        "origin": "package",
        "baseDir": "<root>/demo",
    }
    assert outcomes["pitrio"]["offered"] == offered
