"""pi 1.6.0's package sources (``packages`` in settings, ``pi install|remove|update|list``), pure.

A source is ``npm:<spec>`` (installed with the ``npmCommand`` under ``<root>/npm``), a git
URL (``git:host/user/repo[@ref]``, ``https://``, ``ssh://``, ``git://``, ``git:git@host:...``;
cloned under ``<root>/git/<host>/<path>``), or a local path (used where it is, resolved from
the settings file's directory). The *root* is the agent dir for user packages and the
project's config dir for project packages. Two declarations are the same package when their
identity matches: the npm name, the git host and path without the ref, or the resolved path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

Scope = Literal["user", "project"]

_NPM_SPEC = re.compile(r"^(@?[^@]+(?:/[^@]+)?)(?:@(.+))?$")
_SEMVER = re.compile(r"^v?\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
_GIT_SCHEME = re.compile(r"^(https?|ssh|git)://", re.IGNORECASE)
_NOT_LOCAL = ("npm:", "git:", "github:", "http:", "https:", "ssh:", "builtin:")


@attrs.frozen
class NpmSource:
    """``npm:<name>[@<version>]``; ``pinned`` when the version is one exact version."""

    spec: str
    name: str
    version: str | None
    pinned: bool


@attrs.frozen
class GitSource:
    """A git repository (``repo`` is what ``git clone`` gets) at an optional ``ref``."""

    repo: str
    host: str
    path: str
    ref: str | None


@attrs.frozen
class LocalSource:
    """A directory or file used in place."""

    path: str


Source = NpmSource | GitSource | LocalSource


def _split_ref(url: str) -> tuple[str, str | None]:
    """``repo@ref`` or ``repo#ref`` (an ``@`` of ``git@host`` or of the user part of an URL
    is no ref)."""
    if "#" in url:
        repo, _, ref = url.partition("#")
        return repo, ref or None
    head = url.split("://", 1)[-1]
    slash = head.find("/")
    colon = head.find(":")
    start = max(slash, colon)
    tail = head[start + 1 :] if start >= 0 else ""
    if "@" in tail:
        cut = len(url) - len(tail) + tail.rfind("@")
        return url[:cut], url[cut + 1 :] or None
    return url, None


def parse_git(source: str) -> GitSource | None:
    """A git source, or ``None`` when ``source`` is none (without ``git:``, only URLs with
    an ``http(s)``, ``ssh`` or ``git`` scheme are)."""
    text = source.strip()
    prefixed = text.startswith("git:")
    url = text[4:].strip() if prefixed else text
    if not prefixed and not _GIT_SCHEME.match(url):
        return None
    repo, ref = _split_ref(url)
    if repo.startswith("git@"):
        host, _, path = repo[4:].partition(":")
    else:
        rest = _GIT_SCHEME.sub("", repo)
        rest = rest.split("@", 1)[1] if "@" in rest.split("/", 1)[0] else rest
        host, _, path = rest.partition("/")
    path = path.strip("/").removesuffix(".git")
    if not host or "/" not in path:
        return None
    scheme = repo.startswith(("http://", "https://", "ssh://", "git://", "git@"))
    return GitSource(repo=repo if scheme else f"https://{repo}", host=host, path=path, ref=ref)


def is_local_path(value: str) -> bool:
    """pi's test: anything without a known remote prefix is a path."""
    return not value.strip().startswith(_NOT_LOCAL)


def parse_source(source: str) -> Source:
    """What a ``packages`` entry or an install argument names."""
    if source.startswith("npm:"):
        spec = source[4:].strip()
        match = _NPM_SPEC.match(spec)
        name, version = (match.group(1), match.group(2)) if match else (spec, None)
        pinned = version is not None and _SEMVER.match(version) is not None
        return NpmSource(spec=spec, name=name, version=version, pinned=pinned)
    if is_local_path(source):
        return LocalSource(path=source)
    return parse_git(source) or LocalSource(path=source)


def resolve_path(value: str, base: Path) -> Path:
    """A local source's path: ``~`` expanded, ``file:`` URLs read, relative to ``base``."""
    text = value.strip()
    if text.startswith("file://"):
        text = text[len("file://") :]
    text = os.path.expanduser(text)
    return Path(os.path.normpath(base / text))


def source_of(entry: Any) -> str:
    """The source string of a ``packages`` entry (a string, or an object's ``source``)."""
    if isinstance(entry, dict):
        value = entry.get("source")
        return value if isinstance(value, str) else ""
    return entry if isinstance(entry, str) else ""


def identity(source: str, base: Path) -> str:
    """The package a source names, whatever its version or ref (``base``: where a relative
    local path starts)."""
    parsed = parse_source(source)
    if isinstance(parsed, NpmSource):
        return f"npm:{parsed.name}"
    if isinstance(parsed, GitSource):
        return f"git:{parsed.host}/{parsed.path}"
    return f"local:{resolve_path(parsed.path, base)}"


def settings_form(source: str, cwd: Path, base: Path) -> str:
    """What goes into the settings file: remote sources as given, a local path relative to
    the settings file's directory (``.`` for that directory itself)."""
    parsed = parse_source(source)
    if not isinstance(parsed, LocalSource):
        return source
    return os.path.relpath(resolve_path(parsed.path, cwd), base) or "."


def suggestion(source: str, configured: Sequence[Any]) -> str | None:
    """A configured source that ``source`` probably meant (a bare npm name or spec, a git
    shorthand without ``git:``)."""
    wanted = source.strip()
    for entry in configured:
        text = source_of(entry)
        parsed = parse_source(text)
        if isinstance(parsed, NpmSource) and wanted in (parsed.name, parsed.spec):
            return text
        if isinstance(parsed, GitSource):
            short = f"{parsed.host}/{parsed.path}"
            if wanted == short or (parsed.ref and wanted == f"{short}@{parsed.ref}"):
                return text
    return None


def install_path(parsed: Source, root: Path, base: Path) -> Path:
    """Where a source's files are: ``<root>/npm/node_modules/<name>``,
    ``<root>/git/<host>/<path>``, or the local path itself."""
    if isinstance(parsed, NpmSource):
        return root / "npm" / "node_modules" / parsed.name
    if isinstance(parsed, GitSource):
        target = (root / "git" / parsed.host / parsed.path).resolve()
        if not target.is_relative_to((root / "git").resolve()):
            raise ValueError(f"Refusing to use path outside package install root: {target}")
        return target
    return resolve_path(parsed.path, base)


def package_manager(command: Sequence[str]) -> str:
    """Which of npm, pnpm or bun an ``npmCommand`` runs (a wrapper's ``--`` names it)."""

    def name(word: str) -> str:
        return re.sub(r"\.(cmd|exe)$", "", os.path.basename(word), flags=re.IGNORECASE)

    first, rest = command[0], list(command[1:])
    if "--" in rest:
        index = len(rest) - 1 - rest[::-1].index("--")
        return name(rest[index + 1]) if index + 1 < len(rest) else name(first)
    known = {"npm", "pnpm", "bun"}
    if name(first) in known:
        return name(first)
    wrapped = list(dict.fromkeys(name(w) for w in rest if name(w) in known))
    if len(wrapped) > 1:
        raise ValueError(f"Ambiguous npmCommand package managers: {', '.join(wrapped)}")
    return wrapped[0] if wrapped else name(first)


def npm_install_args(manager: str, specs: Sequence[str], root: Path) -> list[str]:
    """The arguments installing ``specs`` into the managed ``root``: without peer
    dependencies (pi's own packages are the host's, never installed beside a package)."""
    if manager == "bun":
        return ["install", *specs, "--cwd", str(root), "--omit=peer"]
    if manager == "pnpm":
        return [
            "install",
            *specs,
            "--prefix",
            str(root),
            "--config.auto-install-peers=false",
            "--config.strict-peer-dependencies=false",
            "--config.strict-dep-builds=false",
        ]
    return [
        "install",
        *specs,
        "--prefix",
        str(root),
        "--legacy-peer-deps",
        "--no-audit",
        "--no-fund",
    ]


def npm_uninstall_args(manager: str, name: str, root: Path) -> list[str]:
    """The arguments removing ``name`` from the managed ``root``."""
    if manager == "bun":
        return ["uninstall", name, "--cwd", str(root)]
    args = ["uninstall", name, "--prefix", str(root)]
    if manager != "pnpm":
        args += ["--legacy-peer-deps", "--no-audit", "--no-fund"]
    return args


def git_dependency_args(manager: str) -> list[str]:
    """The arguments installing a cloned package's own dependencies in its directory."""
    if manager == "bun":
        return ["install", "--omit=dev", "--omit=peer"]
    if manager == "pnpm":
        return [
            "install",
            "--prod",
            "--config.auto-install-peers=false",
            "--config.strict-peer-dependencies=false",
            "--config.strict-dep-builds=false",
        ]
    if manager == "npm":
        return ["install", "--omit=dev", "--legacy-peer-deps", "--no-audit", "--no-fund"]
    return ["install"]
