"""In-process MCP servers for scenarios: served over memory streams instead of a process.

While a schedule runs, :func:`serving` puts :func:`_open` in place of the MCP actor's
``open_transport``: a configured server whose command is :data:`IN_PROCESS` is the scenario's
factory's server, run in a task of the session; any other goes to the real transport. Its
``die`` ends it as a crashed process ends: the server stops and its side of the connection
closes, so a call in flight meets the end of the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import trio

IN_PROCESS = "pitrio-explore-in-process"
"""The ``command`` of an ``mcp.json`` entry served in process (its first argument: the name)."""

Factory = Callable[[Callable[[], Awaitable[None]]], Any]


def config_entries(names: Mapping[str, Factory]) -> dict[str, Any]:
    """The ``mcpServers`` entries of the scenario's servers."""
    return {name: {"command": IN_PROCESS, "args": [name]} for name in names}


@contextmanager
def serving(factories: Mapping[str, Factory]) -> Iterator[None]:
    """Inside the block, MCP servers configured with :data:`IN_PROCESS` are served in process."""
    from pitrio.actors.mcp import actor

    real = actor.open_transport

    @asynccontextmanager
    async def opened(config: Any, cwd: str, errlog: Any, auth: Any = None) -> AsyncIterator[Any]:
        if config.transport != "stdio" or config.command != IN_PROCESS:
            async with real(config, cwd, errlog, auth) as streams:
                yield streams
            return
        async with _served(factories[config.args[0]]) as streams:
            yield streams

    actor.open_transport = opened
    try:
        yield
    finally:
        actor.open_transport = real


@asynccontextmanager
async def _served(factory: Factory) -> AsyncIterator[Any]:
    from mcp.shared.memory import create_client_server_memory_streams

    async with create_client_server_memory_streams() as (client, (read, write)):
        scope = trio.CancelScope()

        async def die() -> None:
            scope.cancel()
            await write.aclose()  # the client reads the end of the stream, as from a dead pipe

        server = factory(die)
        lowlevel = server._lowlevel_server
        async with trio.open_nursery() as nursery:

            async def serve() -> None:
                with scope:
                    await lowlevel.run(read, write, lowlevel.create_initialization_options())

            nursery.start_soon(serve)
            try:
                yield client
            finally:
                nursery.cancel_scope.cancel()
