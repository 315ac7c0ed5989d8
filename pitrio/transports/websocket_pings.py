"""trio-websocket's connections answer a ping only while they are open.

trio-websocket 0.12 answers every ping its reader meets, also once its own close frame has
gone out; wsproto then refuses the pong (``LocalProtocolError``: no frame after a close frame,
RFC 6455 §5.5.1) and the error ends the connection's reader. A client of the daemon that
closes while the daemon pings (every 20 s, every 0.3 s in the half-open tests) meets it: its
close fails, and the cancellation of the connection's nursery escapes ``open_websocket`` as a
stray ``trio.Cancelled`` that the caller's first cancelled scope swallows (found as the flaky
runs of ``test_peer_gone_mid_stream_without_a_close_frame``: the test's block ended silently
half-way). Upstream issue 184 (python-trio/trio-websocket), fix proposed but not released.

The daemon's own connection has the rule in
:class:`~pitrio.transports.daemon.websocket.DaemonWebSocket`; the clients (``pitrio attach``,
the ACP bridge's daemon backend, the tests' clients) are trio-websocket's own class, made
inside ``open_websocket_url``, so the rule is set on that class, once.
"""

from __future__ import annotations

from typing import Any

from trio_websocket import WebSocketConnection
from wsproto.connection import ConnectionState
from wsproto.events import Ping

_MENDED = "_pitrio_open_only"


def answer_pings_only_while_open() -> None:
    """From now on every trio-websocket connection of this process leaves unanswered a ping
    that arrives after its close frame went out (idempotent)."""
    library: Any = WebSocketConnection
    answer = getattr(library, "_handle_ping_event", None)
    if answer is None or getattr(answer, _MENDED, False):
        return  # mended already, or a release that no longer has the method (nothing to mend)

    async def answer_while_open(self: WebSocketConnection, event: Ping) -> None:
        # No await between the check and wsproto's send: the state cannot change between.
        if self._wsproto.state is ConnectionState.OPEN:
            await answer(self, event)

    setattr(answer_while_open, _MENDED, True)
    answer_while_open.__wrapped__ = answer  # type: ignore[attr-defined]  # the library's own
    library._handle_ping_event = answer_while_open
