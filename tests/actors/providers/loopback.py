"""A scripted HTTP/1.1 server on 127.0.0.1 for provider tests (trio + h11, in-process).

It plays the LLM vendor: each request gets the next scripted :class:`Reply` (status, headers,
body written in small pieces, then an ending: a proper end, an abrupt close, a TCP reset, or
holding the connection open until the client goes away). Requests are recorded with the
monotonic time their first byte arrived, for the first-byte benchmark. Connections are kept
alive between replies, so tests can see the client's pool reuse them.
"""

from __future__ import annotations

import collections
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import h11
import orjson
import trio

from tests.loopback_tcp import serving

RECORDINGS = Path(__file__).parent / "recordings"

Ending = Literal["complete", "close", "reset", "hang"]


def recording(name: str) -> bytes:
    """The bytes of a recorded stream in ``recordings/``."""
    return (RECORDINGS / name).read_bytes()


@attrs.define
class Reply:
    """One scripted answer.

    ``chunk_size`` splits the body into writes of that many bytes (awkward places included:
    mid-line, mid-UTF-8). ``ending``: ``complete`` ends the body properly; ``close`` closes
    the socket without finishing the body; ``reset`` sends a TCP RST after the body;
    ``hang`` keeps the connection open until the client closes it (abort tests).
    """

    status: int = 200
    body: bytes = b""
    headers: list[tuple[str, str]] = attrs.field(
        factory=lambda: [("content-type", "text/event-stream")]
    )
    chunk_size: int | None = None
    ending: Ending = "complete"


def sse(body: bytes, **kwargs: Any) -> Reply:
    """A 200 event-stream reply."""
    return Reply(body=body, **kwargs)


def json_error(status: int, document: Any, headers: dict[str, str] | None = None) -> Reply:
    """An error reply with a JSON body (and extra headers such as ``retry-after``)."""
    return Reply(
        status=status,
        body=orjson.dumps(document),
        headers=[("content-type", "application/json"), *(headers or {}).items()],
    )


@attrs.define
class Received:
    """A request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    first_byte_at: float

    def json(self) -> Any:
        """The body as JSON."""
        return orjson.loads(self.body)


@attrs.define
class LoopbackServer:
    """The running server: script it with :meth:`push`, inspect :attr:`requests`."""

    port: int = 0
    replies: collections.deque[Reply] = attrs.field(factory=collections.deque)
    requests: list[Received] = attrs.field(factory=list)
    connections: int = 0
    client_gone: trio.Event = attrs.field(factory=trio.Event)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    def push(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in order."""
        self.replies.extend(replies)

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """Answer requests on one connection until it closes."""
        self.connections += 1
        connection = h11.Connection(h11.SERVER)
        try:
            while await self._one_exchange(stream, connection):
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _one_exchange(self, stream: trio.SocketStream, connection: h11.Connection) -> bool:
        request: h11.Request | None = None
        body = bytearray()
        first_byte_at = 0.0
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not first_byte_at:
                    first_byte_at = trio.current_time()
                if not data:
                    return False
                connection.receive_data(data)
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # ConnectionClosed, PAUSED
                return False
        assert request is not None
        self.requests.append(
            Received(
                method=request.method.decode(),
                path=request.target.decode(),
                headers={k.decode().lower(): v.decode() for k, v in request.headers},
                body=bytes(body),
                first_byte_at=first_byte_at,
            )
        )
        reply = (
            self.replies.popleft()
            if self.replies
            else Reply(
                status=500, body=b"no scripted reply", headers=[("content-type", "text/plain")]
            )
        )
        headers = list(reply.headers)
        chunked = reply.ending != "complete" or reply.chunk_size is not None
        if chunked:
            headers.append(("transfer-encoding", "chunked"))
        else:
            headers.append(("content-length", str(len(reply.body))))
        await stream.send_all(
            connection.send(h11.Response(status_code=reply.status, headers=headers))
        )
        size = reply.chunk_size or len(reply.body) or 1
        for offset in range(0, len(reply.body), size):
            data = connection.send(h11.Data(data=reply.body[offset : offset + size]))
            await stream.send_all(data)
        if reply.ending == "complete":
            await stream.send_all(connection.send(h11.EndOfMessage()))
            return True
        if reply.ending == "reset":
            # SO_LINGER with a zero timeout makes close() send a RST instead of a FIN.
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stream.socket.close()
            return False
        if reply.ending == "hang":
            while await stream.receive_some(65536):
                pass
            self.client_gone.set()
        return False


@asynccontextmanager
async def loopback_server() -> AsyncIterator[LoopbackServer]:
    """Run a :class:`LoopbackServer` on an ephemeral loopback port for the block's duration."""
    server = LoopbackServer()
    async with serving(server.serve_connection) as port:
        server.port = port
        yield server
