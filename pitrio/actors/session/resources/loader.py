"""Everything a session loads around its conversation, in one value (spec §6, §8).

:func:`load_resources` reads settings, skills, prompt templates, context files and the
system-prompt files for a cwd and agent dir; the result is immutable, so reloading means
loading again. :func:`expand_input` is the expansion step of the prompt funnel,
:func:`commands` the resource part of ``get_commands``, :func:`system_prompt_sections` the
system prompt for a set of active tools.

Plain functions doing plain file reads: a trio caller runs :func:`load_resources` (and
:func:`expand_input`, which reads a skill's file) in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from pitrio.actors.session.resources._common import ResourceDiagnostic
from pitrio.actors.session.resources.context_files import (
    ContextFile,
    SystemPromptSources,
    load_context_files,
    load_system_prompt_sources,
)
from pitrio.actors.session.resources.settings import (
    Settings,
    load_settings,
    project_config_dirs,
)
from pitrio.actors.session.resources.skills import (
    Skill,
    SkillReadError,
    expand_skill_command,
    load_skills,
)
from pitrio.actors.session.resources.system_prompt import (
    DocsPaths,
    PromptSection,
    SystemPromptOptions,
    ToolPromptInfo,
    build_system_prompt_sections,
    default_docs_paths,
)
from pitrio.actors.session.resources.templates import (
    PromptTemplate,
    expand_template,
    load_templates,
)


@attrs.frozen(kw_only=True)
class ResourceOptions:
    """Command-line and SDK choices that change what is loaded.

    ``home`` stands for the user's home directory (``~`` in paths, ``~/.agents/skills``);
    ``pi_compat`` forces reading pi's project dirs (``.pi/``) on or off (``None``: on when
    the agent dir is pi's); ``settings`` skips reading settings files.
    """

    skill_paths: tuple[str, ...] = ()
    """``--skill PATH`` (repeatable; loaded even with ``no_skills``)."""
    prompt_template_paths: tuple[str, ...] = ()
    """``--prompt-template PATH`` (repeatable)."""
    no_skills: bool = False
    no_prompt_templates: bool = False
    no_context_files: bool = False
    system_prompt: str | None = None
    """``--system-prompt TEXT|FILE``."""
    append_system_prompt: tuple[str, ...] = ()
    """``--append-system-prompt TEXT|FILE`` (repeatable, joined by blank lines)."""
    home: Path | None = None
    pi_compat: bool | None = None
    settings: Settings | None = None
    docs: DocsPaths | None = None
    """Documentation paths for the prompt; ``None``: the checkout's, when present."""
    project_trusted: bool = True
    """``False``: the project's protected files (:mod:`.trust`) are not read: its settings,
    skills (``.agents/skills`` too), prompt templates and system-prompt files; context files
    still load, as in pi 1.6.0. The SDK's default is trusted, as pi's ``createAgentSession``."""


@attrs.frozen(kw_only=True)
class Resources:
    """A session's settings, skills, templates, context files and prompt sources."""

    cwd: str
    agent_dir: str
    settings: Settings
    skills: tuple[Skill, ...] = ()
    templates: tuple[PromptTemplate, ...] = ()
    context_files: tuple[ContextFile, ...] = ()
    system_prompt: SystemPromptSources = attrs.field(factory=SystemPromptSources)
    docs: DocsPaths | None = None
    diagnostics: tuple[ResourceDiagnostic, ...] = ()
    """Warnings and name collisions of skills, templates and prompt files."""
    extra_sections: tuple[tuple[str, str], ...] = ()
    """Prompt sections the session's parts add after the others, ``(name, text)`` (MCP's
    ``mcp_servers``: 1.6.0's custom sections)."""

    def skill(self, name: str) -> Skill | None:
        """The skill called ``name``."""
        return next((s for s in self.skills if s.name == name), None)

    def template(self, name: str) -> PromptTemplate | None:
        """The prompt template called ``name``."""
        return next((t for t in self.templates if t.name == name), None)

    def problems(self) -> tuple[str, ...]:
        """Every settings problem and resource diagnostic, one line each, to report."""
        return (*(str(p) for p in self.settings.problems), *(str(d) for d in self.diagnostics))


def load_resources(
    cwd: str | os.PathLike[str],
    agent_dir: str | os.PathLike[str],
    options: ResourceOptions | None = None,
) -> Resources:
    """Load everything for a session in ``cwd`` (blocking file reads; never raises for bad
    files: they become problems)."""
    options = options or ResourceOptions()
    cwd_text = os.path.abspath(cwd)
    agent = os.path.abspath(agent_dir)
    home = options.home or Path.home()
    trusted = options.project_trusted
    settings = options.settings or load_settings(
        Path(agent), cwd_text, pi_compat=options.pi_compat, project_trusted=trusted
    )
    project_dirs = (
        [str(d) for d in project_config_dirs(cwd_text, Path(agent), options.pi_compat)]
        if trusted
        else []
    )
    diagnostics: list[ResourceDiagnostic] = []

    skills = load_skills(
        cwd=cwd_text,
        agent_dir=agent,
        project_dirs=project_dirs,
        settings=settings,
        home=home,
        cli_paths=options.skill_paths,
        include_defaults=not options.no_skills,
        project_agents=trusted,
    )
    diagnostics += skills.diagnostics
    templates = load_templates(
        cwd=cwd_text,
        agent_dir=agent,
        project_dirs=project_dirs,
        settings=settings,
        home=home,
        cli_paths=options.prompt_template_paths,
        include_defaults=not options.no_prompt_templates,
    )
    diagnostics += templates.diagnostics
    context_files: tuple[ContextFile, ...] = ()
    if not options.no_context_files:
        context_files, problems = load_context_files(cwd_text, agent)
        diagnostics += problems
    sources, problems = load_system_prompt_sources(
        cwd=cwd_text,
        agent_dir=agent,
        project_dirs=project_dirs,
        system_prompt=options.system_prompt,
        append_system_prompt=options.append_system_prompt,
    )
    diagnostics += problems
    return Resources(
        cwd=cwd_text,
        agent_dir=agent,
        settings=settings,
        skills=skills.skills,
        templates=templates.templates,
        context_files=context_files,
        system_prompt=sources,
        docs=options.docs or default_docs_paths(),
        diagnostics=tuple(diagnostics),
    )


@attrs.frozen(kw_only=True)
class ExpansionError:
    """A skill whose file could not be read when invoked (pi reports it as an extension
    error ``{extensionPath: <skill file>, event: "skill_expansion", error}``)."""

    path: str
    error: str
    event: str = "skill_expansion"

    def to_json(self) -> dict[str, Any]:
        """The ``extension_error`` event's fields."""
        return {"extensionPath": self.path, "event": self.event, "error": self.error}


def expand_input(
    text: str,
    resources: Resources,
    *,
    on_error: Callable[[ExpansionError], None] | None = None,
) -> str:
    """``/skill:name args`` then ``/template args`` expansion; any other text unchanged.

    A skill's block starts with ``<skill``, so it is never template-expanded; an unknown
    ``/word`` stays as typed. A skill file that cannot be read is passed to ``on_error`` and
    the text is kept.
    """
    try:
        expanded = expand_skill_command(text, resources.skills)
    except SkillReadError as exc:
        if on_error is not None:
            on_error(ExpansionError(path=exc.skill.file_path, error=exc.error))
        expanded = text
    return expand_template(expanded, resources.templates)


def commands(resources: Resources) -> list[dict[str, Any]]:
    """The prompt templates (``source: "prompt"``) then the skills (``"skill"``, named
    ``skill:<name>``) as ``get_commands`` lists them; extension commands go before these."""
    out: list[dict[str, Any]] = []
    for template in resources.templates:
        entry: dict[str, Any] = {"name": template.name}
        if template.description:
            entry["description"] = template.description
        entry["source"] = "prompt"
        entry["sourceInfo"] = template.source_info.to_json()
        out.append(entry)
    for skill in resources.skills:
        out.append(
            {
                "name": f"skill:{skill.name}",
                "description": skill.description,
                "source": "skill",
                "sourceInfo": skill.source_info.to_json(),
            }
        )
    return out


def with_section(resources: Resources, name: str, text: str | None) -> Resources:
    """``resources`` with the prompt section ``name`` (replacing one of that name; ``None``
    removes it)."""
    others = tuple(section for section in resources.extra_sections if section[0] != name)
    added = () if text is None else ((name, text),)
    return attrs.evolve(resources, extra_sections=(*others, *added))


def system_prompt_options(
    resources: Resources, tools: Sequence[ToolPromptInfo] | None
) -> SystemPromptOptions:
    """The inputs of the system prompt for ``resources`` and the active ``tools``."""
    return SystemPromptOptions(
        cwd=resources.cwd,
        tools=None if tools is None else tuple(tools),
        skills=resources.skills,
        context_files=resources.context_files,
        custom_prompt=resources.system_prompt.custom_prompt,
        append_system_prompt=resources.system_prompt.append,
        docs=resources.docs,
        sections=resources.extra_sections,
    )


def system_prompt_sections(
    resources: Resources, tools: Sequence[ToolPromptInfo] | None
) -> tuple[PromptSection, ...]:
    """The system prompt's sections for ``resources`` and the active ``tools``."""
    return build_system_prompt_sections(system_prompt_options(resources, tools))
