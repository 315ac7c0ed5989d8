"""Skills and prompt templates of installed pi packages reach a session as pi 1.6.0 loads
them: the conventional directories or the manifest's ``pi`` lists, an object entry's filters,
the project's packages before the user's, ``sourceInfo`` with ``origin: package``, and a
package that is not installed reported instead of loaded."""

from __future__ import annotations

import json
from pathlib import Path

from pitrio.actors.session.resources.loader import ResourceOptions, load_resources


def _skill(directory: Path, name: str) -> None:
    (directory / name).mkdir(parents=True)
    (directory / name / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: The {name} skill\n---\nDo {name}.\n"
    )


def _prompt(directory: Path, name: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.md").write_text(f"---\ndescription: {name}\n---\n{name} $1\n")


def _load(tmp_path: Path, packages: list[object], *, trusted: bool = False) -> object:
    agent = tmp_path / "agent"
    agent.mkdir(exist_ok=True)
    (agent / "settings.json").write_text(json.dumps({"packages": packages}))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return load_resources(work, agent, ResourceOptions(home=tmp_path, project_trusted=trusted))


def test_a_local_package_offers_its_skill_and_prompt_directories(tmp_path: Path) -> None:
    package = tmp_path / "demo"
    _skill(package / "skills", "hello")
    _prompt(package / "prompts", "review")
    resources = _load(tmp_path, ["../demo"])
    (skill,) = resources.skills  # type: ignore[attr-defined]
    (template,) = resources.templates  # type: ignore[attr-defined]
    assert (skill.name, template.name) == ("hello", "review")
    assert skill.source_info.to_json() == {
        "path": str(package / "skills" / "hello" / "SKILL.md"),
        "source": "../demo",
        "scope": "user",
        "origin": "package",
        "baseDir": str(package),
    }


def test_the_manifest_and_an_entrys_filters_choose_the_resources(tmp_path: Path) -> None:
    package = tmp_path / "demo"
    _skill(package / "res" / "skills", "one")
    _skill(package / "res" / "skills", "two")
    _skill(package / "skills", "ignored")  # the manifest names where skills are
    _prompt(package / "prompts", "kept")
    (package / "package.json").write_text(
        json.dumps({"name": "demo", "pi": {"skills": ["./res/skills"], "prompts": ["prompts"]}})
    )
    everything = _load(tmp_path, ["../demo"])
    assert sorted(s.name for s in everything.skills) == ["one", "two"]  # type: ignore[attr-defined]
    narrowed = _load(tmp_path, [{"source": "../demo", "skills": ["!**/two/**"], "prompts": []}])
    assert [s.name for s in narrowed.skills] == ["one"]  # type: ignore[attr-defined]
    assert narrowed.templates == ()  # type: ignore[attr-defined]


def test_a_missing_package_is_reported_and_an_npm_one_read_from_its_install_dir(
    tmp_path: Path,
) -> None:
    installed = tmp_path / "agent" / "npm" / "node_modules" / "@x" / "tools"
    _skill(installed / "skills", "tool")
    resources = _load(tmp_path, ["npm:@x/tools@^1", "npm:absent"])
    assert [s.name for s in resources.skills] == ["tool"]  # type: ignore[attr-defined]
    assert resources.skills[0].source_info.source == "npm:@x/tools@^1"  # type: ignore[attr-defined]
    problems = [d.message for d in resources.diagnostics]  # type: ignore[attr-defined]
    assert problems == ["Package npm:absent is not installed (pitrio install npm:absent)"]


def test_a_trusted_projects_package_comes_before_the_users(tmp_path: Path) -> None:
    for name in ("mine", "theirs"):
        _skill(tmp_path / name / "skills", "same")
    project = tmp_path / "work" / ".pitrio"
    project.mkdir(parents=True)
    (project / "settings.json").write_text(json.dumps({"packages": ["../../mine"]}))
    trusted = _load(tmp_path, ["../theirs"], trusted=True)
    (skill,) = trusted.skills  # type: ignore[attr-defined]
    assert (skill.source_info.scope, skill.source_info.source) == ("project", "../../mine")
    untrusted = _load(tmp_path, ["../theirs"])
    (skill,) = untrusted.skills  # type: ignore[attr-defined]
    assert (skill.source_info.scope, skill.source_info.source) == ("user", "../theirs")
