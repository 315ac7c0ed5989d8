"""The skills and prompt templates of installed pi packages (``packages`` in settings).

A package's resources are its manifest's (``pi.skills``, ``pi.prompts`` in ``package.json``:
paths or globs relative to the package) or, without such a field, its conventional ``skills/``
and ``prompts/`` directories. An object entry's list for a kind narrows them (``[]``: none;
globs, ``!`` exclusions, ``+``/``-`` exact paths, as pi's settings lists). The project's
packages (of a trusted project) come first and hide the user's of the same identity. A package
that is not installed is reported (``pitrio install`` installs it); pi would install it at
start-up. Extensions of packages are not loaded: pi's are TypeScript.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import orjson

from pitrio.actors.session.resources._common import (
    Candidate,
    ResourceDiagnostic,
    SourceInfo,
    warning,
)
from pitrio.actors.session.resources._patterns import apply_patterns
from pitrio.actors.session.resources.settings import (
    PI_PROJECT_DIR_NAME,
    PROJECT_DIR_NAME,
    Settings,
    is_pi_agent_dir,
)

Kind = Literal["skills", "prompts"]
Collect = Callable[[str], list[str]]
"""The files of one directory that may be resources of the kind."""


def _manifest(root: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads((root / "package.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    pi = data.get("pi") if isinstance(data, dict) else None
    return pi if isinstance(pi, dict) else None


def _expand(entries: list[Any], root: Path, collect: Collect) -> list[str]:
    """Files named by manifest entries: a directory's resources, a file, or a glob's."""
    import glob  # here: only a package manifest's entries need it (start-up time, issue 38)

    found: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or entry.startswith("!"):
            continue
        pattern = os.path.normpath(root / entry)
        matches = glob.glob(pattern, recursive=True) if glob.has_magic(entry) else [pattern]
        for match in sorted(matches):
            found += collect(match) if os.path.isdir(match) else [match]
    return found


def package_files(root: Path, kind: Kind, entry: Any, collect: Collect) -> list[str]:
    """The files of ``kind`` one package at ``root`` offers under its settings ``entry``."""
    manifest = _manifest(root)
    if manifest is not None and isinstance(manifest.get(kind), list):
        files = _expand(manifest[kind], root, collect)
        excluded = [e[1:] for e in manifest[kind] if isinstance(e, str) and e.startswith("!")]
        if excluded:
            files = sorted(apply_patterns(files, [f"!{e}" for e in excluded], str(root)))
    elif manifest is not None and any(k in manifest for k in ("extensions", "skills", "prompts")):
        files = []  # a manifest that lists other kinds only offers none of this one
    else:
        directory = root / kind
        files = collect(str(directory)) if directory.is_dir() else []
    if isinstance(entry, dict) and isinstance(entry.get(kind), list):
        patterns = [p for p in entry[kind] if isinstance(p, str)]
        files = sorted(apply_patterns(files, patterns, str(root))) if patterns else []
    return files


def package_candidates(
    kind: Kind,
    *,
    cwd: str,
    agent_dir: str,
    settings: Settings,
    project_trusted: bool,
    collect: Collect,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """Candidates of ``kind`` from every configured package, project packages first."""
    agent = Path(agent_dir)
    project_root = Path(cwd) / (PI_PROJECT_DIR_NAME if is_pi_agent_dir(agent) else PROJECT_DIR_NAME)
    scopes: list[tuple[Literal["user", "project"], Path, dict[str, Any]]] = []
    if project_trusted:
        scopes.append(("project", project_root, settings.project_values))
    scopes.append(("user", agent, settings.global_values))
    seen: set[str] = set()
    candidates: list[Candidate] = []
    problems: list[ResourceDiagnostic] = []
    for scope, root, values in scopes:
        entries = values.get("packages")
        if not isinstance(entries, list) or not entries:
            continue
        # Imported with the first package listed: most starts have none (issue 38).
        from pitrio.actors.session.resources import packages as sources

        for entry in entries:
            text = sources.source_of(entry)
            if not text:
                continue
            key = sources.identity(text, root)
            if key in seen:
                continue
            seen.add(key)
            try:
                where = sources.install_path(sources.parse_source(text), root, root)
            except ValueError as exc:
                problems.append(warning(str(exc)))
                continue
            if not where.exists():
                problems.append(warning(f"Package {text} is not installed (pitrio install {text})"))
                continue
            if where.is_file():  # a local file source is one extension: nothing here
                continue
            for path in package_files(where, kind, entry, collect):
                info = SourceInfo(
                    path=path, source=text, scope=scope, origin="package", base_dir=str(where)
                )
                candidates.append(Candidate(path=path, info=info))
    return candidates, problems
