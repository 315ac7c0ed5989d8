"""The daemon's HTTP side: request heads, plain responses, and the hand-over to websockets.

One listener serves both: the head of each request is read and parsed here (pure
:func:`parse_head`); a websocket upgrade continues in trio-websocket on a
:class:`PrefixedStream` that gives it the bytes already read, anything else (the page,
``/healthz``, ``/metrics``) is answered here and the connection closed.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote, urlsplit

import attrs
import trio

MAX_HEAD = 16 * 1024
"""The most a request head may take (request line and headers)."""

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    426: "Upgrade Required",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}


class BadRequest(Exception):
    """The bytes are not an HTTP/1.1 request head we accept."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@attrs.frozen
class RequestHead:
    """A parsed request line and headers (names lower-cased, in order)."""

    method: str
    target: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]

    def header(self, name: str) -> str | None:
        """The first value of a header (case-insensitive), or ``None``."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key == wanted), None)

    def header_list(self, name: str) -> list[str]:
        """Every comma-separated value of every occurrence of a header."""
        wanted = name.lower()
        return [
            part.strip()
            for key, value in self.headers
            if key == wanted
            for part in value.split(",")
            if part.strip()
        ]

    def param(self, name: str) -> str | None:
        """A query parameter, or ``None``."""
        return next((value for key, value in self.query if key == name), None)

    @property
    def is_websocket(self) -> bool:
        """Whether the request asks to upgrade to a websocket."""
        return "websocket" in (v.lower() for v in self.header_list("upgrade"))


def head_end(data: bytes) -> int:
    """Where the head ends in ``data`` (index after the blank line), or -1."""
    end = data.find(b"\r\n\r\n")
    return -1 if end < 0 else end + 4


def parse_head(data: bytes) -> RequestHead:
    """Parse a request head (up to and including the blank line)."""
    try:
        text = data.decode("latin-1")
    except UnicodeDecodeError as exc:  # latin-1 decodes anything; kept for clarity
        raise BadRequest("undecodable request") from exc
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest("malformed request line")
    method, target, _version = parts
    if not target.startswith("/"):
        raise BadRequest("only origin-form request targets are served")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            break
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or " " in name:
            raise BadRequest("malformed header line")
        headers.append((name.lower(), value.strip()))
    split = urlsplit(target)
    return RequestHead(
        method=method,
        target=target,
        path=unquote(split.path),
        query=tuple(parse_qsl(split.query, keep_blank_values=True)),
        headers=tuple(headers),
    )


async def read_head(stream: trio.abc.ReceiveStream) -> tuple[bytes, bytes]:
    """Read until the end of a request head: (head, bytes received after it)."""
    data = b""
    while (end := head_end(data)) < 0:
        if len(data) > MAX_HEAD:
            raise BadRequest("request head too large", 431)
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise BadRequest("connection closed before the request head ended")
        data += chunk
    if end > MAX_HEAD:
        raise BadRequest("request head too large", 431)
    return data[:end], data[end:]


def response(
    status: int,
    body: bytes = b"",
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: tuple[tuple[str, str], ...] = (),
) -> bytes:
    """A complete HTTP/1.1 response that closes the connection."""
    lines = [
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
        "Connection: close",
        "Cache-Control: no-store",
        "X-Content-Type-Options: nosniff",
        *(f"{name}: {value}" for name, value in headers),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class PrefixedStream(trio.abc.Stream):
    """A stream that first yields bytes already read from it, then reads on."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self.stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._prefix:
            size = len(self._prefix) if max_bytes is None else max_bytes
            chunk, self._prefix = self._prefix[:size], self._prefix[size:]
            await trio.lowlevel.checkpoint()
            return chunk
        return await self.stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.stream.aclose()
