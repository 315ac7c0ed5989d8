"""pi's older ``websockets`` boolean reaches the model router as ``transport``, as pi 1.6.0's
settings migration reads it (the session's settings layer migrates it too, but the router
reads the agent dir's file itself)."""

from __future__ import annotations

from pathlib import Path

import orjson

from pitrio.actors.model_router.providers.base import provider_settings
from pitrio.sdk.models import RouterConfig


def test_websockets_is_read_as_transport() -> None:
    assert provider_settings({"websockets": True}).transport == "websocket"
    assert provider_settings({"websockets": False}).transport == "sse"
    # transport, where set, wins; anything but a boolean is not the legacy key.
    assert provider_settings({"websockets": True, "transport": "sse"}).transport == "sse"
    assert provider_settings({"websockets": "yes"}).transport == "auto"


def test_the_routers_agent_settings_migrate_it(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_bytes(orjson.dumps({"websockets": False}))
    config = RouterConfig.from_environment({"PITRIO_AGENT_DIR": str(tmp_path)})
    assert config.settings.transport == "sse"
