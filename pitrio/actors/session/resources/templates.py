"""Prompt templates (spec §6.3): markdown files that ``/name args`` expands into a prompt.

Where they are found, first name wins (a collision is reported):

1. ``--prompt-template`` paths from the command line (files, or directories searched
   for ``.md`` files recursively);
2. the project settings' ``prompts`` list, then ``<cwd>/.pitrio/prompts/*.md`` (and
   ``<cwd>/.pi/prompts`` when pointed at pi's dirs);
3. the global settings' ``prompts`` list, then ``<agentDir>/prompts/*.md``.

Default directories are not searched recursively; listed directories are. A template's name
is its file name without ``.md``; frontmatter may give ``description`` and
``argument-hint``; the content is the body.

Arguments are split on spaces and tabs outside quotes; the template text is then scanned
once, so placeholders inside argument values stay literal: ``$1`` ... (missing: empty),
``${@:N}`` and ``${@:N:L}`` (1-based slices, ``N=0`` counts as 1), ``$ARGUMENTS`` and ``$@``
(all arguments joined by single spaces).
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
    ResourceDiagnostic,
    SourceInfo,
    cli_candidates,
    collect_markdown_files,
    enabled_by_overrides,
    listed_candidates,
    parse_frontmatter,
    read_text,
    real_path,
    settle_candidates,
    warning,
)
from pitrio.actors.session.resources.package_resources import package_candidates
from pitrio.actors.session.resources.settings import Settings

DESCRIPTION_FALLBACK_LENGTH = 60


@attrs.frozen(kw_only=True)
class PromptTemplate:
    """A loaded prompt template."""

    name: str
    description: str
    """From the frontmatter, else the first non-empty body line (60 characters, then ``...``)."""
    content: str
    file_path: str
    source_info: SourceInfo
    argument_hint: str | None = None


@attrs.frozen(kw_only=True)
class TemplateSet:
    """The templates found (first name wins, in load order) and what went wrong."""

    templates: tuple[PromptTemplate, ...] = ()
    diagnostics: tuple[ResourceDiagnostic, ...] = ()

    def get(self, name: str) -> PromptTemplate | None:
        """The template called ``name``."""
        return next((t for t in self.templates if t.name == name), None)


# --- arguments --------------------------------------------------------------------------------


def parse_command_args(text: str) -> list[str]:
    """Split ``text`` on spaces and tabs outside quotes.

    ``'...'`` and ``"..."`` group (the quotes are dropped, nothing is escaped inside them);
    empty arguments are dropped, so ``""`` gives nothing while ``" "`` gives a space.
    """
    args: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for char in text:
        if quote is not None:
            if char == quote:
                quote = None
            else:
                current.append(char)
        elif char in ("'", '"'):
            quote = char
        elif char in (" ", "\t"):
            if current:
                args.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        args.append("".join(current))
    return args


_PLACEHOLDER = re.compile(r"\$\{@:(\d+)(?::(\d+))?\}|\$(\d+)|\$ARGUMENTS|\$@")


def substitute_args(content: str, args: Sequence[str]) -> str:
    """Fill the placeholders of ``content`` with ``args`` in one pass over the template.

    Because the scan never looks at text it has inserted, an argument containing ``$1``,
    ``$@`` or ``${@:2}`` comes out literally.
    """
    everything = " ".join(args)

    def replace(match: re.Match[str]) -> str:
        start, length, position = match.group(1), match.group(2), match.group(3)
        if start is not None:
            first = max(int(start) - 1, 0)
            if length is not None:
                return " ".join(args[first : first + int(length)])
            return " ".join(args[first:])
        if position is not None:
            index = int(position) - 1
            return args[index] if 0 <= index < len(args) else ""
        return everything

    return _PLACEHOLDER.sub(replace, content)


def split_command(text: str) -> tuple[str, str] | None:
    """``(name, rest)`` of a text starting with ``/`` (name up to the first space)."""
    if not text.startswith("/"):
        return None
    space = text.find(" ")
    if space == -1:
        return text[1:], ""
    return text[1:space], text[space + 1 :]


def expand_template(text: str, templates: Iterable[PromptTemplate]) -> str:
    """``/name args`` with a template called ``name`` becomes its filled content; otherwise
    the text is returned unchanged."""
    parsed = split_command(text)
    if parsed is None:
        return text
    name, rest = parsed
    template = next((t for t in templates if t.name == name), None)
    if template is None:
        return text
    return substitute_args(template.content, parse_command_args(rest))


# --- loading ----------------------------------------------------------------------------------


def _fallback_description(body: str) -> str:
    first = next((line for line in body.split("\n") if line.strip()), None)
    if first is None:
        return ""
    if len(first) > DESCRIPTION_FALLBACK_LENGTH:
        return first[:DESCRIPTION_FALLBACK_LENGTH] + "..."
    return first


def load_template_file(
    path: str, info: SourceInfo
) -> tuple[PromptTemplate | None, list[ResourceDiagnostic]]:
    """Read one template; ``None`` and a warning when it cannot be read or parsed."""
    try:
        front = parse_frontmatter(read_text(path))
    except OSError as exc:
        return None, [warning(exc.strerror or str(exc), path)]
    except FrontmatterError as exc:
        return None, [warning(str(exc), path)]
    diagnostics: list[ResourceDiagnostic] = []
    description = front.data.get("description")
    if description is not None and not isinstance(description, str):
        diagnostics.append(warning("description must be a string", path))
        description = None
    hint = front.data.get("argument-hint")
    if hint is not None and not isinstance(hint, str):
        diagnostics.append(warning("argument-hint must be a string", path))
        hint = None
    name = os.path.basename(path).removesuffix(".md")
    return (
        PromptTemplate(
            name=name,
            description=description or _fallback_description(front.body),
            content=front.body,
            file_path=path,
            source_info=info,
            argument_hint=hint,
        ),
        diagnostics,
    )


def _direct_markdown(directory: str) -> list[str]:
    return collect_markdown_files(directory, recursive=False)


def _recursive_markdown(directory: str) -> list[str]:
    return collect_markdown_files(directory, recursive=True)


def discover_template_candidates(
    *,
    agent_dir: str,
    project_dirs: Sequence[str],
    settings: Settings,
    home: Path,
    cwd: str | None = None,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """Settings-listed, auto-discovered and (given ``cwd``) installed packages' template
    files, settled by precedence."""
    candidates, diagnostics = listed_candidates(
        settings,
        "prompts",
        agent_dir=agent_dir,
        project_dirs=project_dirs,
        home=home,
        collect_dir=_recursive_markdown,
        what="prompt template",
    )
    auto_dirs: list[tuple[Literal["user", "project"], str]] = [("project", d) for d in project_dirs]
    auto_dirs.append(("user", agent_dir))
    for scope, config_dir in auto_dirs:
        entries = settings.resource_entries("prompts", scope)
        for path in _direct_markdown(os.path.join(config_dir, "prompts")):
            info = SourceInfo(path=path, source="auto", scope=scope, base_dir=config_dir)
            enabled = enabled_by_overrides(path, entries, config_dir)
            candidates.append(Candidate(path=path, info=info, enabled=enabled))
    if cwd is not None:
        found, _ = package_candidates(  # a missing package is reported with the skills
            "prompts",
            cwd=cwd,
            agent_dir=agent_dir,
            settings=settings,
            project_trusted=bool(project_dirs),
            collect=_recursive_markdown,
        )
        candidates += found
    return settle_candidates(candidates), diagnostics


def cli_template_candidates(
    paths: Sequence[str], cwd: str, home: Path
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """``--prompt-template`` paths: a directory is searched recursively, a file must be ``.md``."""
    return cli_candidates(paths, cwd, home, collect_dir=_recursive_markdown, what="prompt template")


def load_template_candidates(candidates: Sequence[Candidate]) -> TemplateSet:
    """Load candidates in order: the same real file once, the first of a name wins."""
    templates: dict[str, PromptTemplate] = {}
    seen: set[str] = set()
    diagnostics: list[ResourceDiagnostic] = []
    collisions: list[ResourceDiagnostic] = []
    for candidate in candidates:
        key = real_path(candidate.path)
        if key in seen:
            continue
        seen.add(key)
        template, problems = load_template_file(candidate.path, candidate.info)
        diagnostics += problems
        if template is None:
            continue
        existing = templates.get(template.name)
        if existing is not None:
            collisions.append(
                ResourceDiagnostic(
                    kind="collision",
                    message=f'name "/{template.name}" collision',
                    path=template.file_path,
                    collision=Collision(
                        resource_type="prompt",
                        name=template.name,
                        winner_path=existing.file_path,
                        loser_path=template.file_path,
                    ),
                )
            )
            continue
        templates[template.name] = template
    return TemplateSet(templates=tuple(templates.values()), diagnostics=(*diagnostics, *collisions))


def load_templates(
    *,
    cwd: str,
    agent_dir: str,
    project_dirs: Sequence[str],
    settings: Settings,
    home: Path,
    cli_paths: Sequence[str] = (),
    include_defaults: bool = True,
) -> TemplateSet:
    """Every template of a session: ``--prompt-template`` paths, then the defaults (unless
    ``--no-prompt-templates``)."""
    candidates, diagnostics = cli_template_candidates(cli_paths, cwd, home)
    if include_defaults:
        found, problems = discover_template_candidates(
            agent_dir=agent_dir, project_dirs=project_dirs, settings=settings, home=home, cwd=cwd
        )
        candidates += found
        diagnostics += problems
    loaded = load_template_candidates(candidates)
    return TemplateSet(templates=loaded.templates, diagnostics=(*diagnostics, *loaded.diagnostics))
