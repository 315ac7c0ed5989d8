"""What the host and its hosted sessions share: the host's configuration and context.

Both shells read these, so they live below both: :mod:`.hosted` (one session) and :mod:`.actor`
(the registry) import this module and never each other's way round (issue 22: no import
circles).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from pitrio.actors.host.backend import SessionBackend
from pitrio.actors.host.policy import EvictionPolicy, RestartPolicy
from pitrio.actors.model_router import ModelRouterHandle
from pitrio.messages.codec import to_json
from pitrio.messages.events import AgentSessionEvent

HostEvent = dict[str, Any]

FrameEncoder = Callable[[int, AgentSessionEvent], bytes]
"""Encodes one event with its seq as the frame clients get (kept by the replay buffer)."""


def codec_frame(seq: int, event: AgentSessionEvent) -> bytes:
    """The default frame: the event's JSON (pi's shape) with ``seq`` added last."""
    return orjson.dumps({**to_json(event), "seq": seq})


@attrs.frozen(kw_only=True)
class HostConfig:
    """How the host keeps sessions."""

    agent_dir: Path
    session_dir: str | None = None
    """One flat directory for every session file (``--session-dir``); default: per cwd."""
    default_cwd: str | None = None
    default_model: str | None = None
    eviction: EvictionPolicy = attrs.field(factory=EvictionPolicy)
    restart: RestartPolicy = attrs.field(factory=RestartPolicy)
    replay_frames: int = 4096
    replay_bytes: int = 4 << 20
    encode_frame: FrameEncoder = codec_frame
    host_event_capacity: int = 1024
    store: SessionBackend | None = None
    """A store shared by several daemons (PostgreSQL) instead of session files."""


@attrs.define
class HostContext:
    """What hosted sessions share with their host."""

    config: HostConfig
    router: ModelRouterHandle
    nursery: trio.Nursery
    emit: Callable[[HostEvent], None]
    shutting_down: bool = False
    restarts_total: int = 0
