"""The system prompt, built as named sections (pi 1.6.0's structure).

Default prompt, in order: ``preamble`` (who the assistant is), ``tools`` (one
``- name: snippet`` line per active tool that has a snippet, ``(none)`` otherwise, and a note
that more tools may exist), ``rules`` (the guideline bullets), ``docs`` (where pitrio's own
documentation is), ``addendum`` (``--append-system-prompt`` / ``APPEND_SYSTEM.md``),
``project_context`` (context files), ``skills`` (when ``read`` or ``bash`` is active) and
``cwd``. With a custom prompt (``--system-prompt`` / ``SYSTEM.md``) the preamble is that prompt
and ``tools``, ``rules`` and ``docs`` are left out.

Every section but the preamble is wrapped in a tag of its name (``<rules>\n...\n</rules>``),
and the prompt is the sections' texts joined by a blank line, as pi 1.6.0 renders the
``sections`` of a transcript's ``system`` message. There is no date line. The transcript
carries the sections by name, so a later change is a patch of the sections that differ
(:func:`pitrio.messages.transcript.diff_sections`).

Fixed sentences are pitrio's own wording; the structure, the section names and order, the
guideline rules and the tool lines follow pi.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import attrs

from pitrio.actors.session.resources.context_files import ContextFile
from pitrio.actors.session.resources.skills import Skill, format_skills_block

EXPLORATION_TOOLS = ("grep", "find", "ls")

INTRO = (
    "You are an expert coding assistant working inside pitrio, a harness that runs coding"
    " agents. You help the user by reading files, running commands, editing code and writing"
    " new files."
)
CUSTOM_TOOLS_NOTE = (
    "Besides the tools listed here, the project may give you further custom tools; use them"
    " as their descriptions say."
)
BASH_ONLY_GUIDELINE = "Use bash for file operations like ls, rg, find"
CONCISE_GUIDELINE = "Be concise in your responses"
FILE_PATHS_GUIDELINE = "Show file paths clearly when working with files"
PROJECT_CONTEXT_HEADING = "Project-specific instructions and guidelines:"
SKILL_READERS = ("read", "bash")
"""Tools a model can load a skill's file with: skills are listed when one of them is active."""


class ToolPromptInfo(Protocol):
    """What the prompt needs of an active tool (the tool executor's ``PromptEntry``)."""

    @property
    def name(self) -> str:
        """The tool's name."""
        ...

    @property
    def snippet(self) -> str | None:
        """One line saying what the tool does, or ``None`` to leave it out of the list."""
        ...

    @property
    def guidelines(self) -> tuple[str, ...]:
        """Bullets the tool adds to the guidelines."""
        ...


@attrs.frozen(kw_only=True)
class DocsPaths:
    """Where pitrio's documentation is, for questions about pitrio itself."""

    readme: str
    docs: str | None = None
    examples: str | None = None


@functools.cache
def default_docs_paths() -> DocsPaths | None:
    """The documentation next to the installed package (a source checkout), if it is there."""
    # Looked up once: the package does not move while it runs, and every session's prompt
    # options then hold the same three strings (~300 bytes an idle session otherwise).
    root = Path(__file__).resolve().parents[4]
    readme = root / "README.md"
    if not readme.is_file():
        return None
    docs = root / "docs"
    examples = root / "examples"
    return DocsPaths(
        readme=str(readme),
        docs=str(docs) if docs.is_dir() else None,
        examples=str(examples) if examples.is_dir() else None,
    )


@attrs.frozen(kw_only=True)
class SystemPromptOptions:
    """Everything the system prompt is built from.

    ``tools`` are the active tools in order; ``None`` means no selection is known (then the
    tool list reads ``(none)`` and skills are listed as if ``read`` were active, as pi does
    without a selection).
    """

    cwd: str
    tools: tuple[ToolPromptInfo, ...] | None = None
    skills: tuple[Skill, ...] = ()
    context_files: tuple[ContextFile, ...] = ()
    custom_prompt: str | None = None
    append_system_prompt: str | None = None
    docs: DocsPaths | None = None
    sections: tuple[tuple[str, str], ...] = ()
    """More sections, after ``cwd``, each tagged with its name (1.6.0's custom sections)."""


@attrs.frozen
class PromptSection:
    """A named part of the system prompt (its whole text, tag included)."""

    name: str
    text: str


def tool_lines(tools: Iterable[ToolPromptInfo]) -> str:
    """``- name: snippet`` for each tool with a snippet, or ``(none)``."""
    lines = [f"- {tool.name}: {tool.snippet}" for tool in tools if tool.snippet]
    return "\n".join(lines) if lines else "(none)"


def guidelines(tools: Sequence[ToolPromptInfo]) -> list[str]:
    """The rule bullets: the bash-for-files rule when bash is the only way to explore, the
    tools' own, then the fixed two. Each is trimmed; blanks and repeats are dropped (first
    occurrence kept)."""
    names = {tool.name for tool in tools}
    out: list[str] = []
    if "bash" in names and not names.intersection(EXPLORATION_TOOLS):
        out.append(BASH_ONLY_GUIDELINE)
    for tool in tools:
        out.extend(tool.guidelines)
    out += [CONCISE_GUIDELINE, FILE_PATHS_GUIDELINE]
    unique: dict[str, None] = {}
    for line in out:
        stripped = line.strip()
        if stripped:
            unique.setdefault(stripped, None)
    return list(unique)


def docs_text(docs: DocsPaths) -> str:
    """The documentation section's text (inside its tag)."""
    lines = [
        "pitrio documentation (read it only when the user asks about pitrio itself: its"
        " SDK, extensions, skills, prompt templates, models and providers, settings):",
        f"- Main documentation: {docs.readme}",
    ]
    if docs.docs:
        lines.append(f"- Further documents: {docs.docs}")
    if docs.examples:
        lines.append(f"- Examples: {docs.examples} (extensions, custom tools, SDK use)")
    lines.append(
        "- When working on such a question, read the relevant documents in full and follow"
        " the references between them before making changes"
    )
    return "\n".join(lines)


def context_text(files: Iterable[ContextFile]) -> str:
    """The project-context section's text (inside its tag); ``""`` without files."""
    files = list(files)
    if not files:
        return ""
    parts = [PROJECT_CONTEXT_HEADING]
    parts += [
        f'<project_instructions path="{f.path}">\n{f.content}\n</project_instructions>'
        for f in files
    ]
    return "\n\n".join(parts)


def _tagged(name: str, text: str) -> PromptSection:
    return PromptSection(name, f"<{name}>\n{text}\n</{name}>")


def build_system_prompt_sections(options: SystemPromptOptions) -> tuple[PromptSection, ...]:
    """The system prompt as named sections, in order (empty ones left out)."""
    tools = options.tools
    names = None if tools is None else {tool.name for tool in tools}
    sections: list[PromptSection] = []
    if options.custom_prompt:
        sections.append(PromptSection("preamble", options.custom_prompt))
    else:
        sections.append(PromptSection("preamble", INTRO))
        sections.append(_tagged("tools", f"{tool_lines(tools or ())}\n\n{CUSTOM_TOOLS_NOTE}"))
        sections.append(_tagged("rules", "\n".join(f"- {g}" for g in guidelines(tools or ()))))
        if options.docs is not None:
            sections.append(_tagged("docs", docs_text(options.docs)))
    if options.append_system_prompt:
        sections.append(_tagged("addendum", options.append_system_prompt))
    context = context_text(options.context_files)
    if context:
        sections.append(_tagged("project_context", context))
    skills_allowed = names is None or bool(names.intersection(SKILL_READERS))
    skills = format_skills_block(options.skills).strip() if skills_allowed else ""
    if skills:
        sections.append(_tagged("skills", skills))
    sections.append(_tagged("cwd", options.cwd.replace("\\", "/")))
    sections += [_tagged(name, text) for name, text in options.sections if text]
    return tuple(PromptSection(section.name, shared_text(section.text)) for section in sections)


def section_map(sections: Iterable[PromptSection]) -> dict[str, str]:
    """``{name: text}`` of ``sections``, in order: a ``system`` message's ``sections``."""
    return {section.name: section.text for section in sections}


def render_sections(sections: Iterable[PromptSection]) -> str:
    """The prompt text of ``sections`` (joined by a blank line, as a transcript's ``system``
    message renders them)."""
    return shared_text("\n\n".join(section.text for section in sections if section.text))


_SHARED: dict[str, str] = {}
SHARED_TEXTS = 256
"""How many distinct prompt texts :func:`shared_text` keeps (a daemon's sessions use a few:
one per cwd, tool set and day)."""


def shared_text(text: str) -> str:
    """``text``, or the equal string an earlier session's prompt already holds.

    A daemon builds the same prompt for each of its sessions in one cwd (a few KB each, kept
    for the session's life by its loop and its actor); handing back one held copy makes ten
    thousand idle sessions hold one. Strings are immutable, so sharing changes nothing else.
    The table is bounded: past ``SHARED_TEXTS`` entries the oldest is forgotten.
    """
    held = _SHARED.get(text)
    if held is not None:
        return held
    if len(_SHARED) >= SHARED_TEXTS:
        del _SHARED[next(iter(_SHARED))]
    _SHARED[text] = text
    return text


def build_system_prompt(options: SystemPromptOptions) -> str:
    """The whole system prompt."""
    return render_sections(build_system_prompt_sections(options))
