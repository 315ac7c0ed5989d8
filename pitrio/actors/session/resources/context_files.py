"""Context files and system-prompt files (spec §6.4).

* Context files: in each directory the first of ``AGENTS.md``, ``AGENTS.MD``, ``CLAUDE.md``,
  ``CLAUDE.MD`` that can be read. The agent dir's comes first, then one per directory from
  the filesystem root down to the cwd (the cwd's last); a path already taken is skipped.
  ``--no-context-files`` turns them all off.
* The custom base prompt is ``--system-prompt`` (text, or a file when it names one), else
  the first ``SYSTEM.md`` of the project config dirs, else ``<agentDir>/SYSTEM.md``.
* The appended text is every ``--append-system-prompt`` (each text or file) joined by a
  blank line, else the first ``APPEND_SYSTEM.md`` found the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import attrs

from pitrio.actors.session.resources._common import ResourceDiagnostic, read_text, warning

CONTEXT_FILE_NAMES = ("AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD")
SYSTEM_FILE = "SYSTEM.md"
APPEND_SYSTEM_FILE = "APPEND_SYSTEM.md"


@attrs.frozen
class ContextFile:
    """A project instruction file as it goes into the system prompt."""

    path: str
    content: str


def context_file_in(directory: str) -> tuple[ContextFile | None, list[ResourceDiagnostic]]:
    """The context file of one directory; an unreadable candidate is reported and skipped."""
    problems: list[ResourceDiagnostic] = []
    for name in CONTEXT_FILE_NAMES:
        path = os.path.join(directory, name)
        if not os.path.exists(path):
            continue
        try:
            return ContextFile(path, read_text(path)), problems
        except OSError as exc:
            problems.append(warning(f"could not read: {exc.strerror or exc}", path))
    return None, problems


def load_context_files(
    cwd: str, agent_dir: str
) -> tuple[tuple[ContextFile, ...], tuple[ResourceDiagnostic, ...]]:
    """The agent dir's context file, then the ancestors' from the root down to ``cwd``."""
    problems: list[ResourceDiagnostic] = []
    files: list[ContextFile] = []
    seen: set[str] = set()
    found, issues = context_file_in(os.path.abspath(agent_dir))
    problems += issues
    if found is not None:
        files.append(found)
        seen.add(found.path)
    chain: list[str] = []
    current = os.path.abspath(cwd)
    while True:
        chain.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(chain):
        found, issues = context_file_in(directory)
        problems += issues
        if found is not None and found.path not in seen:
            files.append(found)
            seen.add(found.path)
    return tuple(files), tuple(problems)


@attrs.frozen(kw_only=True)
class SystemPromptSources:
    """Where the system prompt's replaceable parts come from."""

    custom_prompt: str | None = None
    """Replaces the default prompt (``--system-prompt`` or a ``SYSTEM.md``)."""
    custom_prompt_path: str | None = None
    append: str | None = None
    """Added after the prompt (``--append-system-prompt`` or an ``APPEND_SYSTEM.md``)."""
    append_paths: tuple[str, ...] = ()


def resolve_prompt_input(
    value: str, cwd: str, what: str
) -> tuple[str, str | None, ResourceDiagnostic | None]:
    """A command-line value: the content of the file it names, else the value itself.

    Returns ``(text, file path or None, problem)``; an unreadable file is reported and its
    name used as text (pi's behaviour).
    """
    path = os.path.join(cwd, os.path.expanduser(value))
    if not os.path.exists(path):
        return value, None, None
    try:
        return read_text(path), path, None
    except OSError as exc:
        return value, None, warning(f"could not read {what} file: {exc.strerror or exc}", path)


def _first_file(
    name: str, directories: Sequence[str]
) -> tuple[str | None, str | None, ResourceDiagnostic | None]:
    for directory in directories:
        path = os.path.join(directory, name)
        if os.path.exists(path):
            try:
                return read_text(path), path, None
            except OSError as exc:
                return None, None, warning(f"could not read: {exc.strerror or exc}", path)
    return None, None, None


def load_system_prompt_sources(
    *,
    cwd: str,
    agent_dir: str,
    project_dirs: Sequence[str],
    system_prompt: str | None = None,
    append_system_prompt: Sequence[str] = (),
) -> tuple[SystemPromptSources, tuple[ResourceDiagnostic, ...]]:
    """Resolve the custom prompt and appended text (command line first, then files)."""
    problems: list[ResourceDiagnostic] = []
    search = [*project_dirs, agent_dir]

    custom: str | None
    custom_path: str | None
    if system_prompt is not None:
        custom, custom_path, problem = resolve_prompt_input(system_prompt, cwd, "system prompt")
    else:
        custom, custom_path, problem = _first_file(SYSTEM_FILE, search)
    if problem is not None:
        problems.append(problem)

    append: str | None
    append_paths: list[str] = []
    if append_system_prompt:
        parts: list[str] = []
        for value in append_system_prompt:
            text, path, problem = resolve_prompt_input(value, cwd, "append system prompt")
            parts.append(text)
            if path is not None:
                append_paths.append(path)
            if problem is not None:
                problems.append(problem)
        append = "\n\n".join(parts)
    else:
        append, path, problem = _first_file(APPEND_SYSTEM_FILE, search)
        if path is not None:
            append_paths.append(path)
        if problem is not None:
            problems.append(problem)

    return (
        SystemPromptSources(
            custom_prompt=custom,
            custom_prompt_path=custom_path,
            append=append,
            append_paths=tuple(append_paths),
        ),
        tuple(problems),
    )
