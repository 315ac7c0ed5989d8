"""Loading a session's extensions at start (spec §7.1): discovery, import, flag values.

Split from :mod:`.bootstrap`; the project-trust pass (:mod:`.trust_gate`) loads the user's and
``-e`` extensions first (``project=False, final=False``) and the final load continues from them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import trio

from pitrio.actors.session.extensions import (
    LoadedExtensions,
    discover_extensions,
    load_extensions,
)
from pitrio.actors.session.extensions.registry import parse_flag_args
from pitrio.actors.session.resources.settings import Settings
from pitrio.errors import PitrioError


class ExtensionChoices(Protocol):
    """The fields of :class:`~pitrio.actors.session.bootstrap.SessionOptions` read here."""

    @property
    def extensions(self) -> Sequence[str]: ...
    @property
    def no_extensions(self) -> bool: ...
    @property
    def extension_flags(self) -> Mapping[str, object]: ...
    @property
    def extension_args(self) -> tuple[str, ...]: ...


def handler_timeout(settings: Settings) -> float:
    """``extensionHandlerTimeoutMs`` (pitrio's key) in seconds."""
    from pitrio.actors.session.extensions.runner import DEFAULT_HANDLER_TIMEOUT

    raw = settings.get("extensionHandlerTimeoutMs")
    if isinstance(raw, int | float) and not isinstance(raw, bool) and raw > 0:
        return float(raw) / 1000
    return DEFAULT_HANDLER_TIMEOUT


async def load_session_extensions(
    cwd: str,
    agent: Path,
    options: ExtensionChoices,
    configured: object,
    *,
    project: bool = True,
    preloaded: LoadedExtensions | None = None,
    final: bool = True,
) -> LoadedExtensions:
    """Discover and load the extensions (``project``: the project's own too); ``final``
    parses the extension flags, which needs every extension loaded."""
    setting_paths: list[str] = []
    if isinstance(configured, list) and not options.no_extensions:
        setting_paths = [item for item in configured if isinstance(item, str)]
    sources = await trio.to_thread.run_sync(
        lambda: discover_extensions(
            cwd,
            agent,
            setting_paths=setting_paths,
            cli_paths=options.extensions,
            discover=not options.no_extensions,
            project=project,
        )
    )
    loaded = await load_extensions(
        sources, cwd=cwd, flag_values=dict(options.extension_flags), preloaded=preloaded
    )
    if not final:
        return loaded
    values, unknown = parse_flag_args(list(loaded.extensions), options.extension_args)
    if unknown:
        raise PitrioError(f"unrecognized arguments: {' '.join(unknown)}")
    for extension in loaded.extensions:
        for name in extension.flags:
            if name in values:
                extension.flag_values[name] = values[name]
    return loaded
