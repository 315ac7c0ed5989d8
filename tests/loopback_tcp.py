"""A TCP handler served on an ephemeral loopback port, for the tests' scripted servers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import trio

from tests.stray_cancel import no_stray_cancel

Handler = Callable[[trio.SocketStream], Awaitable[object]]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[int]:
    """Serve ``handler`` (one call per connection) on 127.0.0.1 for the block's duration;
    yields the port."""
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port: int = listeners[0].socket.getsockname()[1]
        await nursery.start(trio.serve_listeners, handler, listeners)
        try:
            with no_stray_cancel():
                yield port
        finally:
            nursery.cancel_scope.cancel()
