"""The system prompt: sections and order for representative tool sets, checked-in expectations,
and the section patch between runs.

Set ``PITRIO_UPDATE_EXPECTED=1`` to rewrite ``expected/system_prompt/*.txt`` after a deliberate
change, then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from pitrio.actors.session.resources import system_prompt as module
from pitrio.actors.session.resources._common import SourceInfo
from pitrio.actors.session.resources.context_files import ContextFile
from pitrio.actors.session.resources.skills import Skill
from pitrio.actors.session.resources.system_prompt import (
    DocsPaths,
    PromptSection,
    SystemPromptOptions,
    build_system_prompt,
    build_system_prompt_sections,
    guidelines,
    render_sections,
    system_prompt_patch,
)
from pitrio.actors.tool_executor.registry import PromptEntry, ToolRegistry
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.actors.tool_executor.tools import create_builtin_tools
from pitrio.messages.agent import AgentToolResult

EXPECTED = Path(__file__).parent / "expected" / "system_prompt"
CWD = "/home/user/project"
DATE = "2025-06-01"
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
    values: dict[str, object] = {"cwd": CWD, "date": DATE, "docs": DOCS}
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
    assert section_names(CASES["full"]) == [
        "intro",
        "tools",
        "guidelines",
        "docs",
        "append",
        "context",
        "skills",
        "environment",
    ]
    assert section_names(CASES["custom_prompt"]) == [
        "custom",
        "append",
        "context",
        "skills",
        "environment",
    ]
    assert section_names(CASES["no_tools"]) == ["intro", "tools", "guidelines", "environment"]
    prompt = build_system_prompt(CASES["full"])
    assert prompt == render_sections(build_system_prompt_sections(CASES["full"]))
    assert prompt.endswith(f"\nCurrent date: {DATE}\nCurrent working directory: {CWD}")


def test_tools_section() -> None:
    # S107: no tools.
    assert "Available tools:\n(none)\n" in build_system_prompt(CASES["no_tools"])
    # S109: the default selection lists read, bash, edit and write.
    default = build_system_prompt(CASES["default_tools"])
    for name in ("read", "bash", "edit", "write"):
        assert f"\n- {name}: " in default
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
    all_tools = CASES["all_builtin_tools"].tools
    assert all_tools is not None
    assert guidelines(all_tools)[0].startswith("Prefer grep/find/ls tools over bash")
    # Without bash there is no exploration advice.
    read_only = CASES["read_only_tools"].tools
    assert read_only is not None
    assert guidelines(read_only)[0] == "Use read to examine files instead of cat or sed."


def test_skills_need_read_unless_no_selection_is_known() -> None:
    assert "<available_skills>" in build_system_prompt(CASES["full"])
    assert "<available_skills>" not in build_system_prompt(CASES["skills_without_read"])
    assert "<available_skills>" not in build_system_prompt(CASES["custom_prompt_without_read"])
    unknown = options(tools=None, skills=SKILLS)
    assert "<available_skills>" in build_system_prompt(unknown)
    custom_unknown = options(tools=None, skills=SKILLS, custom_prompt="Custom.")
    assert "<available_skills>" in build_system_prompt(custom_unknown)
    only_hidden = options(tools=entries("read"), skills=SKILLS[1:])
    assert "skills" not in section_names(only_hidden)


def test_empty_custom_and_append_texts_count_as_absent() -> None:
    assert section_names(options(tools=(), custom_prompt="", append_system_prompt="")) == [
        "intro",
        "tools",
        "guidelines",
        "docs",
        "environment",
    ]


def test_cwd_uses_forward_slashes() -> None:
    prompt = build_system_prompt(options(tools=(), cwd="C:\\work\\proj"))
    assert prompt.endswith("Current working directory: C:/work/proj")


def test_patch_says_what_changed() -> None:
    before = build_system_prompt_sections(CASES["default_tools"])
    assert system_prompt_patch(before, before) is None

    after = build_system_prompt_sections(
        attrs.evolve(
            CASES["default_tools"],
            tools=entries("read", "bash", "edit", "write", "grep"),
            date="2025-06-02",
            skills=SKILLS,
        )
    )
    patch = system_prompt_patch(before, after)
    assert patch is not None
    assert [(c.name, c.kind) for c in patch.changes] == [
        ("tools", "changed"),
        ("guidelines", "changed"),
        ("skills", "added"),
        ("environment", "changed"),
    ]
    text = patch.render()
    assert '<section name="tools">\nAvailable tools:\n- read: ' in text
    assert "- grep: " in text
    assert '<section name="environment">\nCurrent date: 2025-06-02\n' in text
    assert '<section name="intro">' not in text

    back = system_prompt_patch(after, before)
    assert back is not None
    assert [(c.name, c.kind) for c in back.changes][-1] == ("skills", "removed")
    assert '<section name="skills" removed="true"/>' in back.render()


def test_patch_matches_sections_by_name() -> None:
    one = (PromptSection("a", "x"), PromptSection("b", "y"))
    swapped = (PromptSection("b", "y"), PromptSection("a", "x"))
    assert system_prompt_patch(one, swapped) is None
    assert system_prompt_patch((), one) is not None


def test_equal_prompts_of_two_sessions_are_one_string() -> None:
    def build() -> tuple[str, tuple[str, ...]]:
        options = SystemPromptOptions(cwd="/work/project", date="2026-01-01")
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
