"""Skills: discovery order and rules on real trees, validation, collisions, /skill: expansion."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pitrio.actors.session.resources._common import SourceInfo
from pitrio.actors.session.resources.settings import Settings, load_settings
from pitrio.actors.session.resources.skills import (
    Skill,
    SkillReadError,
    SkillSet,
    collect_skill_files,
    expand_skill_command,
    format_skills_block,
    load_skill_file,
    load_skills,
    parse_skill_block,
    skill_block,
    validate_skill_name,
)


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def skill_md(
    name: str | None = None, description: str | None = "Does things.", body: str = ""
) -> str:
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    lines += ["---", body or "Instructions."]
    return "\n".join(lines) + "\n"


class Tree:
    """A home, an agent dir and a project (a git repository inside ``work``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.agent = root / "home" / ".pitrio" / "agent"
        self.work = root / "work"
        self.repo = self.work / "repo"
        self.cwd = self.repo / "pkg" / "sub"
        self.cwd.mkdir(parents=True)
        (self.repo / ".git").mkdir()
        self.agent.mkdir(parents=True)

    def load(self, settings: Settings | None = None, **kwargs: object) -> SkillSet:
        return load_skills(
            cwd=str(self.cwd),
            agent_dir=str(self.agent),
            project_dirs=[str(self.cwd / ".pitrio")],
            settings=settings or load_settings(self.agent, str(self.cwd)),
            home=self.home,
            **kwargs,  # type: ignore[arg-type]
        )


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def names(result: SkillSet) -> list[str]:
    return [s.name for s in result.skills]


def warnings(result: SkillSet) -> list[tuple[str, str]]:
    return [
        (os.path.relpath(d.path or "", "/"), d.message)
        for d in result.diagnostics
        if d.kind == "warning"
    ]


def test_every_location_in_order(tree: Tree) -> None:
    write(tree.cwd / ".pitrio" / "skills" / "p1" / "SKILL.md", skill_md())
    write(tree.cwd / ".agents" / "skills" / "a-cwd" / "SKILL.md", skill_md())
    write(tree.repo / "pkg" / ".agents" / "skills" / "a-pkg" / "SKILL.md", skill_md())
    write(tree.repo / ".agents" / "skills" / "a-repo" / "SKILL.md", skill_md())
    # Above the git root: not searched.
    write(tree.work / ".agents" / "skills" / "a-work" / "SKILL.md", skill_md())
    write(tree.agent / "skills" / "u1" / "SKILL.md", skill_md())
    write(tree.home / ".agents" / "skills" / "u2" / "SKILL.md", skill_md())
    extra = write(tree.root / "extra" / "cli" / "SKILL.md", skill_md())
    result = tree.load(cli_paths=[str(extra.parent)])
    assert names(result) == ["p1", "a-cwd", "a-pkg", "a-repo", "u1", "u2", "cli"]
    assert result.diagnostics == ()
    infos = {s.name: s.source_info for s in result.skills}
    assert infos["p1"] == SourceInfo(
        path=str(tree.cwd / ".pitrio" / "skills" / "p1" / "SKILL.md"),
        source="auto",
        scope="project",
        base_dir=str(tree.cwd / ".pitrio"),
    )
    assert infos["a-pkg"].base_dir == str(tree.repo / "pkg" / ".agents")
    assert (infos["u1"].scope, infos["u1"].base_dir) == ("user", str(tree.agent))
    assert (infos["u2"].scope, infos["u2"].base_dir) == ("user", str(tree.home / ".agents"))
    assert (infos["cli"].source, infos["cli"].scope) == ("cli", "temporary")
    assert infos["cli"].to_json() == {
        "path": str(extra),
        "source": "cli",
        "scope": "temporary",
        "origin": "top-level",
    }


def test_outside_a_repository_the_walk_goes_to_the_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    write(tmp_path / "a" / ".agents" / "skills" / "high" / "SKILL.md", skill_md())
    write(tmp_path / ".agents" / "skills" / "higher" / "SKILL.md", skill_md())
    result = load_skills(
        cwd=str(cwd),
        agent_dir=str(tmp_path / "agent"),
        project_dirs=[str(cwd / ".pitrio")],
        settings=Settings(),
        home=home,
    )
    assert names(result) == ["high", "higher"]


def test_home_agents_dir_is_a_user_location_even_when_the_walk_meets_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cwd = home / "project"
    cwd.mkdir(parents=True)
    write(home / ".agents" / "skills" / "mine" / "SKILL.md", skill_md())
    write(home / ".pitrio" / "agent" / "skills" / "agent-skill" / "SKILL.md", skill_md())
    result = load_skills(
        cwd=str(cwd),
        agent_dir=str(home / ".pitrio" / "agent"),
        project_dirs=[str(cwd / ".pitrio")],
        settings=Settings(),
        home=home,
    )
    # Not found as a project skill (it would come first), but after the agent dir's.
    assert names(result) == ["agent-skill", "mine"]
    assert result.skills[1].source_info.scope == "user"


def test_first_name_wins_and_the_collision_is_reported(tree: Tree) -> None:
    winner = write(tree.cwd / ".pitrio" / "skills" / "dup" / "SKILL.md", skill_md())
    loser = write(tree.agent / "skills" / "dup" / "SKILL.md", skill_md(description="Other."))
    result = tree.load()
    assert [(s.name, s.description) for s in result.skills] == [("dup", "Does things.")]
    [collision] = result.diagnostics
    assert collision.kind == "collision"
    assert collision.collision is not None
    assert (collision.collision.winner_path, collision.collision.loser_path) == (
        str(winner),
        str(loser),
    )
    assert "dup" in str(collision) and str(loser) in str(collision)


def test_directory_rules(tree: Tree) -> None:
    skills = tree.agent / "skills"
    write(skills / "loose.md", skill_md(name="loose"))
    write(skills / "README.txt", "not markdown")
    # SKILL.md ends the search in its directory: the nested one is not a skill.
    write(skills / "outer" / "SKILL.md", skill_md())
    write(skills / "outer" / "inner" / "SKILL.md", skill_md(name="inner"))
    write(skills / "outer" / "notes.md", skill_md(name="notes"))
    # Without SKILL.md a directory is searched deeper; loose .md files there are not skills.
    write(skills / "group" / "deep" / "SKILL.md", skill_md())
    write(skills / "group" / "loose-inside.md", skill_md(name="loose-inside"))
    write(skills / ".hidden" / "SKILL.md", skill_md(name="hidden"))
    write(skills / "node_modules" / "dep" / "SKILL.md", skill_md(name="dep"))
    write(skills / "ignored" / "SKILL.md", skill_md(name="ignored"))
    write(skills / "group" / "skip" / "SKILL.md", skill_md(name="skip"))
    write(skills / ".gitignore", "ignored/\n")
    write(skills / "group" / ".ignore", "skip\n")
    result = tree.load()
    assert sorted(names(result)) == ["deep", "loose", "outer"]


def test_loose_files_are_not_skills_in_agents_dirs(tree: Tree) -> None:
    agents = tree.cwd / ".agents" / "skills"
    write(agents / "loose.md", skill_md(name="loose"))
    write(agents / "real" / "SKILL.md", skill_md())
    assert collect_skill_files(str(agents), "agents") == [str(agents / "real" / "SKILL.md")]
    assert names(tree.load()) == ["real"]


def test_a_root_skill_file_makes_the_directory_one_skill(tmp_path: Path) -> None:
    write(tmp_path / "SKILL.md", skill_md())
    write(tmp_path / "other" / "SKILL.md", skill_md())
    assert collect_skill_files(str(tmp_path)) == [str(tmp_path / "SKILL.md")]


def test_symlinks_are_followed_and_a_file_loads_once(tree: Tree) -> None:
    target = write(tree.root / "shared" / "linked" / "SKILL.md", skill_md())
    skills = tree.agent / "skills"
    skills.mkdir()
    (skills / "linked").symlink_to(target.parent)
    (skills / "dangling").symlink_to(tree.root / "nowhere")
    project = tree.cwd / ".pitrio" / "skills"
    project.mkdir(parents=True)
    (project / "linked").symlink_to(target.parent)
    result = tree.load()
    assert names(result) == ["linked"]
    assert result.skills[0].source_info.scope == "project"
    assert result.diagnostics == ()  # the same file is not a collision


def test_validation_warnings(tree: Tree) -> None:
    skills = tree.agent / "skills"
    write(skills / "Bad_Name" / "SKILL.md", skill_md())
    write(skills / "renamed" / "SKILL.md", skill_md(name="other-name"))
    write(skills / "-dash-" / "SKILL.md", skill_md())
    write(skills / "a--b" / "SKILL.md", skill_md())
    write(skills / ("x" * 65) / "SKILL.md", skill_md())
    write(skills / "wordy" / "SKILL.md", skill_md(description="d" * 1025))
    write(skills / "missing" / "SKILL.md", skill_md(description=None))
    write(skills / "blank" / "SKILL.md", skill_md(description='"   "'))
    write(skills / "broken" / "SKILL.md", "---\ndescription: [unclosed\n---\nbody\n")
    write(skills / "listy" / "SKILL.md", skill_md(description="[a, b]"))
    result = tree.load()
    # Everything with a description loads; the warnings say what is wrong.
    assert sorted(names(result)) == sorted(
        ["Bad_Name", "other-name", "-dash-", "a--b", "x" * 65, "wordy"]
    )
    messages = {(Path(p).parent.name, m) for p, m in warnings(result)}
    assert ("Bad_Name", validate_skill_name("Bad_Name", "Bad_Name")[0]) in messages
    assert (
        "renamed",
        'name "other-name" does not match parent directory "renamed"',
    ) in messages
    assert ("-dash-", "name must not start or end with a hyphen") in messages
    assert ("a--b", "name must not contain consecutive hyphens") in messages
    assert ("x" * 65, "name exceeds 64 characters (65)") in messages
    assert ("wordy", "description exceeds 1024 characters (1025)") in messages
    assert ("missing", "description is required") in messages
    assert ("blank", "description is required") in messages
    assert ("listy", "description must be a string") in messages
    assert any(d == "broken" and m.startswith("invalid YAML frontmatter") for d, m in messages)


def test_validate_skill_name() -> None:
    assert validate_skill_name("good-name-2", "good-name-2") == []
    assert validate_skill_name("Good", "Good") == [
        "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
    ]


def test_settings_lists_add_and_filter(tree: Tree) -> None:
    write(tree.agent / "skills" / "keep" / "SKILL.md", skill_md())
    write(tree.agent / "skills" / "drop" / "SKILL.md", skill_md())
    write(tree.agent / "skills" / "forced" / "SKILL.md", skill_md())
    write(tree.root / "lib" / "listed" / "SKILL.md", skill_md())
    write(tree.root / "lib" / "other" / "SKILL.md", skill_md())
    write(tree.root / "single.md", skill_md(name="single"))
    settings = Settings(
        global_values={
            "skills": [
                "../../../lib",
                "../../../single.md",
                "../../../does-not-exist",
                "!skills/*",
                "+skills/forced",
                "-../../../lib/other",
            ]
        }
    )
    result = tree.load(settings)
    # Listed paths come before the agent dir's own skills (user settings outrank user auto).
    assert names(result) == ["listed", "single", "forced"]
    assert result.skills[0].source_info == SourceInfo(
        path=str(tree.root / "lib" / "listed" / "SKILL.md"), source="local", scope="user"
    )
    assert [m for _, m in warnings(result)] == [
        "skill path does not exist",
        # pi's rule holds for loose files too: the name is compared with the parent dir.
        f'name "single" does not match parent directory "{tree.root.name}"',
    ]


def test_project_settings_resolve_against_the_project_dir(tree: Tree) -> None:
    write(tree.cwd / ".pitrio" / "settings.json", '{"skills": ["team-skills"]}')
    write(tree.cwd / ".pitrio" / "team-skills" / "team" / "SKILL.md", skill_md())
    write(tree.cwd / ".pitrio" / "skills" / "auto" / "SKILL.md", skill_md())
    result = tree.load()
    assert names(result) == ["team", "auto"]
    assert result.skills[0].source_info.scope == "project"


def test_no_skills_keeps_cli_paths(tree: Tree) -> None:
    write(tree.agent / "skills" / "default" / "SKILL.md", skill_md())
    cli_file = write(tree.root / "one" / "SKILL.md", skill_md())
    result = tree.load(
        cli_paths=[str(cli_file), str(tree.root / "missing"), str(write(tree.root / "x.txt"))],
        include_defaults=False,
    )
    assert names(result) == ["one"]
    assert [m for _, m in warnings(result)] == [
        "skill path does not exist",
        "skill path is not a markdown file",
    ]


def test_cli_paths_come_last(tree: Tree) -> None:
    write(tree.agent / "skills" / "same" / "SKILL.md", skill_md(description="From the agent dir."))
    cli = write(tree.root / "cli" / "same" / "SKILL.md", skill_md(description="From the CLI."))
    result = tree.load(cli_paths=[str(cli.parent.parent)])
    assert [s.description for s in result.skills] == ["From the agent dir."]
    assert result.diagnostics[0].kind == "collision"


def test_frontmatter_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path / "hidden" / "SKILL.md",
        "---\ndescription: Manual only.\ndisable-model-invocation: true\n---\nDo it by hand.\n",
    )
    info = SourceInfo(path=str(path), source="cli", scope="temporary")
    skill, problems = load_skill_file(str(path), info)
    assert problems == []
    assert skill is not None and skill.disable_model_invocation
    assert skill.base_dir == str(tmp_path / "hidden")


def test_frontmatter_reads_booleans_as_yaml_1_2(tmp_path: Path) -> None:
    path = write(
        tmp_path / "yes" / "SKILL.md",
        "---\ndescription: Yes\ndisable-model-invocation: yes\n---\nbody\n",
    )
    info = SourceInfo(path=str(path), source="cli", scope="temporary")
    skill, problems = load_skill_file(str(path), info)
    # pi's parser reads YAML 1.2: "yes" is a string, and only `true` hides a skill.
    assert problems == []
    assert skill is not None
    assert (skill.description, skill.disable_model_invocation) == ("Yes", False)


def make_skill(name: str, description: str, path: str, *, hidden: bool = False) -> Skill:
    return Skill(
        name=name,
        description=description,
        file_path=path,
        base_dir=os.path.dirname(path),
        source_info=SourceInfo(path=path, source="auto", scope="user"),
        disable_model_invocation=hidden,
    )


def test_skills_block_escapes_and_hides() -> None:
    block = format_skills_block(
        [
            make_skill("a", "Use <this> & \"that\" 'here'", "/s/a/SKILL.md"),
            make_skill("b", "Hidden", "/s/b/SKILL.md", hidden=True),
        ]
    )
    assert block.startswith("\n\n")
    assert block.endswith(
        "\n\n<available_skills>\n"
        "  <skill>\n"
        "    <name>a</name>\n"
        "    <description>Use &lt;this&gt; &amp; &quot;that&quot; &apos;here&apos;</description>\n"
        "    <location>/s/a/SKILL.md</location>\n"
        "  </skill>\n"
        "</available_skills>"
    )
    assert len(block.split("\n")) == 2 + 3 + 1 + 7
    assert format_skills_block([make_skill("b", "Hidden", "/s/b/SKILL.md", hidden=True)]) == ""


def test_skill_command_expansion(tmp_path: Path) -> None:
    path = write(
        tmp_path / "deploy" / "SKILL.md",
        "---\ndescription: Deploy.\n---\n\n  Step one.\nStep two.  \n\n",
    )
    skill = make_skill("deploy", "Deploy.", str(path), hidden=True)
    header = f'<skill name="deploy" location="{path}">\nReferences are relative to {path.parent}.'
    assert expand_skill_command("/skill:deploy", [skill]) == (
        f"{header}\n\nStep one.\nStep two.\n</skill>"
    )
    assert expand_skill_command("/skill:deploy   to prod  ", [skill]) == (
        f"{header}\n\nStep one.\nStep two.\n</skill>\n\nto prod"
    )
    # Unknown names and other texts are left alone.
    assert expand_skill_command("/skill:nope x", [skill]) == "/skill:nope x"
    assert expand_skill_command("/skill:", [skill]) == "/skill:"
    assert expand_skill_command(" /skill:deploy", [skill]) == " /skill:deploy"
    assert expand_skill_command("/deploy", [skill]) == "/deploy"
    path.unlink()
    with pytest.raises(SkillReadError) as caught:
        expand_skill_command("/skill:deploy", [skill])
    assert caught.value.skill is skill


def test_parse_skill_block_round_trips() -> None:
    skill = make_skill("s", "d", "/x/s/SKILL.md")
    text = skill_block(skill, "Body\n\nmore", "the args\nspan lines")
    parsed = parse_skill_block(text)
    assert parsed is not None
    assert (parsed.name, parsed.location) == ("s", "/x/s/SKILL.md")
    assert parsed.content == "References are relative to /x/s.\n\nBody\n\nmore"
    assert parsed.user_message == "the args\nspan lines"
    plain = parse_skill_block(skill_block(skill, "Body"))
    assert plain is not None and plain.user_message is None
    assert parse_skill_block("say " + skill_block(skill, "Body")) is None
    assert parse_skill_block(skill_block(skill, "Body") + " trailing") is None
