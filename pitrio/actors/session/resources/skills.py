"""Skills (spec §6.1, §6.2): discovery, validation, ``/skill:name`` and the prompt block.

A skill is a markdown file with YAML frontmatter (``name?``, ``description``,
``disable-model-invocation?``). Where they are found, first name wins:

1. the project settings' ``skills`` list (paths relative to the project config dir), then
   auto-discovery in ``<cwd>/.pitrio/skills`` (and ``<cwd>/.pi/skills`` when pointed at
   pi's dirs) and in ``.agents/skills`` of the cwd and each ancestor up to the git root
   (or the filesystem root outside a repository), leaving out ``~/.agents/skills``;
2. the global settings' ``skills`` list (relative to the agent dir), then
   ``<agentDir>/skills`` and ``~/.agents/skills``;
3. ``--skill`` paths from the command line (also with ``--no-skills``).

In a directory, a ``SKILL.md`` is the skill and the directory is not searched further;
otherwise subdirectories are searched (dot entries and ``node_modules`` skipped, ignore
files honoured). Loose ``.md`` files are skills only at the root of a ``skills`` dir of an
agent or project config dir (not of ``.agents/skills``). The same real file loads once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import attrs

from pitrio.actors.session.resources._common import (
    Candidate,
    Collision,
    FrontmatterError,
    IgnoreRules,
    ResourceDiagnostic,
    SourceInfo,
    cli_candidates,
    enabled_by_overrides,
    entry_kind,
    list_dir,
    listed_candidates,
    parse_frontmatter,
    read_text,
    real_path,
    settle_candidates,
    to_posix,
    warning,
)
from pitrio.actors.session.resources.package_resources import package_candidates
from pitrio.actors.session.resources.settings import Settings

SKILL_FILE = "SKILL.md"
MAX_NAME_LENGTH = 64
MAX_DESCRIPTION_LENGTH = 1024
SKILL_COMMAND_PREFIX = "/skill:"

ScanMode = Literal["config", "agents"]
"""``config``: a skills dir of the agent dir or a project config dir (loose root ``.md``
files are skills); ``agents``: an ``.agents/skills`` dir (only ``SKILL.md`` files)."""


@attrs.frozen(kw_only=True)
class Skill:
    """A loaded skill: its name, what it is for, and where its file is."""

    name: str
    description: str
    file_path: str
    base_dir: str
    """The directory holding the skill's file; its relative references resolve there."""
    source_info: SourceInfo
    disable_model_invocation: bool = False
    """Left out of the system prompt; still runs through ``/skill:name``."""


@attrs.frozen(kw_only=True)
class SkillSet:
    """The skills found (first name wins, in load order) and what went wrong on the way."""

    skills: tuple[Skill, ...] = ()
    diagnostics: tuple[ResourceDiagnostic, ...] = ()

    def get(self, name: str) -> Skill | None:
        """The skill called ``name``."""
        return next((s for s in self.skills if s.name == name), None)


# --- one file ---------------------------------------------------------------------------------


def validate_skill_name(name: str, parent_dir_name: str) -> list[str]:
    """What is wrong with a skill's name (Agent Skills rules); these are warnings only."""
    problems: list[str] = []
    if name != parent_dir_name:
        problems.append(f'name "{name}" does not match parent directory "{parent_dir_name}"')
    if len(name) > MAX_NAME_LENGTH:
        problems.append(f"name exceeds {MAX_NAME_LENGTH} characters ({len(name)})")
    if not re.fullmatch(r"[a-z0-9-]+", name):
        problems.append(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
        )
    if name.startswith("-") or name.endswith("-"):
        problems.append("name must not start or end with a hyphen")
    if "--" in name:
        problems.append("name must not contain consecutive hyphens")
    return problems


def load_skill_file(path: str, info: SourceInfo) -> tuple[Skill | None, list[ResourceDiagnostic]]:
    """Read one skill file; ``None`` (with a warning) when it has no usable description."""
    diagnostics: list[ResourceDiagnostic] = []
    try:
        front = parse_frontmatter(read_text(path))
    except (OSError, FrontmatterError) as exc:
        message = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return None, [warning(message, path)]
    data = front.data
    skill_dir = os.path.dirname(path)
    parent_name = os.path.basename(skill_dir)

    description = data.get("description")
    if description is not None and not isinstance(description, str):
        diagnostics.append(warning("description must be a string", path))
        description = None
    if description is None or not description.strip():
        diagnostics.append(warning("description is required", path))
    elif len(description) > MAX_DESCRIPTION_LENGTH:
        diagnostics.append(
            warning(
                f"description exceeds {MAX_DESCRIPTION_LENGTH} characters ({len(description)})",
                path,
            )
        )

    raw_name = data.get("name")
    if raw_name is not None and not isinstance(raw_name, str):
        diagnostics.append(warning("name must be a string", path))
        raw_name = None
    name = raw_name or parent_name
    diagnostics.extend(warning(problem, path) for problem in validate_skill_name(name, parent_name))

    if description is None or not description.strip():
        return None, diagnostics
    return (
        Skill(
            name=name,
            description=description,
            file_path=path,
            base_dir=skill_dir,
            source_info=info,
            disable_model_invocation=data.get("disable-model-invocation") is True,
        ),
        diagnostics,
    )


# --- directories ------------------------------------------------------------------------------


def collect_skill_files(directory: str, mode: ScanMode = "config") -> list[str]:
    """The skill files under ``directory`` in discovery order (see the module docstring)."""
    found: list[str] = []
    if entry_kind(directory) != "dir":
        return found
    rules = IgnoreRules()

    def walk(current: str) -> None:
        rules.add_dir(current, directory)
        names = list_dir(current)
        if SKILL_FILE in names:
            full = os.path.join(current, SKILL_FILE)
            relative = to_posix(os.path.relpath(full, directory))
            if entry_kind(full) == "file" and not rules.ignores(relative, is_dir=False):
                found.append(full)
                return
        for name in names:
            if name.startswith(".") or name == "node_modules":
                continue
            full = os.path.join(current, name)
            kind = entry_kind(full)
            if kind is None:
                continue
            relative = to_posix(os.path.relpath(full, directory))
            if rules.ignores(relative, is_dir=kind == "dir"):
                continue
            if kind == "dir":
                walk(full)
            elif mode == "config" and current == directory and name.endswith(".md"):
                found.append(full)

    walk(directory)
    return found


def find_git_root(start: str) -> str | None:
    """The nearest directory at or above ``start`` holding a ``.git`` entry."""
    current = os.path.abspath(start)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def ancestor_agents_skill_dirs(cwd: str, home: Path) -> list[str]:
    """``.agents/skills`` of the cwd and its ancestors up to the git root (or ``/``).

    ``~/.agents/skills`` is left out: it is a user directory, loaded with the user's skills.
    """
    dirs: list[str] = []
    current = os.path.abspath(cwd)
    git_root = find_git_root(current)
    user_dir = os.path.normpath(os.path.join(home, ".agents", "skills"))
    while True:
        candidate = os.path.join(current, ".agents", "skills")
        if os.path.normpath(candidate) != user_dir:
            dirs.append(candidate)
        if git_root is not None and current == git_root:
            break
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return dirs


def _auto(
    files: Iterable[str], scope: Literal["user", "project"], base_dir: str, entries: Sequence[str]
) -> list[Candidate]:
    return [
        Candidate(
            path=f,
            info=SourceInfo(path=f, source="auto", scope=scope, base_dir=base_dir),
            enabled=enabled_by_overrides(f, entries, base_dir),
        )
        for f in files
    ]


def discover_skill_candidates(
    *,
    cwd: str,
    agent_dir: str,
    project_dirs: Sequence[str],
    settings: Settings,
    home: Path,
    project_agents: bool = True,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """Settings-listed and auto-discovered skill files, settled by precedence
    (``project_agents=False``: no ``.agents/skills`` of the project, an untrusted one's)."""
    candidates, diagnostics = listed_candidates(
        settings,
        "skills",
        agent_dir=agent_dir,
        project_dirs=project_dirs,
        home=home,
        collect_dir=collect_skill_files,
        what="skill",
    )
    project_entries = settings.resource_entries("skills", "project")
    for config_dir in project_dirs:
        files = collect_skill_files(os.path.join(config_dir, "skills"), "config")
        candidates += _auto(files, "project", config_dir, project_entries)
    for agents_dir in ancestor_agents_skill_dirs(cwd, home) if project_agents else ():
        base = os.path.dirname(agents_dir)
        files = collect_skill_files(agents_dir, "agents")
        candidates += _auto(files, "project", base, project_entries)
    user_entries = settings.resource_entries("skills", "user")
    files = collect_skill_files(os.path.join(agent_dir, "skills"), "config")
    candidates += _auto(files, "user", agent_dir, user_entries)
    user_agents = os.path.join(home, ".agents", "skills")
    files = collect_skill_files(user_agents, "agents")
    candidates += _auto(files, "user", os.path.dirname(user_agents), user_entries)
    found, problems = package_candidates(
        "skills",
        cwd=cwd,
        agent_dir=agent_dir,
        settings=settings,
        project_trusted=bool(project_dirs),
        collect=collect_skill_files,
    )
    candidates += found
    diagnostics += problems
    return settle_candidates(candidates), diagnostics


def cli_skill_candidates(
    paths: Sequence[str], cwd: str, home: Path
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """``--skill`` paths: a directory is searched like a skills dir, a file must be ``.md``."""
    return cli_candidates(
        paths, cwd, home, collect_dir=lambda path: collect_skill_files(path, "config"), what="skill"
    )


def load_skill_candidates(candidates: Sequence[Candidate]) -> SkillSet:
    """Load candidates in order: the same real file once, the first of a name wins."""
    skills: dict[str, Skill] = {}
    seen: set[str] = set()
    diagnostics: list[ResourceDiagnostic] = []
    collisions: list[ResourceDiagnostic] = []
    for candidate in candidates:
        skill, problems = load_skill_file(candidate.path, candidate.info)
        diagnostics += problems
        if skill is None:
            continue
        key = real_path(skill.file_path)
        if key in seen:
            continue
        existing = skills.get(skill.name)
        if existing is not None:
            collisions.append(
                ResourceDiagnostic(
                    kind="collision",
                    message=f'name "{skill.name}" collision',
                    path=skill.file_path,
                    collision=Collision(
                        resource_type="skill",
                        name=skill.name,
                        winner_path=existing.file_path,
                        loser_path=skill.file_path,
                    ),
                )
            )
            continue
        skills[skill.name] = skill
        seen.add(key)
    return SkillSet(skills=tuple(skills.values()), diagnostics=(*diagnostics, *collisions))


def load_skills(
    *,
    cwd: str,
    agent_dir: str,
    project_dirs: Sequence[str],
    settings: Settings,
    home: Path,
    cli_paths: Sequence[str] = (),
    include_defaults: bool = True,
    project_agents: bool = True,
) -> SkillSet:
    """Every skill of a session: defaults (unless ``--no-skills``) then ``--skill`` paths."""
    candidates: list[Candidate] = []
    diagnostics: list[ResourceDiagnostic] = []
    if include_defaults:
        found, problems = discover_skill_candidates(
            cwd=cwd,
            agent_dir=agent_dir,
            project_dirs=project_dirs,
            settings=settings,
            home=home,
            project_agents=project_agents,
        )
        candidates += found
        diagnostics += problems
    found, problems = cli_skill_candidates(cli_paths, cwd, home)
    candidates += found
    diagnostics += problems
    loaded = load_skill_candidates(candidates)
    return SkillSet(skills=loaded.skills, diagnostics=(*diagnostics, *loaded.diagnostics))


# --- the system prompt block ------------------------------------------------------------------


def escape_xml(text: str) -> str:
    """``& < > " '`` as XML entities."""
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&apos;")
    )


SKILLS_INTRO = (
    "The skills listed below carry specialised instructions for particular kinds of task.",
    "When a task fits a skill's description, load that skill's file with the read tool first.",
    "Relative paths inside a skill file are relative to the skill's directory (the directory"
    " holding the file); turn them into absolute paths before using them in tool calls.",
)


def format_skills_block(skills: Iterable[Skill]) -> str:
    """The skills section of the system prompt, ``""`` when no skill may be model-invoked.

    Starts with a blank line; skills with ``disable-model-invocation`` are left out.
    """
    visible = [s for s in skills if not s.disable_model_invocation]
    if not visible:
        return ""
    lines = ["", "", *SKILLS_INTRO, "", "<available_skills>"]
    for skill in visible:
        lines += [
            "  <skill>",
            f"    <name>{escape_xml(skill.name)}</name>",
            f"    <description>{escape_xml(skill.description)}</description>",
            f"    <location>{escape_xml(skill.file_path)}</location>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)


# --- /skill:name ------------------------------------------------------------------------------


class SkillReadError(Exception):
    """A skill's file could not be read when it was invoked."""

    def __init__(self, skill: Skill, error: str) -> None:
        super().__init__(error)
        self.skill = skill
        self.error = error


def split_skill_command(text: str) -> tuple[str, str] | None:
    """``(name, args)`` of a ``/skill:name args`` text, or ``None`` for other texts."""
    if not text.startswith(SKILL_COMMAND_PREFIX):
        return None
    rest = text[len(SKILL_COMMAND_PREFIX) :]
    space = rest.find(" ")
    if space == -1:
        return rest, ""
    return rest[:space], rest[space + 1 :].strip()


def skill_block(skill: Skill, body: str, args: str = "") -> str:
    """The user message a ``/skill:`` invocation becomes (spec §6.2's exact shape)."""
    block = (
        f'<skill name="{skill.name}" location="{skill.file_path}">\n'
        f"References are relative to {skill.base_dir}.\n\n"
        f"{body}\n"
        "</skill>"
    )
    return f"{block}\n\n{args}" if args else block


def expand_skill_command(text: str, skills: Iterable[Skill]) -> str:
    """Expand ``/skill:name args`` into the skill's block; other texts come back unchanged.

    An unknown name leaves the text as it is. Raises :class:`SkillReadError` when the
    skill's file cannot be read now (the caller reports it and keeps the text).
    """
    parsed = split_skill_command(text)
    if parsed is None:
        return text
    name, args = parsed
    skill = next((s for s in skills if s.name == name), None)
    if skill is None:
        return text
    try:
        body = parse_frontmatter(read_text(skill.file_path)).body.strip()
    except OSError as exc:
        raise SkillReadError(skill, exc.strerror or str(exc)) from None
    except FrontmatterError as exc:
        raise SkillReadError(skill, str(exc)) from None
    return skill_block(skill, body, args)


@attrs.frozen(kw_only=True)
class SkillBlock:
    """A user message recognised as an expanded skill invocation (for display)."""

    name: str
    location: str
    content: str
    """Everything between the opening and closing tags (the references line included)."""
    user_message: str | None = None
    """What the user typed after the skill name, if anything."""


_SKILL_BLOCK = re.compile(
    r'<skill name="([^"]+)" location="([^"]+)">\n(.*?)\n</skill>(?:\n\n(.+))?', re.DOTALL
)


def parse_skill_block(text: str) -> SkillBlock | None:
    """The parts of a text of exactly :func:`skill_block`'s shape, else ``None``."""
    match = _SKILL_BLOCK.fullmatch(text)
    if match is None:
        return None
    return SkillBlock(
        name=match.group(1),
        location=match.group(2),
        content=match.group(3),
        user_message=match.group(4),
    )
