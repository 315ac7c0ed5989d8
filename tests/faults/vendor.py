"""A misbehaving OpenAI-compatible vendor on 127.0.0.1 (trio + h11, in the test's process).

Each request to ``/v1/chat/completions`` gets the next scripted :class:`Act`: a status line and
headers (or none at all: ``silent``), body parts written one by one with optional pauses
between them (``trio.sleep``, so a :class:`trio.testing.MockClock` drives them) or waits for
the test to say go (a ``trio.Event``: explicit synchronisation, no timing guesses), then an
ending: ``complete`` (a proper end), ``reset`` (a TCP RST), ``stall`` (keep the connection
open, send nothing more, until the client goes away). Every request is recorded with the time
it arrived and, for ``silent``/``stall``, the time the client gave up, both on trio's clock.

Being in-process matters for the timeout cases: under an autojumping ``MockClock`` the clock
only jumps when every task is blocked, and a server that is a trio task of the same run is
either runnable or deliberately silent, never "slow" in a way the clock could mistake for a
hang.
"""

from __future__ import annotations

import collections
import socket
import struct
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs
import h11
import orjson
import trio

from tests.loopback_tcp import serving

Ending = Literal["complete", "reset", "stall", "silent"]

MODEL_ID = "m1"


@attrs.define
class Act:
    """One scripted answer: ``parts`` are bytes to send, seconds to pause before the next, or an
    event to wait for."""

    status: int = 200
    headers: list[tuple[str, str]] = attrs.field(
        factory=lambda: [("content-type", "text/event-stream")]
    )
    parts: list[bytes | float | trio.Event] = attrs.field(factory=list)
    ending: Ending = "complete"


@attrs.define
class Request:
    """A request as the vendor saw it, with trio-clock times."""

    body: Any
    arrived_at: float
    gone_at: float | None = None
    gone: trio.Event = attrs.field(factory=trio.Event)

    def user_texts(self) -> list[str]:
        """The text of every user message sent (a string, or the text parts joined: pi's
        form for content given as blocks)."""
        return [_text(m["content"]) for m in self.body["messages"] if m["role"] == "user"]

    def assistant_texts(self) -> list[str]:
        """The text of every assistant message sent back to the vendor."""
        return [m.get("content") or "" for m in self.body["messages"] if m["role"] == "assistant"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part.get("type") == "text")


# -- SSE bodies --------------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One ``chat.completion.chunk`` event."""
    document = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": 1736200000,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(document) + b"\n\n"


def usage_chunk(prompt: int = 10, completion: int = 5) -> bytes:
    """The usage event OpenAI sends last when ``stream_options.include_usage`` is set."""
    document = {
        "id": "chatcmpl-fault",
        "object": "chat.completion.chunk",
        "created": 1736200000,
        "model": MODEL_ID,
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }
    return b"data: " + orjson.dumps(document) + b"\n\n"


DONE = b"data: [DONE]\n\n"


def text_parts(*pieces: str) -> list[bytes | float | trio.Event]:
    """The opening chunk and one content chunk per piece (no ending)."""
    return [chunk({"role": "assistant", "content": ""}), *(chunk({"content": p}) for p in pieces)]


def text_tail() -> list[bytes | float | trio.Event]:
    """What ends a text answer properly: finish reason, usage, ``[DONE]``."""
    return [chunk({}, "stop"), usage_chunk(), DONE]


def answer(text: str, pieces: int = 3) -> Act:
    """A well-formed streamed answer of ``text`` in ``pieces`` content chunks."""
    size = max(1, -(-len(text) // pieces))
    split = [text[i : i + size] for i in range(0, len(text), size)]
    return Act(parts=[*text_parts(*split), *text_tail()])


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_fault_1") -> Act:
    """A streamed answer that calls one tool."""
    return Act(
        parts=[
            chunk({"role": "assistant", "content": ""}),
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": name,
                                "arguments": orjson.dumps(arguments).decode(),
                            },
                        }
                    ]
                }
            ),
            chunk({}, "tool_calls"),
            usage_chunk(),
            DONE,
        ]
    )


def http_error(status: int, document: Any, headers: Sequence[tuple[str, str]] = ()) -> Act:
    """A JSON error answer (with extra headers such as ``retry-after``)."""
    return Act(
        status=status,
        headers=[("content-type", "application/json"), *headers],
        parts=[orjson.dumps(document)],
    )


# -- the server --------------------------------------------------------------------------------


@attrs.define
class Vendor:
    """The running vendor: script it with :meth:`push`, inspect :attr:`requests`."""

    port: int = 0
    acts: collections.deque[Act] = attrs.field(factory=collections.deque)
    requests: list[Request] = attrs.field(factory=list)
    _arrivals: trio.Event = attrs.field(factory=trio.Event)

    @property
    def base_url(self) -> str:
        """What ``models.json`` calls the provider's ``baseUrl``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *acts: Act) -> None:
        """Queue answers for the next requests, in order."""
        self.acts.extend(acts)

    async def wait_requests(self, count: int) -> list[Request]:
        """Wait until ``count`` requests have arrived (explicit synchronisation)."""
        while len(self.requests) < count:
            await self._arrivals.wait()
        return self.requests

    async def serve_connection(self, stream: trio.SocketStream) -> None:
        """Answer requests on one connection until it closes."""
        connection = h11.Connection(h11.SERVER)
        try:
            while await self._one_exchange(stream, connection):
                connection.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, stream: trio.SocketStream, connection: h11.Connection
    ) -> bytes | None:
        body = bytearray()
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await stream.receive_some(65536)
                if not data:
                    return None
                connection.receive_data(data)
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                return bytes(body)
            elif not isinstance(event, h11.Request):
                return None  # ConnectionClosed, PAUSED

    async def _one_exchange(self, stream: trio.SocketStream, connection: h11.Connection) -> bool:
        body = await self._read_request(stream, connection)
        if body is None:
            return False
        request = Request(body=orjson.loads(body), arrived_at=trio.current_time())
        self.requests.append(request)
        self._arrivals.set()
        self._arrivals = trio.Event()
        act = self.acts.popleft() if self.acts else http_error(500, {"error": "no scripted act"})
        if act.ending == "silent":
            await self._until_gone(stream, request)
            return False
        chunked = act.ending != "complete"
        headers = [*act.headers]
        if chunked:
            headers.append(("transfer-encoding", "chunked"))
        else:
            size = sum(len(p) for p in act.parts if isinstance(p, bytes))
            headers.append(("content-length", str(size)))
        await stream.send_all(
            connection.send(h11.Response(status_code=act.status, headers=headers))
        )
        for part in act.parts:
            if isinstance(part, bytes):
                await stream.send_all(connection.send(h11.Data(data=part)))
            elif isinstance(part, trio.Event):
                await part.wait()
            else:
                await trio.sleep(part)
        if act.ending == "complete":
            await stream.send_all(connection.send(h11.EndOfMessage()))
            return True
        if act.ending == "reset":
            # SO_LINGER with a zero timeout makes close() send a RST instead of a FIN.
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stream.socket.close()
            return False
        await self._until_gone(stream, request)  # stall
        return False

    async def _until_gone(self, stream: trio.SocketStream, request: Request) -> None:
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
        request.gone_at = trio.current_time()
        request.gone.set()


@asynccontextmanager
async def running_vendor() -> AsyncIterator[Vendor]:
    """Run a :class:`Vendor` on an ephemeral loopback port for the block's duration."""
    vendor = Vendor()
    async with serving(vendor.serve_connection) as port:
        vendor.port = port
        yield vendor
