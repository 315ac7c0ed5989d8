"""The lean HTTP/1.1 transport under httpx: framing, keep-alive, stale connections, limits."""

from __future__ import annotations

import shutil
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
import trio

from pitrio.actors.model_router.providers.http11_wire import Connection
from pitrio.actors.model_router.providers.transport import (
    Http11Transport,
    Timeouts,
    _request_target,
)
from tests.actors.test_direct_io import counting_steps
from tests.loopback_tcp import serving

Responder = Callable[[int], bytes]


@asynccontextmanager
async def raw_server(
    respond: Responder,
    *,
    close_after: bool = False,
    bodies: list[bytes] | None = None,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering each request (the n-th, counted per server) with ``respond(n)``
    bytes; ``close_after`` closes the connection after every answer; ``bodies`` collects the
    request bodies; ``tls`` (a server context) serves ``https://localhost``. Yields the base
    URL and a list whose length is the number of connections accepted."""
    accepted: list[int] = []
    count = 0

    async def serve(tcp: trio.SocketStream) -> None:
        nonlocal count
        accepted.append(1)
        stream: trio.abc.Stream = tcp
        if tls is not None:
            stream = trio.SSLStream(tcp, tls, server_side=True)
        buffer = b""
        try:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += await stream.receive_some(65536)
                if bodies is not None:
                    bodies.append(buffer[:length])
                buffer = buffer[length:]
                count += 1
                await stream.send_all(respond(count))
                if close_after:
                    return
        except trio.BrokenResourceError:
            pass
        finally:
            await trio.aclose_forcefully(stream)

    async with serving(serve) as port:
        yield (f"https://localhost:{port}" if tls else f"http://127.0.0.1:{port}"), accepted


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(trust_env=False, transport=Http11Transport())


async def fetch(http: httpx.AsyncClient, url: str) -> tuple[int, bytes]:
    async with http.stream("POST", url + "/v1/x", content=b'{"a":1}') as response:
        return response.status_code, b"".join([chunk async for chunk in response.aiter_raw()])


async def test_framings_and_keep_alive() -> None:
    answers = {
        1: b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        2: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\n"
        b"Trailer: t\r\n\r\n",
        3: b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        4: b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
    }
    async with raw_server(lambda n: answers[n]) as (url, accepted), client() as http:
        assert await fetch(http, url) == (200, b"hello")
        assert await fetch(http, url) == (200, b"abcde")
        assert await fetch(http, url) == (204, b"")
        assert await fetch(http, url) == (404, b"")
        assert len(accepted) == 1  # one connection, kept alive


async def test_small_and_large_bodies_arrive_whole_on_one_connection() -> None:
    # A large body is written after the head instead of joined to it; both kinds, in turn,
    # reach the server byte for byte over the same kept-alive connection.
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    sent = [b'{"a":1}', bytes(range(256)) * 8192, b"[]", b"x" * (256 * 1024 + 1)]
    received: list[bytes] = []
    async with raw_server(lambda n: answer, bodies=received) as (url, accepted), client() as http:
        for body in sent:
            async with http.stream("POST", url + "/v1/x", content=body) as response:
                assert response.status_code == 200
                assert b"".join([chunk async for chunk in response.aiter_raw()]) == b"ok"
        assert len(accepted) == 1
    assert received == sent


async def test_body_until_close_and_connection_close_are_not_reused() -> None:
    answers = {
        1: b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
        2: b"HTTP/1.0 200 OK\r\n\r\nuntil the end",
    }
    async with (
        raw_server(lambda n: answers[n], close_after=True) as (url, accepted),
        client() as http,
    ):
        assert await fetch(http, url) == (200, b"ok")
        assert await fetch(http, url) == (200, b"until the end")
        assert len(accepted) == 2


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    async with (
        raw_server(lambda n: answer, close_after=True) as (url, accepted),
        client() as http,
    ):
        for _ in range(3):
            assert await fetch(http, url) == (200, b"ok")
            await trio.sleep(0.01)  # the server's FIN arrives while the connection is idle
        assert len(accepted) == 3


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabc",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
async def test_truncated_or_malformed_bodies_raise_transport_errors(answer: bytes) -> None:
    async with (
        raw_server(lambda n: answer, close_after=True) as (url, _),
        client() as http,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await fetch(http, url)


async def test_no_response_and_garbage_heads() -> None:
    async with raw_server(lambda n: b"", close_after=True) as (url, _), client() as http:
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await fetch(http, url)
    async with (
        raw_server(lambda n: b"SPDY/9 200 OK\r\n\r\n", close_after=True) as (url, _),
        client() as http,
    ):
        with pytest.raises(httpx.RemoteProtocolError):
            await fetch(http, url)


async def test_read_timeout_and_pool_limit() -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    async with serving(silent) as port:
        url = f"http://127.0.0.1:{port}"
        quick = httpx.Timeout(5.0, read=0.05)
        async with httpx.AsyncClient(
            trust_env=False, transport=Http11Transport(), timeout=quick
        ) as http:
            with pytest.raises(httpx.ReadTimeout):
                await fetch(http, url)
        transport = Http11Transport(max_connections=1)
        limited = httpx.Timeout(5.0, pool=0.05)
        async with httpx.AsyncClient(trust_env=False, transport=transport, timeout=limited) as http:
            async with trio.open_nursery() as inner:
                inner.start_soon(fetch, http, url)  # holds the only connection
                await trio.testing.wait_all_tasks_blocked()  # it has the connection now
                with pytest.raises(httpx.PoolTimeout):
                    await fetch(http, url)
                inner.cancel_scope.cancel()
            assert transport._open == 0  # the cancelled request gave its connection back


async def test_refused_connection_is_a_connect_error() -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await fetch(http, f"http://127.0.0.1:{port}")


async def self_signed(directory: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for ``localhost`` made with openssl (the test is skipped without it) and
    a server context holding it."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    await trio.run_process(
        [
            *(openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        capture_stdout=True,
        capture_stderr=True,
    )
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    return cert, server_context


async def test_https_through_trio_ssl(tmp_path: Path) -> None:
    cert, server_context = await self_signed(tmp_path)
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret"

    def trusting() -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(cert))

    async with raw_server(lambda n: answer, tls=server_context) as (url, connections):
        transport = Http11Transport(ssl_context=trusting)
        async with httpx.AsyncClient(trust_env=False, transport=transport) as http:
            for _ in range(2):
                assert await fetch(http, url) == (200, b"secret")
        assert len(connections) == 1
        untrusting = Http11Transport(ssl_context=ssl.create_default_context)
        async with httpx.AsyncClient(trust_env=False, transport=untrusting) as http:
            with pytest.raises(httpx.ConnectError):
                await fetch(http, url)


async def test_a_body_in_pieces_arrives_whole_over_tls(tmp_path: Path) -> None:
    # Over TLS there is no sendmsg: the pieces go one by one through the SSL stream.
    cert, server_context = await self_signed(tmp_path)
    segment = bytes(range(256)) * 1024
    body = (b"[", segment, b",", segment, b"]")
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    received: list[bytes] = []

    def trusting() -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(cert))

    async with raw_server(lambda n: answer, bodies=received, tls=server_context) as (url, _):
        transport = Http11Transport(ssl_context=trusting)
        timeouts = Timeouts(connect=5, read=5, write=5, pool=5)
        async with transport.stream("POST", url + "/v1/x", {}, body, timeouts) as response:
            assert response.status_code == 200
            assert b"".join([chunk async for chunk in response.aiter_bytes()]) == b"ok"
        await transport.aclose()
    assert received == [b"".join(body)]


async def test_direct_stream_headers_gzip_and_reuse() -> None:
    body = zlib.compress(b"data: hi\n\n")
    seen: list[bytes] = []

    def answer(n: int) -> bytes:
        return (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: deflate\r\nContent-Type: text/event-stream\r\n"
            b"X-Twice: a\r\nX-Twice: b\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        ) + body

    async with raw_server(answer) as (url, accepted):
        transport = Http11Transport()
        timeouts = Timeouts(connect=5, read=5, write=5, pool=5)
        for _ in range(2):
            async with transport.stream(
                "POST", url + "/v1/x?q=1", {"accept": "text/event-stream"}, b"{}", timeouts
            ) as response:
                assert response.status_code == 200
                assert response.headers["x-twice"] == "a, b"
                seen.append(b"".join([chunk async for chunk in response.aiter_bytes()]))
        await transport.aclose()
        assert seen == [b"data: hi\n\n"] * 2
        assert len(accepted) == 1


async def test_a_body_in_pieces_arrives_whole_and_in_order() -> None:
    # A long transcript's body comes in pieces (segments and the short parts between them);
    # the direct stream gathers them into sendmsg calls. 4 MB is more than the socket takes at
    # once, so the sends end part-way through pieces and resume there; a small body in pieces
    # goes out with the head.
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
    segment = bytes(range(256)) * 1024  # 256 KB
    large = (b'{"messages":[', *[segment, b","] * 15, segment, b"", b"]}")
    small = (b"[", b"1", b",", b"2", b"]")
    received: list[bytes] = []
    async with raw_server(lambda n: answer, bodies=received) as (url, accepted):
        transport = Http11Transport()
        timeouts = Timeouts(connect=5, read=5, write=5, pool=5)
        for body in (large, small, large):
            async with transport.stream("POST", url + "/v1/x", {}, body, timeouts) as response:
                assert response.status_code == 200
                assert b"".join([chunk async for chunk in response.aiter_bytes()]) == b"ok"
        await transport.aclose()
        assert len(accepted) == 1
    assert received == [b"".join(large), b"[1,2]", b"".join(large)]


def test_the_pool_goes_through_httpx_when_a_proxy_is_configured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pitrio.actors.model_router.providers.base import HttpSettings
    from pitrio.actors.model_router.providers.http import HttpPool

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert HttpPool(HttpSettings()).direct() is not None
    monkeypatch.setenv("https_proxy", "http://proxy.invalid:3128")
    assert HttpPool(HttpSettings()).direct() is None
    assert HttpPool(HttpSettings(trust_env=False)).direct() is not None


def _plain_pair() -> tuple[Connection, socket.socket]:
    """A plain connection (as the pool makes for ``http://``) and its peer's socket."""
    ours, peer = socket.socketpair()
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(ours))
    return Connection(("http", "peer", 80), stream, ours.fileno()), peer


async def test_a_plain_connection_reads_waiting_bytes_without_a_task_switch() -> None:
    # The plain path reads the socket directly (pitrio.actors.direct_io); trio's stream
    # layer would yield after the read.
    connection, peer = _plain_pair()
    with peer:
        peer.send(b"first")
        await trio.lowlevel.wait_readable(connection.fd)
        with counting_steps() as counter:
            assert await connection.receive(5) == b"first"
        assert counter.steps == 0
        peer.close()
        assert await connection.receive(5) == b""  # end of stream
    await connection.close()


async def test_a_plain_connection_sees_cancellation_before_reading_or_writing() -> None:
    connection, peer = _plain_pair()
    with peer:
        peer.send(b"waiting")
        with trio.CancelScope() as scope:
            scope.cancel()
            await connection.receive(5)
        assert scope.cancelled_caught
        with trio.CancelScope() as scope:
            scope.cancel()
            await connection.send((b"never",), 5)
        assert scope.cancelled_caught
        assert await connection.receive(5) == b"waiting"  # nothing was taken
        peer.setblocking(False)
        with pytest.raises(BlockingIOError):
            peer.recv(16)  # nothing was sent
    await connection.close()


async def test_a_plain_write_the_peer_does_not_take_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection, peer = _plain_pair()
    started = trio.current_time()
    with peer, pytest.raises(httpx.WriteTimeout):
        await connection.send((b"x" * (1 << 20),) * 64, 30)  # 64 MB, never read
    assert trio.current_time() - started == pytest.approx(30)
    await connection.close()


async def test_a_plain_read_with_nothing_coming_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    connection, peer = _plain_pair()
    with peer, pytest.raises(httpx.ReadTimeout):
        await connection.receive(12)
    await connection.close()


def test_a_request_s_target_is_read_from_its_url_once_per_url() -> None:
    """The origin, ``Host`` header and target of a URL (default ports left out of ``Host``,
    an IPv6 host bracketed, the query kept); the same URL again is answered from the kept
    parse, and a refused URL is refused every time, never kept."""
    assert _request_target("http://127.0.0.1:8080/v1/chat/completions?a=1") == (
        "http", "127.0.0.1", 8080, b"127.0.0.1:8080", b"/v1/chat/completions?a=1"
    )  # fmt: skip
    assert _request_target("https://example.com:443") == (
        "https", "example.com", 443, b"example.com", b"/"
    )  # fmt: skip
    assert _request_target("http://[::1]/x")[3] == b"[::1]"
    hits = _request_target.cache_info().hits
    _request_target("http://127.0.0.1:8080/v1/chat/completions?a=1")
    assert _request_target.cache_info().hits == hits + 1
    for _ in range(2):
        with pytest.raises(httpx.UnsupportedProtocol):
            _request_target("ftp://example.com/x")
