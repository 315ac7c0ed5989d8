"""The shared mock LLM (``../shared/tools/mock_llm.py``) as a real subprocess, behind a TCP
proxy in this process that can reset the client's connections.

The mock cannot misbehave at the TCP level itself; the proxy forwards bytes both ways and, on
:meth:`ResettingProxy.reset`, closes every client connection with a RST (``SO_LINGER`` 0). The
test decides when, from what the session has received: explicit synchronisation.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from tests.loopback_tcp import serving
from tests.shared_dir import TOOLS

MOCK_LLM = TOOLS / "mock_llm.py"


@asynccontextmanager
async def mock_llm(script: dict[str, Any], work: Path) -> AsyncIterator[int]:
    """Run the mock on an ephemeral loopback port with ``script`` (its config keys); yields
    the port once it listens."""
    script_file = work / "mock-script.json"
    script_file.write_bytes(orjson.dumps(script))
    process = await trio.lowlevel.open_process(
        [sys.executable, str(MOCK_LLM), "--port", "0", "--script", str(script_file)],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = b""
        with trio.fail_after(10):
            while not line.endswith(b"\n"):  # "mock_llm listening on http://127.0.0.1:N/v1"
                data = await process.stdout.receive_some(256)
                if not data:
                    raise RuntimeError(f"mock_llm exited: {line!r}")
                line += data
        yield int(line.rsplit(b":", 1)[1].split(b"/")[0])
    finally:
        process.kill()  # its handler threads may be sleeping in a slow response
        with trio.CancelScope(shield=True):
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


@attrs.define
class ResettingProxy:
    """Forwards loopback connections to ``upstream``; :meth:`reset` kills the client ends."""

    upstream: int
    port: int = 0
    clients: list[trio.SocketStream] = attrs.field(factory=list)
    connections: int = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def handle(self, client: trio.SocketStream) -> None:
        self.connections += 1
        self.clients.append(client)
        upstream = await trio.open_tcp_stream("127.0.0.1", self.upstream)
        try:
            async with upstream, trio.open_nursery() as nursery:
                nursery.start_soon(self._pump, client, upstream, nursery.cancel_scope)
                nursery.start_soon(self._pump, upstream, client, nursery.cancel_scope)
        finally:
            self.clients.remove(client)
            await trio.aclose_forcefully(client)

    async def _pump(
        self, source: trio.SocketStream, target: trio.SocketStream, scope: trio.CancelScope
    ) -> None:
        try:
            while data := await source.receive_some(65536):
                await target.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        scope.cancel()

    def reset(self) -> int:
        """Send a RST on every open client connection; how many there were."""
        count = 0
        for client in self.clients:
            client.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.socket.close()
            count += 1
        return count


@asynccontextmanager
async def resetting_proxy(upstream: int) -> AsyncIterator[ResettingProxy]:
    proxy = ResettingProxy(upstream)
    async with serving(proxy.handle) as port:
        proxy.port = port
        yield proxy
