"""``resources_discover`` after ``session_start``: the skills and prompt templates at the paths
the extensions' handlers return join the session's (themes: pitrio has none).

Split from :mod:`.actor`, which starts :func:`discover_resources` as a task when a handler is
registered and takes in the resources it returns.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import trio

from pitrio.actors.session.resources.extension_paths import extend_resources
from pitrio.actors.session.resources.loader import Resources
from pitrio.messages.events import AgentSessionEvent, ExtensionError

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle


async def discover_resources(
    host: ExtensionHostHandle,
    resources: Resources | None,
    start_reason: str,
    emit: Callable[[AgentSessionEvent], None],
) -> Resources | None:
    """Ask the handlers for paths; the session's resources extended with them, or ``None``
    when nothing changes (no resources, no answer, no path)."""
    reason: Literal["startup", "reload"] = "reload" if start_reason == "reload" else "startup"
    cwd = resources.cwd if resources is not None else os.getcwd()
    paths = await host.discover_resources(cwd, reason)
    if resources is None or paths is None:
        return None
    if not (paths.skill_paths or paths.prompt_paths):
        return None
    skills, prompts = paths.skill_paths, paths.prompt_paths
    extended = await trio.to_thread.run_sync(lambda: extend_resources(resources, skills, prompts))
    # A path that is missing or not markdown is told as the handler's problem.
    for problem in extended.diagnostics[len(resources.diagnostics) :]:
        emit(
            ExtensionError(
                extension_path="<runtime>",
                event="resources_discover",
                error=str(problem),
            )
        )
    return extended
