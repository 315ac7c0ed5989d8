"""What skills and prompt templates share: provenance, diagnostics, frontmatter, walking.

* :class:`SourceInfo` is pi's ``sourceInfo`` (where a resource came from), serialised for
  ``get_commands``; :class:`ResourceDiagnostic` is a warning or a name collision.
* :func:`parse_frontmatter` splits a markdown file into its YAML header and body the way pi
  does (leading ``---`` line, closing ``\\n---``, body trimmed only when a header exists).
* :class:`IgnoreRules` applies ``.gitignore`` / ``.ignore`` / ``.fdignore`` files met while
  walking a resource directory; pi prefixes each file's patterns with the file's directory
  (relative to the walk's root) and keeps one rule set for the whole walk, and so do we.
* Settings resource lists (``skills``, ``prompts``) hold paths and patterns: ``!glob``
  excludes, ``+path`` forces in, ``-path`` forces out, a bare glob keeps only what matches.
  :func:`apply_patterns` and :func:`enabled_by_overrides` give pi's outcome (they live in
  :mod:`._patterns`, re-exported here).
* :func:`settle_candidates` orders candidate files by pi's precedence (project settings,
  project auto-discovery, user settings, user auto-discovery) and keeps one per real file.

Pure functions over paths; the only I/O is reading directories and small files.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs

from pitrio.actors.session.resources._patterns import (
    apply_patterns,
    enabled_by_overrides,
    glob_regex,
    is_override,
    is_pattern,
    matches_any,
    matches_any_exact,
    to_posix,
)

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

    from pitrio.actors.session.resources.settings import Settings

# PyYAML (~35 ms) and pathspec (~15 ms) are imported on first use, not at start-up: most
# sessions have no skill or template with frontmatter and no ignore file to match (issue 7,
# cold start).

Scope = Literal["user", "project", "temporary"]
Origin = Literal["package", "top-level"]
DiagnosticKind = Literal["warning", "collision"]

IGNORE_FILE_NAMES = (".gitignore", ".ignore", ".fdignore")


@attrs.frozen(kw_only=True)
class SourceInfo:
    """Where a resource came from (pi's ``sourceInfo``).

    ``source`` is ``auto`` (found in a default directory), ``local`` (listed in settings) or
    ``cli`` (given on the command line); ``base_dir`` is the directory auto-discovery
    searched from (the agent dir, a project config dir, an ``.agents`` dir).
    """

    path: str
    source: str
    scope: Scope
    origin: Origin = "top-level"
    base_dir: str | None = None

    def to_json(self) -> dict[str, Any]:
        """pi's wire shape: ``{path, source, scope, origin, baseDir?}``."""
        out: dict[str, Any] = {
            "path": self.path,
            "source": self.source,
            "scope": self.scope,
            "origin": self.origin,
        }
        if self.base_dir is not None:
            out["baseDir"] = self.base_dir
        return out


@attrs.frozen(kw_only=True)
class Collision:
    """Two resources of one kind with the same name: the first loaded wins."""

    resource_type: Literal["skill", "prompt"]
    name: str
    winner_path: str
    loser_path: str


@attrs.frozen(kw_only=True)
class ResourceDiagnostic:
    """A problem found while loading resources; loading always goes on."""

    kind: DiagnosticKind
    message: str
    path: str | None = None
    collision: Collision | None = None

    def __str__(self) -> str:
        if self.collision is not None:
            c = self.collision
            return (
                f"{c.resource_type} {c.name!r}: {c.loser_path} is ignored,"
                f" {c.winner_path} was loaded first"
            )
        return f"{self.path}: {self.message}" if self.path else self.message


def warning(message: str, path: str | os.PathLike[str] | None = None) -> ResourceDiagnostic:
    """A warning diagnostic."""
    return ResourceDiagnostic(
        kind="warning", message=message, path=None if path is None else os.fspath(path)
    )


# --- frontmatter ------------------------------------------------------------------------------


class FrontmatterError(ValueError):
    """The YAML header of a markdown file does not parse or is not a mapping."""


@attrs.frozen
class Frontmatter:
    """A markdown file split into its YAML header (``{}`` without one) and its body."""

    data: dict[str, Any]
    body: str


_LEADING_FENCE = re.compile(r"\s*---(?:\n|$)")
_YAML12_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


@functools.cache
def _frontmatter_loader() -> Any:
    """PyYAML's safe loader with YAML 1.2 booleans, as pi's parser reads them (built once).

    YAML 1.1 (PyYAML's default) also reads ``yes``/``no``/``on``/``off`` as booleans, which
    would turn ``description: Yes`` into ``True``.
    """
    # PyYAML ships no type information; its parser is typed as Any here.
    import yaml  # type: ignore[import-untyped]

    class _FrontmatterLoader(yaml.SafeLoader):  # type: ignore[misc]
        yaml_implicit_resolvers = {
            first: [
                (tag, _YAML12_BOOL if tag == "tag:yaml.org,2002:bool" else regex)
                for tag, regex in resolvers
                if tag != "tag:yaml.org,2002:bool" or first in "tTfF"
            ]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }

    return _FrontmatterLoader


def parse_frontmatter(text: str) -> Frontmatter:
    """Split ``text`` into header and body (pi's rules).

    Newlines are normalised and a BOM dropped. A header is a first line ``---`` (leading
    blank space allowed) closed by a line starting with ``---``; without a closing line the
    whole text is body. With a header the body is trimmed, without one it is left as is.
    """
    normalised = text.replace("\r\n", "\n").replace("\r", "\n").removeprefix("\ufeff")
    opening = _LEADING_FENCE.match(normalised)
    if opening is None:
        return Frontmatter({}, normalised)
    start = opening.end()
    end = normalised.find("\n---", start)
    if end == -1:
        return Frontmatter({}, normalised)
    header = normalised[start:end]
    body = normalised[end + 4 :].strip()
    if not header.strip():
        return Frontmatter({}, body)
    loader = _frontmatter_loader()
    import yaml

    try:
        data = yaml.load(header, Loader=loader)
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML frontmatter: {_one_line(str(exc))}") from None
    if data is None:
        return Frontmatter({}, body)
    if not isinstance(data, dict):
        raise FrontmatterError("frontmatter must be a YAML mapping")
    return Frontmatter({str(key): value for key, value in data.items()}, body)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def read_text(path: str | os.PathLike[str]) -> str:
    """A file's text as UTF-8 (undecodable bytes replaced, as Node's reader does)."""
    with open(path, encoding="utf-8", errors="replace") as file:
        return file.read()


# --- paths ------------------------------------------------------------------------------------


def resolve_user_path(value: str, base_dir: str | os.PathLike[str], home: Path) -> str:
    """A path from settings or the command line made absolute (pi's ``resolvePath``).

    Surrounding blanks are dropped, ``~`` and ``~/x`` name the home directory, a relative
    path is taken from ``base_dir``; ``..`` is folded but symlinks are kept.
    """
    text = value.strip()
    if text == "~":
        text = str(home)
    elif text.startswith("~/"):
        text = str(home / text[2:])
    elif text.startswith("~"):
        # pi reads "~name" as "<home>/name", not as another user's home.
        text = str(home / text[1:])
    return os.path.normpath(os.path.join(os.fspath(base_dir), text))


def real_path(path: str) -> str:
    """The canonical path (symlinks resolved) used to load a file once; ``path`` if that fails."""
    try:
        return os.path.realpath(path, strict=True)
    except OSError:
        return path


EntryKind = Literal["file", "dir"]


def entry_kind(path: str) -> EntryKind | None:
    """``file`` or ``dir`` after following symlinks; ``None`` otherwise (or when dangling)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return None


def list_dir(path: str) -> list[str]:
    """Entry names of a directory, sorted (``[]`` when unreadable).

    Sorted so discovery order, and with it which of two same-named resources wins, does not
    depend on the file system's directory order.
    """
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


# --- ignore files -----------------------------------------------------------------------------


def _prefixed_pattern(line: str, prefix: str) -> str | None:
    stripped = line.strip()
    if not stripped or (stripped.startswith("#") and not stripped.startswith("\\#")):
        return None
    pattern = line
    negated = False
    if pattern.startswith("!"):
        negated, pattern = True, pattern[1:]
    elif pattern.startswith("\\!"):
        pattern = pattern[1:]
    pattern = pattern.removeprefix("/")
    prefixed = f"{prefix}{pattern}"
    return f"!{prefixed}" if negated else prefixed


class IgnoreRules:
    """The ignore rules met so far in one walk, matched against paths relative to its root."""

    def __init__(self) -> None:
        self._patterns: list[str] = []
        self._spec: GitIgnoreSpec | None = None

    def add_dir(self, directory: str, root: str) -> None:
        """Read the ignore files of ``directory`` (patterns anchored at it, as pi does)."""
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else to_posix(relative) + "/"
        for name in IGNORE_FILE_NAMES:
            candidate = os.path.join(directory, name)
            if not os.path.isfile(candidate):
                continue
            try:
                lines = read_text(candidate).splitlines()
            except OSError:
                continue
            for line in lines:
                pattern = _prefixed_pattern(line, prefix)
                if pattern is not None:
                    self._patterns.append(pattern)
                    self._spec = None

    def ignores(self, relative: str, *, is_dir: bool) -> bool:
        """Whether the entry at ``relative`` (posix, from the root) is ignored."""
        if not self._patterns:
            return False
        if self._spec is None:
            from pathspec import GitIgnoreSpec

            self._spec = GitIgnoreSpec.from_lines(self._patterns)
        return bool(self._spec.match_file(relative + "/" if is_dir else relative))


def collect_markdown_files(directory: str, *, recursive: bool) -> list[str]:
    """``.md`` files of a directory honouring ignore files; dot entries and node_modules skipped."""
    found: list[str] = []
    if entry_kind(directory) != "dir":
        return found
    rules = IgnoreRules()

    def walk(current: str) -> None:
        rules.add_dir(current, directory)
        for name in list_dir(current):
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
                if recursive:
                    walk(full)
            elif name.endswith(".md"):
                found.append(full)

    walk(directory)
    return found


# --- candidates -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Candidate:
    """A file that may be loaded as a resource, with where it came from."""

    path: str
    info: SourceInfo
    enabled: bool = True


def _rank(info: SourceInfo) -> int:
    # pi's precedence: project settings, project auto, user settings, user auto, packages.
    if info.origin == "package":
        return 4
    base = 0 if info.scope == "project" else 2
    return base + (0 if info.source == "local" else 1)


def settle_candidates(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Enabled candidates in precedence order, one per real file.

    A disabled entry still claims its file, so a lower-ranked path to the same file does not
    bring it back (pi's behaviour).
    """
    ordered = sorted(candidates, key=lambda c: _rank(c.info))
    seen: set[str] = set()
    kept: list[Candidate] = []
    for candidate in ordered:
        key = real_path(candidate.path)
        if key in seen:
            continue
        seen.add(key)
        if candidate.enabled:
            kept.append(candidate)
    return kept


def settings_candidates(
    entries: Sequence[str],
    *,
    base_dir: str,
    scope: Scope,
    home: Path,
    collect_dir: Callable[[str], list[str]],
    what: str,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """Files named by a settings list (``skills`` / ``prompts``) of one scope.

    Plain entries are paths (relative to ``base_dir``): a directory contributes what
    ``collect_dir`` finds in it, a file itself. Pattern entries then decide which of those
    files are enabled. A listed path that does not exist is reported.
    """
    plain = [e for e in entries if not is_pattern(e)]
    patterns = [e for e in entries if is_pattern(e)]
    files: list[str] = []
    problems: list[ResourceDiagnostic] = []
    for entry in plain:
        resolved = resolve_user_path(entry, base_dir, home)
        kind = entry_kind(resolved)
        if kind == "dir":
            files.extend(collect_dir(resolved))
        elif kind == "file":
            files.append(resolved)
        else:
            problems.append(warning(f"{what} path does not exist", resolved))
    enabled = apply_patterns(files, patterns, base_dir)
    candidates = [
        Candidate(
            path=f, info=SourceInfo(path=f, source="local", scope=scope), enabled=f in enabled
        )
        for f in dict.fromkeys(files)
    ]
    return candidates, problems


def listed_candidates(
    settings: Settings,
    key: str,
    *,
    agent_dir: str,
    project_dirs: Sequence[str],
    home: Path,
    collect_dir: Callable[[str], list[str]],
    what: str,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """The files the settings list ``key`` names, project scope first (paths relative to the
    project settings' directory), then user scope (relative to the agent dir)."""
    candidates: list[Candidate] = []
    problems: list[ResourceDiagnostic] = []
    scopes: tuple[tuple[Literal["user", "project"], str], ...] = (("user", agent_dir),)
    if settings.project_path is not None or project_dirs:  # none: an untrusted project
        base = str(settings.project_path.parent) if settings.project_path else project_dirs[0]
        scopes = (("project", base), *scopes)
    for scope, base in scopes:
        found, reported = settings_candidates(
            settings.resource_entries(key, scope),
            base_dir=base,
            scope=scope,
            home=home,
            collect_dir=collect_dir,
            what=what,
        )
        candidates += found
        problems += reported
    return candidates, problems


def cli_candidates(
    paths: Sequence[str],
    cwd: str,
    home: Path,
    *,
    collect_dir: Callable[[str], list[str]],
    what: str,
) -> tuple[list[Candidate], list[ResourceDiagnostic]]:
    """Paths given on the command line: a directory contributes what ``collect_dir`` finds,
    a file must be markdown; missing paths and other files are reported."""
    candidates: list[Candidate] = []
    diagnostics: list[ResourceDiagnostic] = []
    for raw in paths:
        resolved = resolve_user_path(raw, cwd, home)
        kind = entry_kind(resolved)
        if kind is None:
            diagnostics.append(warning(f"{what} path does not exist", resolved))
            continue
        if kind == "dir":
            files = collect_dir(resolved)
        elif resolved.endswith(".md"):
            files = [resolved]
        else:
            diagnostics.append(warning(f"{what} path is not a markdown file", resolved))
            continue
        candidates += [
            Candidate(path=f, info=SourceInfo(path=f, source="cli", scope="temporary"))
            for f in files
        ]
    return candidates, diagnostics


__all__ = [
    "IGNORE_FILE_NAMES",
    "Candidate",
    "Collision",
    "DiagnosticKind",
    "EntryKind",
    "Frontmatter",
    "FrontmatterError",
    "IgnoreRules",
    "Origin",
    "ResourceDiagnostic",
    "Scope",
    "SourceInfo",
    "apply_patterns",
    "cli_candidates",
    "collect_markdown_files",
    "enabled_by_overrides",
    "entry_kind",
    "glob_regex",
    "is_override",
    "is_pattern",
    "list_dir",
    "listed_candidates",
    "matches_any",
    "matches_any_exact",
    "parse_frontmatter",
    "read_text",
    "real_path",
    "resolve_user_path",
    "settings_candidates",
    "settle_candidates",
    "to_posix",
    "warning",
]
