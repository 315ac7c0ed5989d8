"""The system prompt (spec §6.5), built as named sections.

Default prompt, in order: ``intro``, ``tools`` (one ``- name: snippet`` line per active tool
that has a snippet, ``(none)`` otherwise), ``guidelines``, ``docs`` (where pitrio's own
documentation is), ``append``, ``context`` (project context files), ``skills`` (only when
``read`` is active), ``environment`` (date and working directory).

With a custom prompt (``--system-prompt`` / ``SYSTEM.md``): ``custom``, ``append``,
``context``, ``skills`` (when ``read`` is active or no tool selection is known),
``environment``.

Each section's text carries its own leading separator, so the prompt is the plain
concatenation of the texts, laid out as pi lays out its prompt. Sections let a session tell a
model what changed between runs (:func:`system_prompt_patch`) without rewriting the prompt
the conversation started with, which keeps a provider's prompt cache valid.

Fixed sentences are pitrio's own wording; the structure, the section order, the guideline
rules, the tool lines and the ``Current date:`` / ``Current working directory:`` lines follow
pi.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal, Protocol

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
PREFER_TOOLS_GUIDELINE = (
    "Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)"
)
CONCISE_GUIDELINE = "Be concise in your responses"
FILE_PATHS_GUIDELINE = "Show file paths clearly when working with files"


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


def default_docs_paths() -> DocsPaths | None:
    """The documentation next to the installed package (a source checkout), if it is there."""
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


def today() -> str:
    """The local date as ``YYYY-MM-DD``."""
    return datetime.date.today().isoformat()


@attrs.frozen(kw_only=True)
class SystemPromptOptions:
    """Everything the system prompt is built from.

    ``tools`` are the active tools in order; ``None`` means no selection is known (then the
    tool list reads ``(none)`` and skills are listed as if ``read`` were active, as pi does
    without a selection).
    """

    cwd: str
    date: str
    tools: tuple[ToolPromptInfo, ...] | None = None
    skills: tuple[Skill, ...] = ()
    context_files: tuple[ContextFile, ...] = ()
    custom_prompt: str | None = None
    append_system_prompt: str | None = None
    docs: DocsPaths | None = None


@attrs.frozen
class PromptSection:
    """A named part of the system prompt; ``text`` includes its leading separator."""

    name: str
    text: str


def tool_lines(tools: Iterable[ToolPromptInfo]) -> str:
    """``- name: snippet`` for each tool with a snippet, or ``(none)``."""
    lines = [f"- {tool.name}: {tool.snippet}" for tool in tools if tool.snippet]
    return "\n".join(lines) if lines else "(none)"


def guidelines(tools: Sequence[ToolPromptInfo]) -> list[str]:
    """The guideline bullets: exploration advice, the tools' own, then the fixed two.

    Each is trimmed; blanks and repeats are dropped (first occurrence kept).
    """
    names = {tool.name for tool in tools}
    out: list[str] = []
    if "bash" in names:
        explorers = names.intersection(EXPLORATION_TOOLS)
        out.append(PREFER_TOOLS_GUIDELINE if explorers else BASH_ONLY_GUIDELINE)
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
    """The documentation section's text (without its leading separator)."""
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
    """The project-context section (with its leading blank line); ``""`` without files."""
    files = list(files)
    if not files:
        return ""
    parts = ["\n\n# Project Context\n\n", "Project-specific instructions and guidelines:\n\n"]
    parts += [f"## {f.path}\n\n{f.content}\n\n" for f in files]
    return "".join(parts)


def environment_text(date: str, cwd: str) -> str:
    """The closing lines: ``Current date:`` and ``Current working directory:``."""
    posix_cwd = cwd.replace("\\", "/")
    return f"\nCurrent date: {date}\nCurrent working directory: {posix_cwd}"


def build_system_prompt_sections(options: SystemPromptOptions) -> tuple[PromptSection, ...]:
    """The system prompt as named sections, in assembly order (empty ones left out)."""
    tools = options.tools
    names = None if tools is None else {tool.name for tool in tools}
    sections: list[PromptSection] = []
    append = options.append_system_prompt
    if options.custom_prompt:
        sections.append(PromptSection("custom", options.custom_prompt))
        skills_allowed = names is None or "read" in names
    else:
        sections.append(PromptSection("intro", INTRO))
        listed = tool_lines(tools or ())
        sections.append(
            PromptSection("tools", f"\n\nAvailable tools:\n{listed}\n\n{CUSTOM_TOOLS_NOTE}")
        )
        bullets = "\n".join(f"- {g}" for g in guidelines(tools or ()))
        sections.append(PromptSection("guidelines", f"\n\nGuidelines:\n{bullets}"))
        if options.docs is not None:
            sections.append(PromptSection("docs", "\n\n" + docs_text(options.docs)))
        skills_allowed = names is None or "read" in names
    if append:
        sections.append(PromptSection("append", f"\n\n{append}"))
    context = context_text(options.context_files)
    if context:
        sections.append(PromptSection("context", context))
    skills = format_skills_block(options.skills) if skills_allowed else ""
    if skills:
        sections.append(PromptSection("skills", skills))
    sections.append(PromptSection("environment", environment_text(options.date, options.cwd)))
    return tuple(PromptSection(section.name, shared_text(section.text)) for section in sections)


def render_sections(sections: Iterable[PromptSection]) -> str:
    """The prompt text of ``sections``."""
    return shared_text("".join(section.text for section in sections))


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


# --- patches ----------------------------------------------------------------------------------


@attrs.frozen
class SectionChange:
    """One section that differs: ``added``, ``changed`` (new text) or ``removed``."""

    name: str
    kind: Literal["added", "changed", "removed"]
    text: str | None


@attrs.frozen
class SystemPromptPatch:
    """What changed in the system prompt since a model last saw it."""

    changes: tuple[SectionChange, ...]

    def render(self) -> str:
        """The text of a ``system`` patch message telling the model about the changes."""
        lines = [
            "System prompt update: each section below replaces the part of the system prompt"
            " with the same name; a removed section no longer applies.",
        ]
        for change in self.changes:
            if change.text is None:
                lines.append(f'\n<section name="{change.name}" removed="true"/>')
            else:
                lines.append(f'\n<section name="{change.name}">\n{change.text.strip()}\n</section>')
        return "\n".join(lines)


def system_prompt_patch(
    previous: Sequence[PromptSection], current: Sequence[PromptSection]
) -> SystemPromptPatch | None:
    """The sections of ``current`` that differ from ``previous``, or ``None`` when none do.

    Sections are matched by name; order is not compared (assembly order is fixed). Changes
    come in ``current``'s order, removed sections after them in ``previous``'s order.
    """
    before = {section.name: section.text for section in previous}
    after = {section.name: section.text for section in current}
    changes: list[SectionChange] = []
    for name, text in after.items():
        if name not in before:
            changes.append(SectionChange(name, "added", text))
        elif before[name] != text:
            changes.append(SectionChange(name, "changed", text))
    changes += [SectionChange(name, "removed", None) for name in before if name not in after]
    return SystemPromptPatch(tuple(changes)) if changes else None
