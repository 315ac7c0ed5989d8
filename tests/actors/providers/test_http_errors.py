"""Every way a request can fail, for every HTTP provider, against a real loopback server.

Failures end the stream with one ``error`` event whose message is the text pi shows (the
vendor SDK's: the HTTP status and the vendor's message, so spec §3.7.1's retry rules and
§3.8.3's overflow rules work on it), with status and retry-after in the diagnostics when asked
for; nothing raises; an abort just stops the stream. The pool makes one try per request
(``conftest``); the provider-level retries are in ``test_transport_retry``.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
import trio

from pitrio.actors.model_router.diagnostics import error_name, http_status, retry_after_ms
from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages.model import StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamError, TextDelta
from tests.actors.providers.loopback import (
    LoopbackServer,
    Reply,
    json_error,
    recording,
    sse,
)
from tests.actors.providers.support import (
    APIS,
    CONTEXT,
    SECRET,
    collect,
    credentials,
    final,
    make_model,
    make_provider,
)

TEXT_RECORDINGS = {
    "openai-completions": "openai_completions_text.sse",
    "openai-responses": "openai_responses_text.sse",
    "anthropic-messages": "anthropic_text.sse",
}

# pi's retry classification (spec §3.7.1, V73) and overflow patterns (§3.8.3), as the
# supervisor will apply them to our messages.
RETRYABLE = re.compile(
    r"overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|"
    r"service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|"
    r"connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|"
    r"fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|"
    r"http2 request did not get a response|timed? out|timeout|terminated|retry delay",
    re.IGNORECASE,
)
OVERFLOW = re.compile(
    r"prompt is too long|request_too_large|maximum context length is \d+ tokens|"
    r"exceeds the context window|context[_ ]length[_ ]exceeded",
    re.IGNORECASE,
)


DIAGNOSING = ProviderSettings(diagnostics=True)
"""Providers that attach diagnostics to failures (a client asked for them)."""


def sdk_text(api: str, status: int, body: dict[str, Any]) -> str:
    """pi's ``errorMessage`` of a JSON error body: OpenAI's SDK shows ``error.message``,
    Anthropic's the whole body as compact JSON (it has no top-level message); pi 1.6.0's
    completions provider the parsed ``error`` member as compact JSON after ``<status>: ``."""
    if api == "anthropic-messages":
        return f"{status} {json.dumps(body, separators=(',', ':'))}"
    if api == "openai-completions":
        return f"{status}: {json.dumps(body['error'], separators=(',', ':'))}"
    return f"{status} {body['error']['message']}"


def vendor_error(api: str, kind: str, message: str, code: str | None = None) -> dict[str, Any]:
    """An error body in the vendor's documented shape."""
    if api == "anthropic-messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def run(
    api: str, server: LoopbackServer, pool: HttpPool, *replies: Reply
) -> list[AssistantMessageEvent]:
    server.push(*replies)
    provider = make_provider(api, pool, settings=DIAGNOSING)
    return await collect(provider, make_model(api, server.base_url))


@pytest.mark.parametrize("api", APIS)
async def test_401_keeps_status_and_vendor_text_but_never_the_key(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    body = vendor_error(
        api, "authentication_error", f"Incorrect API key provided: {SECRET}", "invalid_api_key"
    )
    events = await run(api, server, pool, json_error(401, body))
    assert [e.type for e in events] == ["error"]  # no start: nothing streamed
    message = final(events)
    assert message.stop_reason == "error"
    assert message.error_message == sdk_text(api, 401, body).replace(SECRET, "***")
    assert SECRET not in repr(events)
    assert http_status(message) == 401 and error_name(message) == "HttpError"
    assert not RETRYABLE.search(message.error_message or "")


@pytest.mark.parametrize("api", APIS)
async def test_400_context_overflow_is_recognisable(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    text = (
        "prompt is too long: 213462 tokens > 200000 maximum"
        if api == "anthropic-messages"
        else "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130532 tokens. Please reduce the length of the messages."
    )
    body = vendor_error(api, "invalid_request_error", text, "context_length_exceeded")
    message = final(await run(api, server, pool, json_error(400, body)))
    assert message.error_message == sdk_text(api, 400, body)
    assert OVERFLOW.search(message.error_message)
    assert http_status(message) == 400


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("headers", "expected"),
    [({"retry-after": "7"}, 7000), ({"retry-after-ms": "1500", "retry-after": "9"}, 1500)],
)
async def test_429_carries_retry_after(
    api: str,
    server: LoopbackServer,
    pool: HttpPool,
    headers: dict[str, str],
    expected: int,
) -> None:
    body = vendor_error(
        api, "rate_limit_error", "Rate limit reached for requests", "rate_limit_exceeded"
    )
    message = final(await run(api, server, pool, json_error(429, body, headers)))
    assert message.error_message == sdk_text(api, 429, body)
    assert retry_after_ms(message) == expected
    assert RETRYABLE.search(message.error_message)
    assert message.diagnostics and message.diagnostics[0].error == {
        "name": "HttpError",
        "message": message.error_message,
        "code": "rate_limit_error",
    }


@pytest.mark.parametrize("api", APIS)
async def test_500_and_529_are_retryable(api: str, server: LoopbackServer, pool: HttpPool) -> None:
    server_error = vendor_error(api, "server_error", "The server had an error")
    overloaded = vendor_error(api, "overloaded_error", "Overloaded")
    first = final(await run(api, server, pool, json_error(500, server_error)))
    second = final(await run(api, server, pool, json_error(529, overloaded)))
    assert first.error_message == sdk_text(api, 500, server_error)
    assert second.error_message == sdk_text(api, 529, overloaded)
    assert RETRYABLE.search(first.error_message) and RETRYABLE.search(second.error_message)
    assert retry_after_ms(second) is None


@pytest.mark.parametrize("api", APIS)
async def test_plain_text_and_empty_error_bodies(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    html = Reply(
        status=502, body=b"<html>Bad gateway</html>", headers=[("content-type", "text/html")]
    )
    empty = Reply(status=413, body=b"", headers=[])
    assert final(await run(api, server, pool, html)).error_message == "502 <html>Bad gateway</html>"
    assert final(await run(api, server, pool, empty)).error_message == ("413 status code (no body)")


@pytest.mark.parametrize("api", APIS)
async def test_connection_reset_mid_stream(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording(TEXT_RECORDINGS[api])
    events = await run(api, server, pool, sse(body[: len(body) // 2], ending="reset"))
    message = final(events)
    assert message.stop_reason == "error"
    assert (message.error_message or "").startswith("Connection error: ")
    assert RETRYABLE.search(message.error_message or "")
    assert error_name(message) == "ConnectionError"


@pytest.mark.parametrize("api", APIS)
async def test_body_closed_mid_chunk(api: str, server: LoopbackServer, pool: HttpPool) -> None:
    body = recording(TEXT_RECORDINGS[api])
    cut = body[: body.index(b"Hello") + 40]
    events = await run(api, server, pool, sse(cut, ending="close"))
    message = final(events)
    assert (message.error_message or "").startswith("Connection error: ")
    assert events[0].type == "start"  # what came before the break was streamed


@pytest.mark.parametrize("api", APIS)
async def test_early_eof_is_an_error_naming_what_was_missing(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording(TEXT_RECORDINGS[api])
    cut = body[: body.index(b"Hello")].rsplit(b"\n\n", 1)[0] + b"\n\n"
    message = final(await run(api, server, pool, sse(cut)))
    assert message.stop_reason == "error"
    assert "ended without" in (message.error_message or "")
    assert "cut short" in (message.error_message or "")
    assert error_name(message) == "MalformedStream"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "garbage",
    [
        bytes(range(256)) * 4,
        b"data: \xff\xfe{{{ not json\n\n",
        b"event: message_start\ndata: [1, 2\n\n",
    ],
)
async def test_garbage_bytes(
    api: str, server: LoopbackServer, pool: HttpPool, garbage: bytes
) -> None:
    message = final(await run(api, server, pool, sse(garbage, chunk_size=3)))
    assert message.stop_reason == "error"
    text = message.error_message or ""
    assert text.startswith(f"Malformed {api} stream: invalid JSON") or (
        text.startswith(f"The {api} stream ended without")
    ), text


@pytest.mark.parametrize("api", APIS)
async def test_a_200_that_is_not_an_event_stream(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    reply = Reply(body=b'{"ok": false}', headers=[("content-type", "application/json")])
    message = final(await run(api, server, pool, reply))
    assert message.error_message == (
        '200 Expected an event stream but got application/json: {"ok": false}'
    )


@pytest.mark.parametrize("api", APIS)
async def test_abort_mid_stream_closes_the_connection(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording(TEXT_RECORDINGS[api])
    server.push(sse(body[: body.index(b"ld! ")], ending="hang"))
    provider = make_provider(api, pool)
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    seen: list[AssistantMessageEvent] = []
    async with trio.open_nursery() as nursery:

        async def consume() -> None:
            async for event in receive:
                seen.append(event)
                if isinstance(event, TextDelta):
                    nursery.cancel_scope.cancel()  # the abort: the run's scope is cancelled

        nursery.start_soon(consume)
        await provider.stream(make_model(api, server.base_url), CONTEXT, StreamOptions(), send)
        pytest.fail("the stream should have been cancelled")  # pragma: no cover
    # Cancellation is not converted into events: no done, no error.
    assert not any(isinstance(e, StreamError) for e in seen)
    assert seen[-1].type == "text_delta"
    with trio.fail_after(5):
        await server.client_gone.wait()


@pytest.mark.parametrize("api", APIS)
async def test_error_event_inside_a_200_stream(
    api: str, server: LoopbackServer, pool: HttpPool
) -> None:
    if api == "anthropic-messages":
        body = (
            b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
            b'"message":"Overloaded"}}\n\n'
        )
        # The SDK's text of the whole event, as JSON.
        expected = '{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    elif api == "openai-responses":
        body = b'event: error\ndata: {"type":"error","code":"server_error","message":"oops"}\n\n'
        expected = "Error Code server_error: oops"  # pi's own text for this event
    else:
        body = b'data: {"error":{"message":"Upstream overloaded","code":503}}\n\n'
        expected = "Upstream overloaded"  # the SDK's: the error's message, no status
    message = final(await run(api, server, pool, sse(body)))
    assert message.error_message == expected
    assert error_name(message) == "StreamError"


@pytest.mark.parametrize("api", APIS)
async def test_connection_refused(api: str, pool: HttpPool) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    provider = make_provider(api, pool, settings=DIAGNOSING)
    events = await collect(provider, make_model(api, f"http://127.0.0.1:{port}"))
    message = final(events)
    assert message.error_message == "Connection error."  # pi's (the SDKs') text
    assert error_name(message) == "ConnectionError"
    assert message.diagnostics is not None and message.diagnostics[0].details is not None
    assert message.diagnostics[0].details["cause"].startswith("Connection error: ")


@pytest.mark.parametrize("api", APIS)
async def test_missing_key_sends_nothing(api: str, server: LoopbackServer, pool: HttpPool) -> None:
    provider = make_provider(api, pool, credentials(key=None), DIAGNOSING)
    message = final(await collect(provider, make_model(api, server.base_url)))
    assert message.error_message == "No API key for provider test: set an environment variable"
    assert error_name(message) == "CredentialError"
    assert server.requests == []


async def test_connections_are_pooled_across_requests(
    server: LoopbackServer, pool: HttpPool
) -> None:
    api = "anthropic-messages"
    body = recording(TEXT_RECORDINGS[api])
    for _ in range(3):
        assert final(await run(api, server, pool, sse(body))).stop_reason == "stop"
    assert server.connections == 1


async def test_timeout_is_a_retryable_error(server: LoopbackServer) -> None:
    api = "openai-completions"
    pool = HttpPool(HttpSettings(trust_env=False, read_timeout=0.05, max_retries=0))
    try:
        body = recording(TEXT_RECORDINGS[api])
        # The server stops sending after the first event and waits for the client to give up.
        message = final(
            await run(api, server, pool, sse(body[: body.index(b"\n\n") + 2], ending="hang"))
        )
    finally:
        await pool.aclose()
    assert message.error_message == (
        "Request timed out waiting for the provider: the stream stalled for 0.05 s"
    )
    assert RETRYABLE.search(message.error_message)
    assert error_name(message) == "TimeoutError"


@pytest.mark.parametrize("api", APIS)
async def test_a_host_that_does_not_resolve_fails_at_once_naming_it(api: str) -> None:
    # Issue 24: retried like a refused connection (the SDKs' two repeats, then the session's
    # auto-retry on "Connection error."), a lookup that failed was 15 s of silence. It is
    # now one try, and a text naming the host and the cause that no auto-retry rule matches.
    import socket

    lookups: list[bytes | str] = []

    class Resolver(trio.abc.HostnameResolver):
        """Every name fails to resolve, as without a network (and counted)."""

        async def getaddrinfo(self, host: Any, *args: Any, **kwargs: Any) -> Any:
            lookups.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

        async def getnameinfo(self, *args: Any) -> Any:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    trio.socket.set_custom_hostname_resolver(Resolver())
    retrying = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        provider = make_provider(api, retrying, settings=DIAGNOSING)
        message = final(await collect(provider, make_model(api, "http://no-such-host.invalid")))
    finally:
        await retrying.aclose()
    assert message.error_message is not None
    assert message.error_message == "cannot reach no-such-host.invalid: name or service not known"
    assert lookups == [b"no-such-host.invalid"] or lookups == ["no-such-host.invalid"]
    assert error_name(message) == "ConnectionError"
    assert not RETRYABLE.search(message.error_message)


def test_unresolved_host_message_walks_the_causes() -> None:
    import socket

    import httpx

    from pitrio.actors.model_router.providers.http_errors import unresolved_host_message

    try:
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except socket.gaierror as lookup:
            raise httpx.ConnectError("[Errno -2] Name or service not known") from lookup
    except httpx.ConnectError as exc:
        wrapped = exc
    assert unresolved_host_message(wrapped, "https://api.anthropic.com/v1/messages") == (
        "cannot reach api.anthropic.com: name or service not known"
    )
    assert unresolved_host_message(httpx.ConnectError("refused"), "http://x/") is None


def test_completions_text_is_status_and_error_body_as_pi_1_6_shows_it() -> None:
    from pitrio.actors.model_router.providers.http_errors import (
        PROVIDER_ERROR_BODY_MAX,
        http_error_message,
    )

    body = b'{"error":{"message":"busy","type":"server_error","param":null,"code":null}}'
    text, _ = http_error_message(500, body, "openai-completions")
    assert text == '500: {"message":"busy","type":"server_error","param":null,"code":null}'
    # No parsed error object: the SDK's own text stands.
    assert http_error_message(502, b"Bad gateway", "openai-completions")[0] == "502 Bad gateway"
    assert http_error_message(500, b'{"error":"down"}', "openai-completions")[0] == '500 "down"'
    assert http_error_message(500, b"", "openai-completions")[0] == ("500 status code (no body)")
    # The other OpenAI-style providers keep the SDK's summary.
    assert http_error_message(500, body, "openai")[0] == "500 busy"
    long = b'{"error":{"message":"' + b"x" * 5000 + b'"}}'
    text, _ = http_error_message(500, long, "openai-completions")
    shown = text.removeprefix("500: ")
    assert shown.startswith('{"message":"xxx')
    assert shown.endswith(f"... [truncated {5000 + 14 - PROVIDER_ERROR_BODY_MAX} chars]")


def test_completions_text_adds_openrouter_raw_only_when_not_shown_already() -> None:
    from pitrio.actors.model_router.providers.http_errors import http_error_message

    body = b'{"error":{"message":"Provider returned error","metadata":{"raw":"upstream 503"}}}'
    text, _ = http_error_message(400, body, "openai-completions")
    # The raw text is inside the JSON body already: not repeated on a line of its own.
    assert text == ('400: {"message":"Provider returned error","metadata":{"raw":"upstream 503"}}')
