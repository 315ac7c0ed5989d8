"""A directory walk that honours ignore files, for the pure-Python ``grep`` and ``find``.

What ``rg``/``fd`` skip, we skip: paths matched by ``.gitignore`` files (nested ones too, and
those of parent directories up to the repository root, plus ``.git/info/exclude``) and by
``.ignore`` files. Hidden files are included (pi passes ``--hidden``); the ``.git`` directory
itself is never entered. Symbolic links are not followed. Entries come in a stable order
(sorted by name, depth first), where the native tools' parallel walks give no fixed order.

Blocking filesystem work: call it from ``trio.to_thread``; ``cancelled`` lets an abandoned
walk stop early. Gitignore matching is pathspec's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import pathspec
# pathspec (~15 ms to import) is imported by the first walk that reads an ignore file, not at
# start-up (issue 7, cold start).

IGNORE_FILES = (".gitignore", ".ignore")


@attrs.frozen
class Entry:
    """One walked path: absolute, relative to the walk root (``/``-separated), a directory?
    a link? a regular file (not a FIFO, socket or device)?"""

    path: str
    rel: str
    is_dir: bool
    is_symlink: bool
    is_file: bool


@attrs.frozen
class _Rules:
    """The ignore patterns of one directory, matched relative to it."""

    base: str  # absolute directory the patterns are relative to
    spec: pathspec.GitIgnoreSpec

    def verdict(self, path: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included by a ``!`` pattern, None: not mentioned."""
        rel = os.path.relpath(path, self.base).replace(os.sep, "/")
        if rel.startswith("../"):
            return None
        result = self.spec.check_file(rel + "/" if is_dir else rel)
        return result.include


def find_git_root(start: str) -> str | None:
    """The nearest directory at or above ``start`` holding ``.git`` (directory or file)."""
    current = os.path.abspath(start)
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _read_lines(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().splitlines()
    except OSError:
        return []


def _rules_for(directory: str, with_git: bool) -> _Rules | None:
    lines: list[str] = []
    for name in IGNORE_FILES:
        if name == ".gitignore" and not with_git:
            continue
        lines.extend(_read_lines(os.path.join(directory, name)))
    if not lines:
        return None
    import pathspec

    return _Rules(directory, pathspec.GitIgnoreSpec.from_lines(lines))


class Walker:
    """Walks one root; ``require_git``: ``.gitignore`` counts only inside a git work tree.

    ``skip_dir(rel)`` may prune directories (given their path relative to the root).
    """

    def __init__(
        self,
        root: str,
        *,
        require_git: bool,
        cancelled: Callable[[], bool] = lambda: False,
        skip_dir: Callable[[str], bool] | None = None,
    ) -> None:
        self.root = os.path.abspath(root)
        self.cancelled = cancelled
        self.skip_dir = skip_dir
        git_root = find_git_root(self.root)
        self._with_git = git_root is not None or not require_git
        self._inherited: list[_Rules] = []
        if git_root is not None:
            exclude = _read_lines(os.path.join(git_root, ".git", "info", "exclude"))
            if exclude:
                import pathspec

                self._inherited.append(_Rules(git_root, pathspec.GitIgnoreSpec.from_lines(exclude)))
            # Ignore files of the directories from the repository root down to the search root.
            ancestors: list[str] = []
            current = self.root
            while current != git_root:
                current = os.path.dirname(current)
                ancestors.append(current)
            for directory in reversed(ancestors):
                rules = _rules_for(directory, self._with_git)
                if rules is not None:
                    self._inherited.append(rules)

    def ignored(self, path: str, is_dir: bool, rules: list[_Rules]) -> bool:
        """Whether ``path`` is ignored: the deepest ignore file that mentions it decides."""
        for rule in reversed(rules):
            verdict = rule.verdict(path, is_dir)
            if verdict is not None:
                return verdict
        return False

    def __iter__(self) -> Iterator[Entry]:
        yield from self._walk_dir(self.root, self._rules_below(self.root, self._inherited))

    def _rules_below(self, directory: str, inherited: list[_Rules]) -> list[_Rules]:
        rules = _rules_for(directory, self._with_git)
        return inherited if rules is None else [*inherited, rules]

    def _walk_dir(self, directory: str, rules: list[_Rules]) -> Iterator[Entry]:
        if self.cancelled():
            return
        try:
            with os.scandir(directory) as scan:
                children = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            return  # unreadable directories are skipped, as rg and fd do
        for child in children:
            if self.cancelled():
                return
            try:
                is_symlink = child.is_symlink()
                is_dir = child.is_dir(follow_symlinks=False)
                is_file = child.is_file(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and child.name == ".git":
                continue
            if self.ignored(child.path, is_dir, rules):
                continue
            rel = os.path.relpath(child.path, self.root).replace(os.sep, "/")
            if is_dir and self.skip_dir is not None and self.skip_dir(rel):
                continue
            yield Entry(
                path=child.path, rel=rel, is_dir=is_dir, is_symlink=is_symlink, is_file=is_file
            )
            if is_dir:
                yield from self._walk_dir(child.path, self._rules_below(child.path, rules))
