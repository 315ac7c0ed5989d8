"""The daemon's host as its transports drive it: handle, config, policies, hosted sessions.

``pitrio serve`` starts the host (:func:`start_host` with a :class:`HostConfig`); connections
look sessions up through :class:`HostHandle` and attach to a :class:`HostedSession` as an
:class:`AttachedClient` that drains :class:`Outgoing` frames.
"""

from __future__ import annotations

from pitrio.actors.host import (
    AttachedClient,
    EvictionPolicy,
    FramedEvent,
    HostConfig,
    HostedSession,
    HostHandle,
    InvalidSessionIdError,
    Outgoing,
    idempotent_session_id,
    start_host,
    validate_session_id,
)
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError

__all__ = [
    "AttachedClient",
    "EvictionPolicy",
    "FramedEvent",
    "HostConfig",
    "HostHandle",
    "HostedSession",
    "InvalidSessionIdError",
    "Outgoing",
    "SessionOwnedElsewhereError",
    "idempotent_session_id",
    "start_host",
    "validate_session_id",
]
