"""Where the model router's models, credentials and provider settings come from.

:class:`RouterConfig` names the agent dir (``models.json``, ``auth.json``, ``settings.json``),
the environment keys are looked up in and the provider settings;
:meth:`RouterConfig.from_environment` reads the process's. Pure but for reading
``settings.json``; the router (:mod:`.actor`) builds itself from one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import attrs
import orjson

from pitrio.actors.model_router.providers.base import (
    CacheRetention,
    ProviderSettings,
    provider_settings,
)
from pitrio.actors.session_store.paths import agent_dir

MODELS_FILE_NAME = "models.json"
SETTINGS_FILE_NAME = "settings.json"
CACHE_RETENTION_ENV = "PITRIO_CACHE_RETENTION"
DIAGNOSTICS_ENV = "PITRIO_PROVIDER_DIAGNOSTICS"
"""``1`` asks for a ``diagnostics`` entry on failed responses (pi's messages have none)."""
CACHE_RETENTIONS: tuple[CacheRetention, ...] = ("none", "short", "long")


@attrs.frozen(kw_only=True)
class RouterConfig:
    """Where the router's models and credentials come from.

    ``agent_dir`` holds ``models.json`` and ``auth.json`` (``None``: neither is read);
    ``env`` is the environment keys are looked up in; ``catalogue`` adds the built-in models.
    """

    agent_dir: Path | None = None
    env: Mapping[str, str] = attrs.field(factory=dict)
    catalogue: bool = True
    settings: ProviderSettings = attrs.field(factory=ProviderSettings)

    @classmethod
    def from_environment(
        cls, env: Mapping[str, str] | None = None, settings: ProviderSettings | None = None
    ) -> RouterConfig:
        """The process's configuration: ``$PITRIO_AGENT_DIR`` (or ``~/.pitrio/agent``), its env.

        Without ``settings``, the agent dir's ``settings.json`` gives them
        (``retry.provider.timeoutMs`` / ``maxRetries`` / ``maxRetryDelayMs``,
        ``thinkingBudgets``: :func:`provider_settings`). ``$PITRIO_CACHE_RETENTION``
        (``none``/``short``/``long``) sets prompt caching, like pi's ``PI_CACHE_RETENTION``;
        ``$PITRIO_PROVIDER_DIAGNOSTICS=1`` puts status, retry-after and the failure's class on
        failed messages as ``diagnostics`` (off: pi's messages carry none).
        """
        env = dict(os.environ) if env is None else dict(env)
        directory = agent_dir(env)
        settings = settings or _agent_provider_settings(directory)
        retention = env.get(CACHE_RETENTION_ENV)
        for choice in CACHE_RETENTIONS:
            if retention == choice:
                settings = attrs.evolve(settings, cache_retention=choice)
        if env.get(DIAGNOSTICS_ENV) == "1":
            settings = attrs.evolve(settings, diagnostics=True)
        return cls(agent_dir=directory, env=env, settings=settings)


def _agent_provider_settings(directory: Path) -> ProviderSettings:
    """The provider settings of ``<agent dir>/settings.json``.

    The router serves the whole process, so a project's settings cannot apply to it; a file
    that is missing or does not parse gives the defaults (the session's settings loader
    reports the problem to the user).
    """
    try:
        document = orjson.loads((directory / SETTINGS_FILE_NAME).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return ProviderSettings()
    return provider_settings(document) if isinstance(document, dict) else ProviderSettings()
