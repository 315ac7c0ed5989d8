"""The daemon's figures for OpenTelemetry's gauges (no OpenTelemetry imported here)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pitrio.transports.daemon.server import DaemonServer

Counts = tuple[Mapping[str, int], Mapping[str, int]]


def daemon_counts(server: DaemonServer) -> Callable[[], Awaitable[Counts]]:
    """Reads, in the daemon's trio loop, its sessions by status (the host's own count) and
    its open websocket connections by endpoint (the server's counters)."""

    async def counts() -> Counts:
        stats = await server.host.host_stats()
        connections = {
            "session": server.counters["session_connections"],
            "host": server.counters["host_connections"],
        }
        return dict(stats.sessions), connections

    return counts
