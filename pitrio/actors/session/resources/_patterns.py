"""Settings resource lists (``skills``, ``prompts``) as pi reads them: paths and patterns,
``!glob`` excludes, ``+path`` forces in, ``-path`` forces out, a bare glob keeps only what
matches (minimatch's rules: a wildcard never matches a leading dot). Pure functions over
path strings."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence


def to_posix(path: str) -> str:
    """``path`` with ``/`` separators."""
    return path.replace(os.sep, "/")


def is_override(entry: str) -> bool:
    """``!``, ``+`` or ``-`` entries: they filter, they name nothing to load."""
    return entry.startswith(("!", "+", "-"))


def is_pattern(entry: str) -> bool:
    """Entries that filter instead of naming a path: overrides and globs."""
    return is_override(entry) or "*" in entry or "?" in entry


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            # A wildcard never matches a leading dot (minimatch's dot: false).
            out.append("(?!\\.)[^/]*" if i == 0 else "[^/]*")
        elif char == "?":
            out.append("(?!\\.)[^/]" if i == 0 else "[^/]")
        elif char == "[":
            close = segment.find("]", i + 1)
            if close == -1:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : close]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = close
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A glob (``*``, ``?``, ``[...]``, ``**`` for any number of directories) as a regex."""
    parts: list[str] = []
    segments = [s for s in to_posix(pattern).split("/") if s]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            # Any number of directories (none included), none of them a dot entry.
            parts.append("(?:(?!\\.)[^/]*(?:/|$))*")
        else:
            parts.append(_segment_regex(segment) + ("" if last else "/"))
    return re.compile("".join(parts) + r"\Z")


def _match_targets(path: str, base_dir: str) -> list[str]:
    targets = [to_posix(os.path.relpath(path, base_dir)), os.path.basename(path), to_posix(path)]
    if os.path.basename(path) == "SKILL.md":
        # A skill is also named by its directory.
        parent = os.path.dirname(path)
        targets += [
            to_posix(os.path.relpath(parent, base_dir)),
            os.path.basename(parent),
            to_posix(parent),
        ]
    return targets


def matches_any(path: str, patterns: Sequence[str], base_dir: str) -> bool:
    """Whether a glob matches ``path`` relative to ``base_dir``, its name or its absolute path."""
    targets = _match_targets(path, base_dir)
    for pattern in patterns:
        regex = glob_regex(pattern)
        if any(regex.match(target) for target in targets):
            return True
    return False


def _exact(pattern: str) -> str:
    return to_posix(pattern[2:] if pattern.startswith(("./", ".\\")) else pattern)


def matches_any_exact(path: str, patterns: Sequence[str], base_dir: str) -> bool:
    """Whether a ``+``/``-`` entry names ``path`` exactly (relative or absolute)."""
    if not patterns:
        return False
    targets = {to_posix(os.path.relpath(path, base_dir)), to_posix(path)}
    if os.path.basename(path) == "SKILL.md":
        parent = os.path.dirname(path)
        targets |= {to_posix(os.path.relpath(parent, base_dir)), to_posix(parent)}
    return any(_exact(pattern) in targets for pattern in patterns)


def _split_overrides(patterns: Iterable[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    includes: list[str] = []
    excludes: list[str] = []
    force_in: list[str] = []
    force_out: list[str] = []
    for pattern in patterns:
        if pattern.startswith("+"):
            force_in.append(pattern[1:])
        elif pattern.startswith("-"):
            force_out.append(pattern[1:])
        elif pattern.startswith("!"):
            excludes.append(pattern[1:])
        else:
            includes.append(pattern)
    return includes, excludes, force_in, force_out


def apply_patterns(paths: Sequence[str], patterns: Sequence[str], base_dir: str) -> set[str]:
    """The paths a settings list keeps: bare globs include, ``!`` excludes, ``+``/``-`` force."""
    includes, excludes, force_in, force_out = _split_overrides(patterns)
    kept = [p for p in paths if not includes or matches_any(p, includes, base_dir)]
    if excludes:
        kept = [p for p in kept if not matches_any(p, excludes, base_dir)]
    for path in paths:
        if path not in kept and matches_any_exact(path, force_in, base_dir):
            kept.append(path)
    return {p for p in kept if not matches_any_exact(p, force_out, base_dir)}


def enabled_by_overrides(path: str, entries: Sequence[str], base_dir: str) -> bool:
    """Whether an auto-discovered file stays enabled under a settings list's overrides."""
    _, excludes, force_in, force_out = _split_overrides(e for e in entries if is_override(e))
    enabled = not (excludes and matches_any(path, excludes, base_dir))
    if matches_any_exact(path, force_in, base_dir):
        enabled = True
    if matches_any_exact(path, force_out, base_dir):
        enabled = False
    return enabled


__all__ = [
    "apply_patterns",
    "enabled_by_overrides",
    "glob_regex",
    "is_override",
    "is_pattern",
    "matches_any",
    "matches_any_exact",
    "to_posix",
]
