"""What the websocket endpoints see of the daemon: its configuration and its shared state.

:class:`DaemonContext` is the part of ``DaemonServer`` that :mod:`.sockets` uses, named here
so that the endpoints need not import the server that imports them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable
from typing import Any, Protocol

import attrs
import trio

from pitrio.sdk.host import HostHandle
from pitrio.sdk.models import ModelRouterHandle


@attrs.frozen(kw_only=True)
class DaemonConfig:
    """How the daemon listens and what it allows."""

    host: str = "127.0.0.1"
    port: int = 8321
    token: str | None = None
    """``None``: no authentication (refused unless ``host`` is a loopback address)."""
    allowed_origins: tuple[str, ...] = ()
    max_message_size: int = 16 << 20
    """Largest incoming message (bytes); a larger one closes the connection with 1009."""
    message_rate: float = 50.0
    message_burst: int = 200
    client_capacity: int = 512
    stall_seconds: float = 15.0
    close_timeout: float = 5.0
    ping_interval: float | None = 20.0
    """Seconds between pings to each client (``None``: none). A peer gone without closing (a
    half-open connection) is otherwise noticed only once a send to it stalls."""
    ping_timeout: float = 20.0
    """A ping unanswered this long closes the connection (1011)."""
    handshake_timeout: float = 10.0
    max_inflight: int = 64
    host_queue: int = 1024
    send_buffer: int | None = None
    """``SO_SNDBUF`` of accepted sockets (``None``: the kernel's default and autotuning)."""
    send_batch: int = 64
    """Most frames written to a session client's socket in one write: what is queued when the
    sender wakes goes out together (the same bytes on the wire, one system call instead of
    one per frame). 1: one write per frame. A client whose queue is empty is written each
    event by the relay at once (``AttachedClient.direct``), one write per event."""


class DaemonContext(Protocol):
    """The daemon as its connections use it (``DaemonServer`` is one)."""

    config: DaemonConfig
    host: HostHandle
    router: ModelRouterHandle
    closing: trio.Event
    """Set when the daemon starts shutting down."""
    counters: Counter[str]
    """The daemon's event counters (``/metrics``)."""

    def spawn(self, work: Awaitable[Any]) -> None:
        """Run ``work`` in the connections' nursery (fire and forget)."""
        ...

    async def session_made(self, session_id: str) -> None:
        """A client's command (``new_session``, ``fork``, ``clone``) made ``session_id``;
        called before the command is answered, so that the client's next connection to it
        finds it (a worker of ``--workers`` claims it from the acceptor)."""
        ...
