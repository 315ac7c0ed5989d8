"""The wire side of one HTTP/1.1 connection, for :mod:`.transport`: the connection's bytes,
a response's head, and its body framed by length, chunks or the connection's end.

Split from the transport (its pool and its exchanges) so each reads in one sitting; httpx's
exception classes are raised here too, with httpcore's texts where a caller could see them,
and httpx is imported only to raise one (:func:`httpx_module`).
"""

from __future__ import annotations

import select
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import ModuleType

import trio

from pitrio.actors.direct_io import DirectReader, write_all

MAX_HEAD = 64 * 1024
"""Longest response head accepted (status line and headers)."""
READ_SIZE = 256 * 1024
"""Most bytes taken from the socket by one read."""

Origin = tuple[str, str, int]
"""A connection's scheme, host and port: what the pool keys its connections by."""


def httpx_module() -> ModuleType:
    """httpx, imported when it is needed (an error to raise, the client's entry point)."""
    import httpx

    return httpx


class Connection:
    """One HTTP/1.1 connection: a byte stream and what was read past the last message.

    Over plain TCP the socket is read and written directly (:mod:`pitrio.actors.direct_io`),
    without the task step trio's stream layer spends after each operation that did not have
    to wait: about two a request (issue 7).
    """

    def __init__(self, origin: Origin, stream: trio.abc.Stream, fd: int) -> None:
        self.origin = origin
        self.stream = stream
        self.fd = fd
        self.plain = isinstance(stream, trio.SocketStream)
        self.buffer = bytearray()
        self.idle_since = 0.0
        self.closed = False
        # TLS reads through ``SSLStream`` (the socket's bytes are not the body's).
        self._reader = DirectReader(fd, READ_SIZE) if self.plain else None

    def alive_when_idle(self) -> bool:
        """An idle connection is usable if the server sent nothing meanwhile (no EOF)."""
        if self.closed or self.buffer:
            return False
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        try:
            return not poller.poll(0)  # readable: EOF or stray bytes, either way unusable
        except OSError:
            return False

    async def receive(self, read_timeout: float) -> bytes:
        """The next bytes from the server (``b""`` at its end), within ``read_timeout``."""
        try:
            if self._reader is not None:
                return await self._reader.read(trio.current_time() + read_timeout)
            with trio.fail_after(read_timeout):
                return bytes(await self.stream.receive_some(READ_SIZE))
        except trio.TooSlowError:
            raise httpx_module().ReadTimeout("timed out") from None
        except (trio.BrokenResourceError, OSError, ssl.SSLError) as exc:
            raise httpx_module().ReadError(str(exc) or type(exc).__name__) from exc

    async def fill(self, read_timeout: float) -> bool:
        """Read more into the buffer; ``False`` at EOF."""
        data = await self.receive(read_timeout)
        if not data:
            return False
        self.buffer += data
        return True

    async def send(self, parts: Sequence[bytes], write_timeout: float) -> None:
        """Write ``parts`` in order, within ``write_timeout`` seconds (httpx's exceptions)."""
        try:
            if self.plain:
                await write_all(self.fd, parts, trio.current_time() + write_timeout)
                return
            with trio.fail_after(write_timeout):
                for piece in parts:  # TLS: piece by piece, each encrypted on its own
                    await self.stream.send_all(piece)
        except trio.TooSlowError:
            raise httpx_module().WriteTimeout("timed out") from None
        except (trio.BrokenResourceError, OSError, ssl.SSLError) as exc:
            raise httpx_module().WriteError(str(exc) or type(exc).__name__) from exc

    async def close(self) -> None:
        """Close the stream (once), without waiting for the peer."""
        if not self.closed:
            self.closed = True
            await trio.aclose_forcefully(self.stream)


class Body:
    """A response body framed by length, chunks or the connection's end (an httpx
    ``AsyncByteStream`` by its methods; the transport shows it to httpx's client as one).
    Closing it gives the connection back through ``release``, reusable when the body was
    read to its end and the server keeps the connection alive."""

    def __init__(
        self,
        release: Release,
        connection: Connection,
        *,
        length: int | None,
        chunked: bool,
        reusable: bool,
        read_timeout: float,
    ) -> None:
        self._release = release
        self._connection = connection
        self._length = length
        self._chunked = chunked
        self._reusable = reusable
        self._read_timeout = read_timeout
        self._complete = length == 0 and not chunked
        self._released = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._complete:
            return
        if self._chunked:
            async for data in self._chunks():
                yield data
        elif self._length is not None:
            async for data in self._fixed(self._length):
                yield data
        else:
            async for data in self._until_close():
                yield data
        self._complete = True

    async def _fixed(self, length: int) -> AsyncIterator[bytes]:
        connection = self._connection
        left = length
        while left:
            if not connection.buffer and not await connection.fill(self._read_timeout):
                raise httpx_module().RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    f"received {length - left} bytes, expected {length}"
                )
            data = bytes(connection.buffer[:left])
            del connection.buffer[:left]
            left -= len(data)
            yield data

    async def _until_close(self) -> AsyncIterator[bytes]:
        connection = self._connection
        self._reusable = False
        while True:
            if connection.buffer:
                data = bytes(connection.buffer)
                connection.buffer.clear()
                yield data
            if not await connection.fill(self._read_timeout):
                return

    async def _line(self) -> bytes:
        connection = self._connection
        while True:
            end = connection.buffer.find(b"\r\n")
            if end >= 0:
                line = bytes(connection.buffer[:end])
                del connection.buffer[: end + 2]
                return line
            if len(connection.buffer) > MAX_HEAD:
                raise httpx_module().RemoteProtocolError("chunk header too long")
            if not await connection.fill(self._read_timeout):
                raise httpx_module().RemoteProtocolError(
                    "peer closed connection without sending complete message body: "
                    "incomplete chunked read"
                )

    async def _chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            header = await self._line()
            try:
                size = int(header.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx_module().RemoteProtocolError(
                    f"invalid chunk size {header[:40]!r}"
                ) from None
            if size == 0:
                while await self._line():  # trailers, up to the empty line
                    pass
                return
            left = size
            while left:
                if not connection.buffer and not await connection.fill(self._read_timeout):
                    raise httpx_module().RemoteProtocolError(
                        "peer closed connection without sending complete message body: "
                        "incomplete chunked read"
                    )
                data = bytes(connection.buffer[:left])
                del connection.buffer[:left]
                left -= len(data)
                yield data
            if await self._line():
                raise httpx_module().RemoteProtocolError("missing CRLF after a chunk")

    async def aclose(self) -> None:
        """Give the connection back (once)."""
        if self._released:
            return
        self._released = True
        await self._release(self._connection, self._complete and self._reusable)


Release = Callable[[Connection, bool], Awaitable[None]]
"""Gives a connection back to its pool: reusable or not."""


async def read_head(
    connection: Connection, read_timeout: float
) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    """The next final response's status, reason, headers and version, read from
    ``connection`` (informational ``1xx`` responses skipped); its body stays buffered."""
    while True:  # skip informational (1xx) responses
        while True:
            end = connection.buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(connection.buffer) > MAX_HEAD:
                raise httpx_module().RemoteProtocolError("response head too long")
            if not await connection.fill(read_timeout):
                raise httpx_module().RemoteProtocolError(
                    "Server disconnected without sending a response."
                )
        head = bytes(connection.buffer[:end])
        del connection.buffer[: end + 4]
        lines = head.split(b"\r\n")
        status_line = lines[0].split(b" ", 2)
        try:
            version = status_line[0]
            status = int(status_line[1])
        except (IndexError, ValueError):
            raise httpx_module().RemoteProtocolError(
                f"invalid status line {lines[0][:80]!r}"
            ) from None
        if not version.startswith(b"HTTP/1."):
            raise httpx_module().RemoteProtocolError(f"unsupported HTTP version {version[:20]!r}")
        reason = status_line[2] if len(status_line) > 2 else b""
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise httpx_module().RemoteProtocolError(f"invalid header line {line[:80]!r}")
            headers.append((name, value.strip()))
        if 100 <= status < 200 and status != 101:
            continue
        return status, reason, headers, version


class DirectResponse:
    """A response of :meth:`Http11Transport.stream`: status, headers (names lower-cased,
    repeated ones joined by ``", "``) and the body, decoded per ``Content-Encoding``."""

    def __init__(self, status: int, headers: list[tuple[bytes, bytes]], body: Body) -> None:
        self.status_code = status
        merged: dict[str, str] = {}
        for name, value in headers:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            merged[key] = f"{merged[key]}, {text}" if key in merged else text
        self.headers = merged
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives (gzip/deflate undone)."""
        encoding = self.headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("", "identity"):
            async for chunk in self._body:
                yield chunk
            return
        if encoding not in ("gzip", "deflate", "x-gzip"):
            raise httpx_module().DecodingError(f"unsupported content encoding {encoding!r}")
        decoder = zlib.decompressobj(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected
        try:
            async for chunk in self._body:
                data = decoder.decompress(chunk)
                if data:
                    yield data
            data = decoder.flush()
        except zlib.error as exc:
            raise httpx_module().DecodingError(str(exc)) from exc
        if data:
            yield data


__all__ = [
    "MAX_HEAD",
    "READ_SIZE",
    "Body",
    "Connection",
    "DirectResponse",
    "Origin",
    "Release",
    "httpx_module",
    "read_head",
]
