"""Skills and prompt templates an extension's ``resources_discover`` handler adds (pi 1.6.0's
``extendResources``): loaded as command-line paths are, marked as the extension's
(``source: "extension:<name>"``, ``scope: "temporary"``) and added after the session's own,
whose names win a collision (reported like any other).

Plain file reads: a trio caller runs :func:`extend_resources` in a worker thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from pitrio.actors.session.resources._common import Candidate, ResourceDiagnostic
from pitrio.actors.session.resources.loader import Resources
from pitrio.actors.session.resources.skills import cli_skill_candidates, load_skill_candidates
from pitrio.actors.session.resources.templates import (
    cli_template_candidates,
    load_template_candidates,
)

Find = Callable[[Sequence[str], str, Path], tuple[list[Candidate], list[ResourceDiagnostic]]]

ExtensionPath = tuple[str, str]
"""A path a handler returned, with the file of the extension that returned it."""


def extension_source(extension_path: str) -> str:
    """pi's label for a resource an extension added: ``extension:<file name without .py>``."""
    name = os.path.basename(extension_path.rstrip(os.sep)) or extension_path
    return f"extension:{name.removesuffix('.py')}"


def _candidates(
    paths: Sequence[ExtensionPath], cwd: str, home: Path, find: Find
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """The files at each path, found as a command-line path's are, marked as the
    extension's."""
    candidates: list[Candidate] = []
    diagnostics: list[ResourceDiagnostic] = []
    for path, extension in paths:
        found, problems = find([path], cwd, home)
        source = extension_source(extension)
        base = os.path.dirname(extension)
        candidates += [
            attrs.evolve(c, info=attrs.evolve(c.info, source=source, base_dir=base)) for c in found
        ]
        diagnostics += problems
    return candidates, diagnostics


def extend_resources(
    resources: Resources,
    skill_paths: Sequence[ExtensionPath],
    prompt_paths: Sequence[ExtensionPath],
    *,
    home: Path | None = None,
) -> Resources:
    """``resources`` with the skills and templates found at the extensions' paths (the
    session's own are read again with them, so names and files collide as at start-up)."""
    home = home or Path.home()
    found, diagnostics = _candidates(skill_paths, resources.cwd, home, cli_skill_candidates)
    skills = load_skill_candidates(
        [Candidate(path=s.file_path, info=s.source_info) for s in resources.skills] + found
    )
    found, problems = _candidates(prompt_paths, resources.cwd, home, cli_template_candidates)
    diagnostics += problems
    templates = load_template_candidates(
        [Candidate(path=t.file_path, info=t.source_info) for t in resources.templates] + found
    )
    return attrs.evolve(
        resources,
        skills=skills.skills,
        templates=templates.templates,
        diagnostics=(
            *resources.diagnostics,
            *diagnostics,
            *_new(skills.diagnostics, resources.diagnostics),
            *_new(templates.diagnostics, resources.diagnostics),
        ),
    )


def _new(
    diagnostics: Sequence[ResourceDiagnostic], known: Sequence[ResourceDiagnostic]
) -> tuple[ResourceDiagnostic, ...]:
    """The diagnostics of the second load not already reported by the first."""
    return tuple(d for d in diagnostics if d not in known)


__all__ = ["ExtensionPath", "extend_resources", "extension_source"]
