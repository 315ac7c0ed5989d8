"""Finding and loading Python extensions (spec §7.1, with Python modules for pi's TS ones).

An extension is a module with a ``setup(api)`` function (plain or ``async``). Locations, in
load order: the project's ``.pitrio/extensions/``, the agent dir's ``extensions/``, the paths
of the ``extensions`` setting, then ``-e PATH``. Inside an extensions directory (one level):
``*.py`` files and packages (a directory with ``__init__.py``), by name; files starting with
``_`` or ``.`` are skipped. A path given explicitly may be a file or a package directory. The
same file found twice is loaded once.

A module that fails to import, lacks ``setup`` or whose ``setup`` raises stops start-up with
:class:`ExtensionLoadError` naming the file (pi exits with code 1 on extension load errors).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import trio

from pitrio.actors.session.extensions.api import EventBus, ExtensionAPI, PortHolder
from pitrio.actors.session.extensions.registry import (
    Extension,
    Scope,
    SourceInfo,
    invocation_names,
    tool_conflicts,
)
from pitrio.errors import PitrioError


class ExtensionLoadError(PitrioError):
    """An extension could not be loaded; the message names the file and the cause."""


@attrs.frozen(kw_only=True)
class ExtensionSource:
    """One extension to load and where it was found."""

    path: Path
    source: str
    scope: Scope


@attrs.frozen(kw_only=True)
class LoadedExtensions:
    """The result of loading: extensions in load order, shared API state, problems found."""

    extensions: tuple[Extension, ...]
    holder: PortHolder
    bus: EventBus
    problems: tuple[str, ...]


def _entries_of(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    found: list[Path] = []
    for child in sorted(directory.iterdir(), key=lambda p: p.name):
        if child.name.startswith(("_", ".")):
            continue
        is_module = child.is_file() and child.suffix == ".py"
        if is_module or (child.is_dir() and (child / "__init__.py").is_file()):
            found.append(child)
    return found


def discover_extensions(
    cwd: str,
    agent_dir: Path,
    *,
    setting_paths: Sequence[str] = (),
    cli_paths: Sequence[str] = (),
    discover: bool = True,
    project: bool = True,
) -> list[ExtensionSource]:
    """Every extension to load, in load order, without duplicates (``discover=False``: only
    the ``-e`` paths, as ``--no-extensions`` asks; ``project=False``: not the project's
    ``.pitrio/extensions``, an untrusted project's)."""
    sources: list[ExtensionSource] = []
    if discover:
        for child in _entries_of(Path(cwd) / ".pitrio" / "extensions") if project else ():
            sources.append(ExtensionSource(path=child, source="local", scope="project"))
        for child in _entries_of(agent_dir / "extensions"):
            sources.append(ExtensionSource(path=child, source="local", scope="user"))
    for raw in setting_paths if discover else ():
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else agent_dir / path
        if path.is_dir() and not (path / "__init__.py").is_file():
            sources.extend(
                ExtensionSource(path=child, source="settings", scope="user")
                for child in _entries_of(path)
            )
        else:
            sources.append(ExtensionSource(path=path, source="settings", scope="user"))
    for raw in cli_paths:
        path = Path(raw).expanduser()
        path = path if path.is_absolute() else Path(cwd) / path
        sources.append(ExtensionSource(path=path, source="cli", scope="temporary"))
    unique: list[ExtensionSource] = []
    seen: set[Path] = set()
    for item in sources:
        resolved = item.path.resolve()
        if resolved in seen:
            continue
        seen.add(resolved)
        unique.append(attrs.evolve(item, path=resolved))
    return unique


def _import(path: Path) -> ModuleType:
    """Import a file or package under a private module name."""
    if not path.exists():
        raise ExtensionLoadError(f"Failed to load extension {path}: no such file or directory")
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    name = f"pitrio_extension_{path.stem.replace('-', '_')}_{digest}"
    if path.is_dir():
        spec = importlib.util.spec_from_file_location(
            name, path / "__init__.py", submodule_search_locations=[str(path)]
        )
    else:
        spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ExtensionLoadError(f"Failed to load extension {path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise ExtensionLoadError(
            f"Failed to load extension {path}: {type(exc).__name__}: {exc}"
        ) from exc
    return module


def _host_modules() -> None:
    """Import what running extensions needs (their events and the runner) with the attrs
    method cache, before the first extension's ``setup``: a session without extensions
    never imports them (issue 38)."""
    from pitrio import _attrs_cache

    with _attrs_cache.caching():
        import pitrio.actors.session.extensions.runner  # noqa: F401  (imports the events)


async def load_extensions(
    sources: Sequence[ExtensionSource],
    *,
    cwd: str = "",
    flag_values: dict[str, Any] | None = None,
    preloaded: LoadedExtensions | None = None,
) -> LoadedExtensions:
    """Import each extension and run its ``setup(api)``, in order.

    ``preloaded``: extensions loaded already (the project-trust pass, which loads only the
    user's and ``-e`` ones before the decision); they come first and keep their state, and a
    source among them is not imported again.
    """
    holder = preloaded.holder if preloaded is not None else PortHolder(cwd=cwd)
    bus = preloaded.bus if preloaded is not None else EventBus()
    extensions: list[Extension] = list(preloaded.extensions) if preloaded is not None else []
    done = {extension.path for extension in extensions}
    if any(str(source.path) not in done for source in sources):
        _host_modules()
    for source in sources:
        if str(source.path) in done:
            continue
        module = await trio.to_thread.run_sync(_import, source.path)
        setup = getattr(module, "setup", None)
        if not callable(setup):
            raise ExtensionLoadError(
                f"Failed to load extension {source.path}: it has no setup(api) function"
            )
        extension = Extension(
            path=str(source.path),
            source_info=SourceInfo(path=str(source.path), source=source.source, scope=source.scope),
        )
        api = ExtensionAPI(extension, bus, holder)
        try:
            result = setup(api)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            raise ExtensionLoadError(
                f"Failed to load extension {source.path}: setup raised {type(exc).__name__}: {exc}"
            ) from exc
        extensions.append(extension)
    for extension in extensions:
        for name in extension.flags:
            if flag_values and name in flag_values:
                extension.flag_values[name] = flag_values[name]
    _, command_problems = invocation_names(extensions)
    _, tool_problems = tool_conflicts(extensions)
    flag_owner: dict[str, str] = {}
    flag_problems: list[str] = []
    for extension in extensions:
        for name in extension.flags:
            if name in flag_owner:
                flag_problems.append(
                    f"{extension.path}: flag --{name} is already registered by {flag_owner[name]}"
                )
            else:
                flag_owner[name] = extension.path
    return LoadedExtensions(
        extensions=tuple(extensions),
        holder=holder,
        bus=bus,
        problems=tuple(command_problems + tool_problems + flag_problems),
    )
