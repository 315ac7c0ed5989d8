"""What ``pitrio install|remove|update|list`` do (pi 1.6.0's package commands): install a
package source, record it in ``packages`` of the user's or the project's settings, remove
it, list what is configured, and update what is installed. Imported only by those commands.

npm sources are installed with the ``npmCommand`` setting (default ``npm``) into the scope's
managed ``npm`` directory, git sources cloned into its ``git`` directory (dependencies then
installed with the same command), local sources used where they are. The commands run as
child processes with the terminal's output, as pi runs them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

from pitrio.actors.session.resources import packages as sources
from pitrio.actors.session.resources.packages import GitSource, NpmSource, Scope
from pitrio.actors.session.resources.settings import (
    PI_PROJECT_DIR_NAME,
    PROJECT_DIR_NAME,
    SETTINGS_FILE,
    is_pi_agent_dir,
    read_settings_file,
    update_settings_file,
)
from pitrio.actors.session.trust_gate import trusted_without_asking
from pitrio.actors.session_store.paths import agent_dir
from pitrio.errors import PitrioError

Runner = Callable[[Sequence[str], Path | None], None]
"""Runs one command (in a directory), raising :class:`PackageError` when it fails."""

__all__ = [
    "ConfiguredPackage",
    "PackageError",
    "PackageManager",
    "agent_dir",
    "run_command",
    "trusted_without_asking",
]


class PackageError(PitrioError):
    """A package command failed; the message is what the user is told."""


@attrs.frozen
class ConfiguredPackage:
    """One ``packages`` entry as ``list`` shows it."""

    source: str
    scope: Scope
    filtered: bool
    """Declared as an object (resource filters), not a plain string."""
    installed_path: Path | None


def run_command(command: Sequence[str], cwd: Path | None) -> None:
    """Run ``command`` with this terminal's output; a failure names the command."""
    try:
        done = subprocess.run(list(command), cwd=cwd, check=False)
    except OSError as exc:
        raise PackageError(f"{command[0]}: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        raise PackageError(f"{' '.join(command)} failed with exit code {done.returncode}")


class PackageManager:
    """The package commands over one working directory's user and project settings."""

    def __init__(
        self,
        *,
        cwd: Path,
        agent: Path,
        project_trusted: bool,
        run: Runner = run_command,
        progress: Callable[[str], None] = print,
    ) -> None:
        self.cwd = cwd
        self.agent = agent
        self.project_trusted = project_trusted
        self._run = run
        self._progress = progress
        name = PI_PROJECT_DIR_NAME if is_pi_agent_dir(agent) else PROJECT_DIR_NAME
        self.project_dir = cwd / name

    # -- settings --------------------------------------------------------------------------

    def _file(self, scope: Scope) -> Path:
        return (self.agent if scope == "user" else self._project_root()) / SETTINGS_FILE

    def _project_root(self) -> Path:
        if not self.project_trusted:
            raise PackageError("Project is not trusted; refusing to access project package storage")
        return self.project_dir

    def _root(self, scope: Scope) -> Path:
        """Where the scope's managed packages live and its relative paths start."""
        return self.agent if scope == "user" else self._project_root()

    def settings(self, scope: Scope) -> dict[str, Any]:
        """The scope's settings (a project's only when trusted; ``{}`` when unreadable)."""
        if scope == "project" and not self.project_trusted:
            return {}
        values, _ = read_settings_file(self._file(scope))
        return values

    def _packages(self, scope: Scope) -> list[Any]:
        value = self.settings(scope).get("packages")
        return list(value) if isinstance(value, list) else []

    def _save(self, scope: Scope, packages: list[Any]) -> None:
        update_settings_file(self._file(scope), {"packages": packages})

    def npm_command(self) -> list[str]:
        """``npmCommand`` (the project's over the user's), default ``["npm"]``."""
        for scope in ("project", "user"):
            value = self.settings(scope).get("npmCommand")
            if isinstance(value, list) and value:
                if not isinstance(value[0], str) or not value[0]:
                    raise PackageError(
                        "Invalid npmCommand: first array entry must be a non-empty command"
                    )
                return [str(word) for word in value]
        return ["npm"]

    def _manager(self) -> str:
        try:
            return sources.package_manager(self.npm_command())
        except ValueError as exc:
            raise PackageError(str(exc)) from exc

    # -- install / remove --------------------------------------------------------------------

    def install(self, source: str, *, local: bool) -> None:
        """Install ``source`` and record it in the scope's ``packages`` (pi's order: the
        installation first, so a failed one records nothing)."""
        scope: Scope = "project" if local else "user"
        root = self._root(scope)
        parsed = sources.parse_source(source)
        self._progress(f"Installing {source}...")
        if isinstance(parsed, NpmSource):
            self._install_npm([parsed.spec], root)
        elif isinstance(parsed, GitSource):
            self._install_git(parsed, root)
        else:
            path = sources.resolve_path(parsed.path, self.cwd)
            if not path.exists():
                raise PackageError(f"Path does not exist: {path}")
        self._remember(source, scope)

    def _remember(self, source: str, scope: Scope) -> None:
        root = self._root(scope)
        packages = self._packages(scope)
        form = sources.settings_form(source, self.cwd, root)
        wanted = sources.identity(source, self.cwd)
        for index, entry in enumerate(packages):
            if sources.identity(sources.source_of(entry), root) == wanted:
                if sources.source_of(entry) == form:
                    return
                packages[index] = {**entry, "source": form} if isinstance(entry, dict) else form
                return self._save(scope, packages)
        self._save(scope, [*packages, form])

    def remove(self, source: str, *, local: bool) -> bool:
        """Uninstall ``source`` and drop it from the scope's ``packages``; ``False`` when
        no entry matched."""
        scope: Scope = "project" if local else "user"
        root = self._root(scope)
        parsed = sources.parse_source(source)
        self._progress(f"Removing {source}...")
        if isinstance(parsed, NpmSource):
            if (root / "npm").exists():
                args = sources.npm_uninstall_args(
                    self._manager(), parsed.name, (root / "npm").resolve()
                )
                self._run([*self.npm_command(), *args], None)
        elif isinstance(parsed, GitSource):
            target = sources.install_path(parsed, root, root)
            shutil.rmtree(target, ignore_errors=True)
            _prune_empty(target.parent, root / "git")
        packages = self._packages(scope)
        wanted = sources.identity(source, self.cwd)
        kept = [e for e in packages if sources.identity(sources.source_of(e), root) != wanted]
        if len(kept) == len(packages):
            return False
        self._save(scope, kept)
        return True

    def _install_npm(self, specs: list[str], root: Path) -> None:
        npm_root = root / "npm"
        npm_root.mkdir(parents=True, exist_ok=True)
        _ignore_all(npm_root)
        manifest = npm_root / "package.json"
        if not manifest.exists():
            manifest.write_bytes(
                orjson.dumps({"name": "pi-extensions", "private": True}, option=orjson.OPT_INDENT_2)
            )
        args = sources.npm_install_args(self._manager(), specs, npm_root.resolve())
        self._run([*self.npm_command(), *args], None)

    def _install_git(self, parsed: GitSource, root: Path) -> None:
        target = sources.install_path(parsed, root, root)
        if target.exists():
            self._sync_git(parsed, target)
            return
        _ignore_all(root / "git")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._run(["git", "clone", parsed.repo, str(target)], None)
            if parsed.ref:
                self._run(["git", "checkout", parsed.ref], target)
            if (target / "package.json").exists():
                args = sources.git_dependency_args(self._manager())
                self._run([*self.npm_command(), *args], target)
        except PackageError:
            shutil.rmtree(target, ignore_errors=True)
            _prune_empty(target.parent, root / "git")
            raise

    def _sync_git(self, parsed: GitSource, target: Path) -> None:
        """Bring a clone to its configured ref (or its branch's upstream)."""
        if parsed.ref:
            self._run(["git", "fetch", "origin", parsed.ref], target)
            self._run(["git", "reset", "--hard", "FETCH_HEAD"], target)
        else:
            self._run(["git", "fetch", "origin"], target)
            self._run(["git", "reset", "--hard", "@{upstream}"], target)
        if (target / "package.json").exists():
            self._run([*self.npm_command(), *sources.git_dependency_args(self._manager())], target)

    # -- list / update -----------------------------------------------------------------------

    def configured(self) -> list[ConfiguredPackage]:
        """Every ``packages`` entry, the user's first, with where it is installed."""
        found = []
        for scope in ("user", "project"):
            if scope == "project" and not self.project_trusted:
                continue
            root = self._root(scope)
            for entry in self._packages(scope):
                text = sources.source_of(entry)
                path = sources.install_path(sources.parse_source(text), root, root)
                found.append(
                    ConfiguredPackage(
                        source=text,
                        scope=scope,
                        filtered=isinstance(entry, dict),
                        installed_path=path if path.exists() else None,
                    )
                )
        return found

    def update(self, source: str | None) -> list[str]:
        """Update the configured packages (or the one ``source`` names): unpinned npm
        packages are installed again at their range's newest version, git clones reset to
        their ref; one line per package that changed (``npm:x 1.0.0 -> 1.1.0``)."""
        chosen = self.configured()
        if source is not None:
            wanted = sources.identity(source, self.cwd)
            chosen = [
                p for p in chosen if sources.identity(p.source, self._root(p.scope)) == wanted
            ]
            if not chosen:
                everything = [p.source for p in self.configured()]
                hint = sources.suggestion(source, everything)
                tail = f". Did you mean {hint}?" if hint else ""
                raise PackageError(f"No matching package found for {source}{tail}")
        changed = []
        for package in chosen:
            parsed = sources.parse_source(package.source)
            root = self._root(package.scope)
            where = " (project)" if package.scope == "project" else ""
            if isinstance(parsed, NpmSource) and not parsed.pinned:
                path = sources.install_path(parsed, root, root)
                before = _npm_version(path)
                self._progress(f"Updating {package.source}...")
                self._install_npm([parsed.spec], root)
                after = _npm_version(path)
                if after != before:
                    changed.append(f"{package.source}{where} {before or '(none)'} -> {after}")
            elif isinstance(parsed, GitSource):
                path = sources.install_path(parsed, root, root)
                before = _git_head(path)
                self._progress(f"Updating {package.source}...")
                self._install_git(parsed, root)
                after = _git_head(path)
                if after != before:
                    old = before[:7] if before else "(none)"
                    changed.append(f"{package.source}{where} {old} -> {(after or '')[:7]}")
        return changed


def _ignore_all(directory: Path) -> None:
    """A ``.gitignore`` that keeps the managed directory out of a surrounding repository."""
    directory.mkdir(parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n!.gitignore\n", encoding="utf-8")


def _prune_empty(directory: Path, root: Path) -> None:
    """Remove the empty directories a removed clone leaves, up to ``root``."""
    current = directory
    while current != root and current.is_relative_to(root):
        try:
            current.rmdir()
        except OSError:
            return
        current = current.parent


def _npm_version(path: Path) -> str | None:
    try:
        manifest = orjson.loads((path / "package.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    version = manifest.get("version") if isinstance(manifest, dict) else None
    return version if isinstance(version, str) else None


def _git_head(path: Path) -> str | None:
    if not path.exists():
        return None
    done = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=False
    )
    return done.stdout.strip() or None if done.returncode == 0 else None
