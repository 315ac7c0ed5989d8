"""The host actor's inbox: one message class per command, and its counters.

Each command carries the :class:`~pitrio.actors._actor.Reply` its answer goes to;
:class:`~pitrio.actors.host.actor.HostHandle` builds them.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.host.context import HostEvent
from pitrio.actors.host.hosted import HostedSession
from pitrio.actors.session.trust_gate import TrustAsker


@attrs.frozen(kw_only=True)
class HostStats:
    """Counters for ``/metrics``."""

    sessions: dict[str, int]
    running: int
    queued: int
    clients: int
    events_total: int
    coalesced_total: int
    dropped_clients_total: int
    restarts_total: int
    replay_bytes: int
    evictions_total: int
    host_subscribers: int
    store_metrics: tuple[tuple[str, str, str, float], ...] = ()
    """``(name, kind, help, value)`` of the shared store (pool, leases), if there is one."""


@attrs.frozen
class Create:
    """Start a new session (in ``cwd``, with a model, thinking level and name)."""

    cwd: str | None
    model: str | None
    thinking_level: str | None
    name: str | None
    reply: Reply[HostedSession]
    trust_asker: TrustAsker | None = None
    session_id: str | None = None
    """The id to give it (an idempotent create's); one already registered is answered."""


@attrs.frozen
class Get:
    """The session of an id, registered or found on disk (loaded lazily)."""

    session_id: str
    reply: Reply[HostedSession]


@attrs.frozen
class ListSessions:
    """Every session the host knows, as pi's ``SessionInfo`` rows plus the live state."""

    reply: Reply[list[dict[str, Any]]]


@attrs.frozen
class Close:
    """Stop a session (and with ``delete``, remove its file)."""

    session_id: str
    delete: bool
    reply: Reply[None]


@attrs.frozen
class Rename:
    """Give a session its display name; answers the name as stored."""

    session_id: str
    name: str
    reply: Reply[str]


@attrs.frozen
class Models:
    """The models a session in ``cwd`` could use (the create dialog's choices)."""

    cwd: str | None
    reply: Reply[dict[str, Any]]


@attrs.frozen
class Branch:
    """Fork a session before a user message, or clone its current branch."""

    source: HostedSession
    entry_id: str | None
    """A user message to fork before; ``None``: clone the current branch."""
    reply: Reply[tuple[HostedSession, str | None]]
    session_id: str | None = None
    """The new session's id (a client command's, made from its id): one that exists already
    is answered instead of a second copy."""


@attrs.frozen
class SubscribeHost:
    """A channel of host events (sessions created, opened, closed, ...)."""

    reply: Reply[trio.MemoryReceiveChannel[HostEvent]]


@attrs.frozen
class Stats:
    """The host's counters (:class:`HostStats`)."""

    reply: Reply[HostStats]


@attrs.frozen
class Shutdown:
    """Stop every session and the host."""

    reply: Reply[None]


HostCommand = (
    Create
    | Get
    | ListSessions
    | Close
    | Rename
    | Models
    | Branch
    | SubscribeHost
    | Stats
    | Shutdown
)
