"""The host: the sessions of one daemon (``DESIGN.md`` §2 ``Host``).

Pure policies: :mod:`.policy` (session ids, restart intensity, idle eviction), :mod:`.replay`
(the replay buffer of resuming clients), :mod:`.feed` (one client's ordered outgoing queue).
File discovery: :mod:`.index`. What the shells share: :mod:`.context` (the host's config).
Shells: :mod:`.hosted` (one session's supervision and fan-out, its clients' attachments in
:mod:`.attached`, its activity in :mod:`.activity`, its notices in :mod:`.notices`) and
:mod:`.actor` (the registry).
"""

from pitrio.actors.host.actor import Host, HostHandle, info_row, start_host
from pitrio.actors.host.attached import AttachedClient
from pitrio.actors.host.commands import HostStats
from pitrio.actors.host.context import HostConfig, HostEvent, codec_frame
from pitrio.actors.host.feed import ClientFeed, FramedEvent, Outgoing
from pitrio.actors.host.hosted import (
    HostedSession,
    SessionClosedError,
    SessionFailedError,
    SessionStatus,
)
from pitrio.actors.host.policy import (
    EvictionPolicy,
    InvalidSessionIdError,
    RestartPolicy,
    idempotent_session_id,
    validate_session_id,
)
from pitrio.actors.host.replay import ReplayBuffer

__all__ = [
    "AttachedClient",
    "ClientFeed",
    "EvictionPolicy",
    "FramedEvent",
    "Host",
    "HostConfig",
    "HostEvent",
    "HostHandle",
    "HostStats",
    "HostedSession",
    "InvalidSessionIdError",
    "Outgoing",
    "ReplayBuffer",
    "RestartPolicy",
    "SessionClosedError",
    "SessionFailedError",
    "SessionStatus",
    "codec_frame",
    "idempotent_session_id",
    "info_row",
    "start_host",
    "validate_session_id",
]
