"""Where the router's configuration comes from (pitrio/actors/model_router/router_config.py):
the agent dir, the environment and the agent dir's settings.json."""

from __future__ import annotations

from pathlib import Path

import orjson

from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.router_config import RouterConfig


def test_from_environment(tmp_path: Path) -> None:
    env = {"PITRIO_AGENT_DIR": str(tmp_path), "PITRIO_CACHE_RETENTION": "long"}
    configured = RouterConfig.from_environment(env)
    assert configured.agent_dir == tmp_path
    assert configured.settings.cache_retention == "long"
    assert configured.env == env
    assert RouterConfig.from_environment({}).agent_dir == Path.home() / ".pitrio" / "agent"


def test_from_environment_reads_the_agent_settings(tmp_path: Path) -> None:
    """``retry.provider.*`` of the agent dir's settings.json reach the HTTP client (they
    were read by nothing before the fault suite's timeout cases)."""
    env = {"PITRIO_AGENT_DIR": str(tmp_path)}
    (tmp_path / "settings.json").write_bytes(
        orjson.dumps({"retry": {"provider": {"timeoutMs": 1500, "maxRetries": 2}}})
    )
    http = RouterConfig.from_environment(env).settings.http
    assert (http.read_timeout, http.max_retries) == (1.5, 2)
    explicit = ProviderSettings(http=HttpSettings(read_timeout=9.0))
    assert RouterConfig.from_environment(env, explicit).settings.http.read_timeout == 9.0
    (tmp_path / "settings.json").write_text("{not json")
    assert RouterConfig.from_environment(env).settings == ProviderSettings()


def test_diagnostics_and_only_known_retentions_come_from_the_environment(tmp_path: Path) -> None:
    env = {"PITRIO_AGENT_DIR": str(tmp_path), "PITRIO_PROVIDER_DIAGNOSTICS": "1"}
    settings = RouterConfig.from_environment(env).settings
    assert settings.diagnostics and settings.cache_retention == ProviderSettings().cache_retention
    env = {"PITRIO_AGENT_DIR": str(tmp_path), "PITRIO_PROVIDER_DIAGNOSTICS": "yes"}
    env["PITRIO_CACHE_RETENTION"] = "forever"
    assert RouterConfig.from_environment(env).settings == ProviderSettings()
    env["PITRIO_CACHE_RETENTION"] = "none"
    assert RouterConfig.from_environment(env).settings.cache_retention == "none"
