"""The system prompt: pi 1.6.0's sections (names, order, tags) for representative tool sets,
and checked-in expectations.

Set ``PITRIO_UPDATE_EXPECTED=1`` to rewrite ``expected/system_prompt/*.txt`` after a deliberate
change, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from pitrio.actors.session.resources import system_prompt as module
from pitrio.actors.session.resources._common import SourceInfo
from pitrio.actors.session.resources.context_files import ContextFile
from pitrio.actors.session.resources.skills import Skill
from pitrio.actors.session.resources.system_prompt import (
    DocsPaths,
    SystemPromptOptions,
    build_system_prompt,
    build_system_prompt_sections,
    guidelines,
    render_sections,
    section_map,
)
from pitrio.actors.tool_executor.registry import PromptEntry, ToolRegistry
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.actors.tool_executor.tools import create_builtin_tools
from pitrio.messages.agent import AgentToolResult

EXPECTED = Path(__file__).parent / "expected" / "system_prompt"
CWD = "/home/user/project"
DOCS = DocsPaths(
    readme="/opt/pitrio/README.md", docs="/opt/pitrio/docs", examples="/opt/pitrio/examples"
)


async def _not_run(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
    raise AssertionError("prompt tests never run tools")  # pragma: no cover


def entries(*names: str, extra: tuple[AgentTool, ...] = ()) -> tuple[PromptEntry, ...]:
    """The prompt entries of the named built-in tools (and extra tools), in that order."""
    registry = ToolRegistry()
    registry.register([*create_builtin_tools(CWD), *extra], activate=False)
    registry.set_active(list(names))
    return registry.prompt_entries()


DYNAMIC = AgentTool(
    name="dynamic_tool",
    description="A tool an extension registered.",
    execute=_not_run,
    prompt_snippet="Run dynamic\n   test behavior",
    prompt_guidelines=(
        "Use dynamic_tool for dynamic things.",
        "  Use dynamic_tool for dynamic things.  ",
        "   ",
        "Be concise in your responses",
    ),
)
SILENT = AgentTool(name="silent", execute=_not_run)


def skill(name: str, description: str, *, hidden: bool = False) -> Skill:
    path = f"/home/user/.pitrio/agent/skills/{name}/SKILL.md"
    return Skill(
        name=name,
        description=description,
        file_path=path,
        base_dir=os.path.dirname(path),
        source_info=SourceInfo(path=path, source="auto", scope="user"),
        disable_model_invocation=hidden,
    )


SKILLS = (
    skill("pdf-tools", "Extract text & tables from PDF files <fast>."),
    skill("release", "Cut a release; only when asked.", hidden=True),
)
CONTEXT = (
    ContextFile("/home/user/.pitrio/agent/AGENTS.md", "Always answer in English."),
    ContextFile(f"{CWD}/AGENTS.md", "Run `make test` before committing.\n"),
)


def options(**kwargs: object) -> SystemPromptOptions:
    values: dict[str, object] = {"cwd": CWD, "docs": DOCS}
    values.update(kwargs)
    return SystemPromptOptions(**values)  # type: ignore[arg-type]


CASES: dict[str, SystemPromptOptions] = {
    "default_tools": options(tools=entries("read", "bash", "edit", "write")),
    "read_only_tools": options(tools=entries("read", "grep", "find", "ls")),
    "all_builtin_tools": options(
        tools=entries("read", "bash", "edit", "write", "grep", "find", "ls")
    ),
    "no_tools": options(tools=(), docs=None),
    "custom_tool": options(
        tools=entries("read", "bash", "dynamic_tool", "silent", extra=(DYNAMIC, SILENT))
    ),
    "full": options(
        tools=entries("read", "bash", "edit", "write"),
        skills=SKILLS,
        context_files=CONTEXT,
        append_system_prompt="Prefer small commits.",
    ),
    "skills_without_read": options(tools=entries("bash", "edit"), skills=SKILLS),
    "skills_without_reader": options(tools=entries("edit", "write"), skills=SKILLS),
    "custom_prompt": options(
        tools=entries("read", "bash"),
        custom_prompt="You are a careful reviewer.",
        append_system_prompt="Cite line numbers.",
        context_files=CONTEXT,
        skills=SKILLS,
    ),
    "custom_prompt_without_read": options(
        tools=entries("bash"), custom_prompt="You are a careful reviewer.", skills=SKILLS
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_checked_in_expectation(case: str) -> None:
    text = build_system_prompt(CASES[case])
    path = EXPECTED / f"{case}.txt"
    if os.environ.get("PITRIO_UPDATE_EXPECTED"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def section_names(opts: SystemPromptOptions) -> list[str]:
    return [s.name for s in build_system_prompt_sections(opts)]


def test_section_order() -> None:
    # pi 1.6.0's names and order (dist/core/system-prompt.js buildSystemPromptSections).
    assert section_names(CASES["full"]) == [
        "preamble",
        "tools",
        "rules",
        "docs",
        "addendum",
        "project_context",
        "skills",
        "cwd",
    ]
    assert section_names(CASES["custom_prompt"]) == [
        "preamble",
        "addendum",
        "project_context",
        "skills",
        "cwd",
    ]
    assert section_names(CASES["no_tools"]) == ["preamble", "tools", "rules", "cwd"]
    prompt = build_system_prompt(CASES["full"])
    assert prompt == render_sections(build_system_prompt_sections(CASES["full"]))
    assert prompt.endswith(f"\n\n<cwd>\n{CWD}\n</cwd>")
    assert "Current date" not in prompt  # 1.6.0 has no date line


def test_every_section_but_the_preamble_is_tagged_with_its_name() -> None:
    for case in CASES.values():
        sections = build_system_prompt_sections(case)
        assert sections[0].name == "preamble"
        assert not sections[0].text.startswith("<")
        for section in sections[1:]:
            assert section.text.startswith(f"<{section.name}>\n")
            assert section.text.endswith(f"\n</{section.name}>")
        # Rendered as a transcript's system message renders its sections.
        texts = [section.text for section in sections]
        assert build_system_prompt(case) == "\n\n".join(texts)
    custom = build_system_prompt_sections(CASES["custom_prompt"])
    assert custom[0].text == "You are a careful reviewer."
    assert section_map(custom)["addendum"] == "<addendum>\nCite line numbers.\n</addendum>"


def test_project_context_lists_each_file_in_its_own_tag() -> None:
    text = section_map(build_system_prompt_sections(CASES["full"]))["project_context"]
    assert text.startswith("<project_context>\nProject-specific instructions and guidelines:\n\n")
    assert (
        f'<project_instructions path="{CWD}/AGENTS.md">\nRun `make test` before committing.\n\n'
        "</project_instructions>\n</project_context>"
    ) in text
    assert text.count("<project_instructions ") == 2


def test_tools_section() -> None:
    # S107: no tools.
    assert "<tools>\n(none)\n\n" in build_system_prompt(CASES["no_tools"])
    # S109: the default selection lists read, bash, edit and write.
    default = build_system_prompt(CASES["default_tools"])
    assert "<tools>\n- read: " in default
    for name in ("read", "bash", "edit", "write"):
        assert f"\n- {name}: " in default or f"<tools>\n- {name}: " in default
    # S110 / S106: a custom tool's snippet, collapsed to one line; no snippet, no line.
    custom = build_system_prompt(CASES["custom_tool"])
    assert "\n- dynamic_tool: Run dynamic test behavior\n" in custom
    assert "- silent" not in custom


def test_guidelines() -> None:
    # S108: always there.
    assert "- Show file paths clearly when working with files" in build_system_prompt(
        CASES["no_tools"]
    )
    # S111 / S112: tool guidelines join in, trimmed, blanks and repeats dropped.
    tools = CASES["custom_tool"].tools
    assert tools is not None
    assert guidelines(tools) == [
        "Use bash for file operations like ls, rg, find",
        "Use read to examine files instead of cat or sed.",
        "Use dynamic_tool for dynamic things.",
        "Be concise in your responses",
        "Show file paths clearly when working with files",
    ]
    # 1.6.0: with grep, find or ls active, no file-operations rule at all (0.73.1 advised
    # preferring them over bash).
    all_tools = CASES["all_builtin_tools"].tools
    assert all_tools is not None
    rules = guidelines(all_tools)
    assert "Use bash for file operations like ls, rg, find" not in rules
    assert not any(rule.startswith("Prefer grep/find/ls") for rule in rules)
    # Without bash there is no file-operations rule either.
    read_only = CASES["read_only_tools"].tools
    assert read_only is not None
    assert guidelines(read_only)[0] == "Use read to examine files instead of cat or sed."


def test_skills_need_a_tool_that_can_read_their_file() -> None:
    # 1.6.0: read or bash (or no selection known) lists them.
    assert "<available_skills>" in build_system_prompt(CASES["full"])
    assert "<available_skills>" in build_system_prompt(CASES["skills_without_read"])
    assert "<available_skills>" in build_system_prompt(CASES["custom_prompt_without_read"])
    assert "<available_skills>" not in build_system_prompt(CASES["skills_without_reader"])
    unknown = options(tools=None, skills=SKILLS)
    assert "<available_skills>" in build_system_prompt(unknown)
    custom_unknown = options(tools=None, skills=SKILLS, custom_prompt="Custom.")
    assert "<available_skills>" in build_system_prompt(custom_unknown)
    only_hidden = options(tools=entries("read"), skills=SKILLS[1:])
    assert "skills" not in section_names(only_hidden)
    skills = section_map(build_system_prompt_sections(CASES["full"]))["skills"]
    assert skills.startswith("<skills>\n") and skills.endswith("</available_skills>\n</skills>")


def test_empty_custom_and_append_texts_count_as_absent() -> None:
    assert section_names(options(tools=(), custom_prompt="", append_system_prompt="")) == [
        "preamble",
        "tools",
        "rules",
        "docs",
        "cwd",
    ]


def test_cwd_uses_forward_slashes() -> None:
    prompt = build_system_prompt(options(tools=(), cwd="C:\\work\\proj"))
    assert prompt.endswith("<cwd>\nC:/work/proj\n</cwd>")


def test_equal_prompts_of_two_sessions_are_one_string() -> None:
    def build() -> tuple[str, tuple[str, ...]]:
        options = SystemPromptOptions(cwd="/work/project")
        sections = module.build_system_prompt_sections(options)
        return module.render_sections(sections), tuple(section.text for section in sections)

    first_text, first_sections = build()
    second_text, second_sections = build()
    assert second_text == first_text
    assert second_text is first_text  # the second session holds the first one's copy
    assert all(a is b for a, b in zip(first_sections, second_sections, strict=True))


def test_the_shared_prompt_table_is_bounded() -> None:
    for index in range(module.SHARED_TEXTS + 50):
        module.shared_text(f"prompt {index} " * 3)
    assert len(module._SHARED) <= module.SHARED_TEXTS
    held = module.shared_text("kept " * 3)
    assert module.shared_text("".join(["kept "] * 3)) is held
