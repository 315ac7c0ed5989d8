"""The models a daemon's client may start a session on, before any session exists.

The host's ``models`` command: every usable model (the built-in catalogue's with credentials,
``models.json``'s, extensions' once a session loaded them), pi's model JSON for each, and what
a new session starts on when the client names no model (the daemon's ``--model``, else the
settings' default for the working directory, as :func:`~pitrio.actors.session.bootstrap.
start_session` chooses it) with its thinking level.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from pitrio.actors.model_router import ModelRouterHandle
from pitrio.actors.model_router.thinking import DEFAULT_THINKING_LEVEL, clamp_thinking_level
from pitrio.actors.session.bootstrap import absolute_cwd, default_model
from pitrio.actors.session.resources.settings import load_settings
from pitrio.actors.session.trust_gate import trusted_without_asking
from pitrio.messages.codec import to_json
from pitrio.messages.model import Model


async def model_choices(
    router: ModelRouterHandle,
    *,
    agent_dir: Path,
    cwd: str | None,
    daemon_model: str | None,
) -> dict[str, Any]:
    """``{"models": [...], "default": "provider/id", "defaultThinkingLevel": level}``.

    ``daemon_model`` is ``pitrio serve --model`` (with an optional ``:level``). The default
    model is listed even when the offered list leaves it out (``faux/echo`` while a real
    model is configured), so a client can always pick what it would get anyway.
    """
    where = absolute_cwd(cwd)
    # An untrusted project's settings do not choose the model (pi 1.6.0's project trust).
    trusted = await trio.to_thread.run_sync(trusted_without_asking, where, agent_dir, Path.home())
    settings = await trio.to_thread.run_sync(
        lambda: load_settings(agent_dir, where, project_trusted=trusted)
    )
    level: str | None = None
    chosen: Model
    if daemon_model:
        chosen, level = await router.resolve_pattern(daemon_model)
    else:
        chosen = await default_model(router, settings)
    models = list(await router.available_models())
    if not any(m.provider == chosen.provider and m.id == chosen.id for m in models):
        models.append(chosen)
    wanted = level or settings.text("defaultThinkingLevel") or DEFAULT_THINKING_LEVEL
    return {
        "models": [to_json(model) for model in models],
        "default": chosen.ref,
        "defaultThinkingLevel": clamp_thinking_level(chosen, wanted),
    }
