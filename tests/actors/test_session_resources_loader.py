"""load_resources end to end: options, pi's dirs, input expansion, get_commands entries."""

from __future__ import annotations

from pathlib import Path

import orjson

from pitrio.actors.session.resources import (
    ExpansionError,
    ResourceOptions,
    commands,
    expand_input,
    load_resources,
    render_sections,
    system_prompt_sections,
)
from pitrio.actors.session.resources.system_prompt import DocsPaths
from pitrio.actors.tool_executor.registry import PromptEntry

DOCS = DocsPaths(readme="/docs/README.md")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def project(
    tmp_path: Path, agent_name: tuple[str, ...] = (".pitrio", "agent")
) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    agent = home.joinpath(*agent_name)
    cwd = tmp_path / "proj"
    (cwd / ".git").mkdir(parents=True)
    agent.mkdir(parents=True)
    return home, agent, cwd


def test_everything_loads_together(tmp_path: Path) -> None:
    home, agent, cwd = project(tmp_path)
    write(agent / "settings.json", '{"retry": {"maxRetries": "x"}}')
    write(
        agent / "skills" / "lint" / "SKILL.md", "---\ndescription: Lint code.\n---\nRun the linter."
    )
    write(agent / "skills" / "nodesc" / "SKILL.md", "no frontmatter")
    write(cwd / ".pitrio" / "prompts" / "fix.md", "---\ndescription: Fix it\n---\nFix $1 now.")
    write(cwd / "AGENTS.md", "Project rules.")
    write(agent / "APPEND_SYSTEM.md", "Appended.")
    res = load_resources(cwd, agent, ResourceOptions(home=home, docs=DOCS))
    assert [s.name for s in res.skills] == ["lint"]
    assert [t.name for t in res.templates] == ["fix"]
    assert [f.content for f in res.context_files] == ["Project rules."]
    assert res.system_prompt.append == "Appended."
    assert res.settings.retry.max_retries == 3
    problems = res.problems()
    assert problems[0] == f"{agent / 'settings.json'}: retry.maxRetries: expected a number"
    assert problems[1] == f"{agent / 'skills' / 'nodesc' / 'SKILL.md'}: description is required"
    assert res.skill("lint") is res.skills[0] and res.template("fix") is res.templates[0]
    assert res.skill("nope") is None and res.template("nope") is None

    tools = (PromptEntry(name="read", snippet="Read file contents", guidelines=()),)
    sections = system_prompt_sections(res, tools)
    # pi 1.6.0's tagged sections, in its order; no date line any more.
    names = ["preamble", "tools", "rules", "docs", "addendum", "project_context", "skills", "cwd"]
    assert [section.name for section in sections] == names
    prompt = render_sections(sections)
    assert "\n\n<addendum>\nAppended.\n</addendum>\n\n<project_context>\n" in prompt
    assert f'<project_instructions path="{cwd / "AGENTS.md"}">\nProject rules.\n' in prompt
    assert "<name>lint</name>" in prompt
    assert "- read: Read file contents" in prompt
    assert prompt.endswith(f"\n\n<cwd>\n{cwd}\n</cwd>")
    assert "Current date" not in prompt


def test_options_turn_things_off(tmp_path: Path) -> None:
    home, agent, cwd = project(tmp_path)
    write(agent / "skills" / "lint" / "SKILL.md", "---\ndescription: Lint.\n---\nx")
    write(agent / "prompts" / "fix.md", "Fix.")
    write(cwd / "AGENTS.md", "Rules.")
    extra = write(tmp_path / "extra" / "SKILL.md", "---\ndescription: Extra.\n---\nx")
    res = load_resources(
        cwd,
        agent,
        ResourceOptions(
            home=home,
            no_skills=True,
            no_prompt_templates=True,
            no_context_files=True,
            skill_paths=(str(extra),),
            system_prompt="Custom base.",
            append_system_prompt=("A.", "B."),
        ),
    )
    assert [s.name for s in res.skills] == ["extra"]
    assert res.templates == () and res.context_files == ()
    assert (res.system_prompt.custom_prompt, res.system_prompt.append) == (
        "Custom base.",
        "A.\n\nB.",
    )
    sections = system_prompt_sections(res, None)
    # pi 1.6.0: a custom prompt is the preamble, without the default tools, rules and docs.
    assert [s.name for s in sections] == ["preamble", "addendum", "skills", "cwd"]
    assert sections[0].text == "Custom base."
    assert sections[1].text == "<addendum>\nA.\n\nB.\n</addendum>"


def test_pi_dirs_are_read_when_the_agent_dir_is_pis(tmp_path: Path) -> None:
    home, agent, cwd = project(tmp_path, (".pi", "agent"))
    write(cwd / ".pi" / "settings.json", '{"steeringMode": "all"}')
    write(cwd / ".pi" / "skills" / "pi-skill" / "SKILL.md", "---\ndescription: From .pi\n---\nx")
    write(cwd / ".pi" / "prompts" / "pi-prompt.md", "From .pi")
    write(cwd / ".pi" / "SYSTEM.md", "pi system")
    write(cwd / ".pitrio" / "skills" / "own" / "SKILL.md", "---\ndescription: Own\n---\nx")
    res = load_resources(cwd, agent, ResourceOptions(home=home))
    assert res.settings.steering_mode == "all"
    assert [s.name for s in res.skills] == ["own", "pi-skill"]
    assert [t.name for t in res.templates] == ["pi-prompt"]
    assert res.system_prompt.custom_prompt == "pi system"
    # The same tree seen from pitrio's own agent dir ignores .pi/.
    own = load_resources(cwd, home / ".pitrio" / "agent", ResourceOptions(home=home))
    assert own.settings.steering_mode == "one-at-a-time"
    assert [s.name for s in own.skills] == ["own"]
    assert own.templates == () and own.system_prompt.custom_prompt is None


def test_expand_input_order(tmp_path: Path) -> None:
    home, agent, cwd = project(tmp_path)
    skill_file = write(
        agent / "skills" / "review" / "SKILL.md", "---\ndescription: Review.\n---\nCheck $1 twice."
    )
    write(agent / "prompts" / "review.md", "Template review of $1.")
    write(agent / "prompts" / "skill:review.md", "A template named skill:review.")
    res = load_resources(cwd, agent, ResourceOptions(home=home))
    expanded = expand_input("/skill:review main.py", res)
    # The skill's block is not template-expanded ($1 stays).
    assert expanded.startswith('<skill name="review"')
    assert "Check $1 twice.\n</skill>\n\nmain.py" in expanded
    assert expand_input("/review main.py", res) == "Template review of main.py."
    for unchanged in ["/notacommand hi", "hello /review", "/skill:missing x", "plain"]:
        assert expand_input(unchanged, res) == unchanged

    skill_file.unlink()
    errors: list[ExpansionError] = []
    assert expand_input("/skill:lint x", res, on_error=errors.append) == "/skill:lint x"
    assert errors == []
    # An unreadable skill keeps the text, which then goes on to template expansion (pi's order).
    expanded = expand_input("/skill:review x", res, on_error=errors.append)
    assert expanded == "A template named skill:review."
    assert [e.to_json() for e in errors] == [
        {
            "extensionPath": str(skill_file),
            "event": "skill_expansion",
            "error": "No such file or directory",
        }
    ]


def test_commands_in_get_commands_shape(tmp_path: Path) -> None:
    home, agent, cwd = project(tmp_path)
    write(agent / "settings.json", orjson.dumps({"prompts": ["../../shared"]}).decode())
    write(home / "shared" / "listed.md", "")
    write(cwd / ".pitrio" / "prompts" / "fix.md", "---\ndescription: Fix it\n---\nFix.")
    write(
        agent / "skills" / "hidden" / "SKILL.md",
        "---\ndescription: Manual.\ndisable-model-invocation: true\n---\nx",
    )
    res = load_resources(cwd, agent, ResourceOptions(home=home))
    assert orjson.loads(orjson.dumps(commands(res))) == [
        {
            "name": "fix",
            "description": "Fix it",
            "source": "prompt",
            "sourceInfo": {
                "path": str(cwd / ".pitrio" / "prompts" / "fix.md"),
                "source": "auto",
                "scope": "project",
                "origin": "top-level",
                "baseDir": str(cwd / ".pitrio"),
            },
        },
        {
            "name": "listed",
            "source": "prompt",
            "sourceInfo": {
                "path": str(home / "shared" / "listed.md"),
                "source": "local",
                "scope": "user",
                "origin": "top-level",
            },
        },
        {
            "name": "skill:hidden",
            "description": "Manual.",
            "source": "skill",
            "sourceInfo": {
                "path": str(agent / "skills" / "hidden" / "SKILL.md"),
                "source": "auto",
                "scope": "user",
                "origin": "top-level",
                "baseDir": str(agent),
            },
        },
    ]
