"""A loopback OAuth vendor for the tests: token, device-code and Copilot-token endpoints.

Written from the wire format the vendors document (RFC 6749 token replies, RFC 8628 device
flow, GitHub's Copilot token exchange). Each path has a queue of scripted replies; every request
is recorded (method, path, headers, body) for the test to check.
"""

from __future__ import annotations

import urllib.parse
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import h11
import orjson
import trio

from tests.loopback_tcp import serving


@attrs.define
class Recorded:
    """One request the vendor received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The body as JSON."""
        return orjson.loads(self.body)

    def form(self) -> dict[str, str]:
        """The body as a url-encoded form."""
        return dict(urllib.parse.parse_qsl(self.body.decode()))


@attrs.define
class OAuthVendor:
    """Scripted replies per path; ``requests`` holds what arrived, in order."""

    replies: dict[str, deque[tuple[int, Any]]] = attrs.field(factory=dict)
    requests: list[Recorded] = attrs.field(factory=list)
    arrived: trio.Event = attrs.field(factory=trio.Event)
    hold: trio.Event | None = None
    """When set, replies wait for it (a test holds a refresh in flight)."""

    def script(self, path: str, status: int, body: Any) -> None:
        """Queue one reply for ``path``."""
        self.replies.setdefault(path, deque()).append((status, body))

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one connection (one request at a time, keep-alive)."""
        connection = h11.Connection(h11.SERVER)
        while True:
            request: h11.Request | None = None
            body = b""
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    connection.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += bytes(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    return
            assert request is not None
            path = request.target.decode().split("?", 1)[0]
            headers = {k.decode().lower(): v.decode() for k, v in request.headers}
            self.requests.append(Recorded(request.method.decode(), path, headers, body))
            self.arrived.set()
            if self.hold is not None:
                await self.hold.wait()
            queue = self.replies.get(path)
            status, payload = queue.popleft() if queue else (404, {"error": "not_found"})
            data = payload if isinstance(payload, bytes) else orjson.dumps(payload)
            reply = h11.Response(
                status_code=status,
                headers=[("content-type", "application/json"), ("content-length", str(len(data)))],
            )
            await stream.send_all(connection.send(reply) or b"")
            await stream.send_all(connection.send(h11.Data(data=data)) or b"")
            await stream.send_all(connection.send(h11.EndOfMessage()) or b"")
            if connection.our_state is h11.MUST_CLOSE:
                return
            connection.start_next_cycle()


@asynccontextmanager
async def oauth_vendor() -> AsyncIterator[tuple[OAuthVendor, str]]:
    """A running vendor and its base URL (``http://127.0.0.1:<port>``)."""
    vendor = OAuthVendor()
    async with serving(vendor.handle) as port:
        yield vendor, f"http://127.0.0.1:{port}"
