"""Provider-level retries: a transient failure before anything streamed is repeated quietly.

pi's providers go through the vendor SDKs, which repeat a request twice (0.5 s, then 1 s,
less up to a quarter of jitter; or what ``retry-after`` asks) for 408, 409, 429, 5xx and
failed connections before anything reaches the caller. The loopback vendor runs in-process on
a ``MockClock``, so the times between requests are exactly the back-off sleeps.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from pitrio.actors.model_router.providers.base import HttpSettings, ProviderSettings
from pitrio.actors.model_router.providers.http import HttpPool, HttpProvider
from pitrio.messages.model import StreamOptions
from pitrio.messages.stream import AssistantMessageEvent
from tests.actors.providers.loopback import (
    LoopbackServer,
    Reply,
    json_error,
    recording,
    sse,
)
from tests.actors.providers.support import APIS, CONTEXT, collect, final, make_model, make_provider

TEXT_RECORDINGS = {
    "openai-completions": "openai_completions_text.sse",
    "openai-responses": "openai_responses_text.sse",
    "anthropic-messages": "anthropic_text.sse",
}
BUSY = {"error": {"message": "The server had an error", "type": "server_error"}}


@pytest.fixture
async def retrying() -> AsyncIterator[HttpPool]:
    """A pool with the vendor SDKs' two retries (pi 1.6.0's default is none; a user who sets
    ``retry.provider.maxRetries`` gets these)."""
    pool = HttpPool(HttpSettings(trust_env=False, max_retries=2))
    try:
        yield pool
    finally:
        await pool.aclose()


def provider_for(
    api: str, pool: HttpPool, jitter: float = 0.0, settings: ProviderSettings | None = None
) -> HttpProvider:
    provider = make_provider(api, pool, settings=settings)
    provider.random = lambda: jitter
    return provider


def gaps(server: LoopbackServer) -> list[float]:
    times = [r.first_byte_at for r in server.requests]
    return [later - earlier for earlier, later in itertools.pairwise(times)]


def ok(api: str) -> Reply:
    return sse(recording(TEXT_RECORDINGS[api]))


@pytest.mark.parametrize("api", APIS)
async def test_a_500_then_a_503_are_repeated_quietly_and_the_answer_streams(
    api: str, server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(json_error(500, BUSY), json_error(503, BUSY), ok(api))
    events = await collect(provider_for(api, retrying), make_model(api, server.base_url))
    assert events[0].type == "start"  # nothing of the failed tries reached the caller
    assert final(events).stop_reason == "stop"
    assert [e.type for e in events].count("error") == 0
    assert len(server.requests) == 3
    assert gaps(server) == pytest.approx([0.5, 1.0])
    # The same request each time.
    assert len({r.body for r in server.requests}) == 1


async def test_jitter_takes_up_to_a_quarter_off_and_the_backoff_is_capped(
    server: LoopbackServer, autojump_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    pool = HttpPool(HttpSettings(trust_env=False, max_retries=6))
    try:
        server.push(*(json_error(502, BUSY) for _ in range(6)), ok(api))
        provider = provider_for(api, pool, jitter=1.0)  # the most jitter there is
        assert final(await collect(provider, make_model(api, server.base_url))).stop_reason == (
            "stop"
        )
    finally:
        await pool.aclose()
    # 0.5 s doubling, capped at 8 s, each less a quarter.
    assert gaps(server) == pytest.approx([0.375, 0.75, 1.5, 3.0, 6.0, 6.0])


@pytest.mark.parametrize("api", APIS)
async def test_exhausted_retries_reach_the_caller_as_one_error_with_pi_s_text(
    api: str, server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    server.push(*(json_error(500, BUSY) for _ in range(4)))
    events = await collect(provider_for(api, retrying), make_model(api, server.base_url))
    assert [e.type for e in events] == ["error"]
    message = final(events)
    expected = (
        '500 {"error":{"message":"The server had an error","type":"server_error"}}'
        if api == "anthropic-messages"
        # pi 1.6.0's completions provider shows the parsed error body after the status.
        else '500: {"message":"The server had an error","type":"server_error"}'
        if api == "openai-completions"
        else "500 The server had an error"
    )
    assert message.error_message == expected
    assert message.diagnostics is None  # pi's messages have no diagnostics
    assert len(server.requests) == 3  # the try and two repeats, no more


async def test_retry_after_and_retry_after_ms_are_waited(
    server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    api = "anthropic-messages"
    server.push(
        json_error(429, BUSY, {"retry-after": "3"}),
        json_error(429, BUSY, {"retry-after-ms": "250", "retry-after": "9"}),
        ok(api),
    )
    message = final(await collect(provider_for(api, retrying), make_model(api, server.base_url)))
    assert message.stop_reason == "stop"
    assert gaps(server) == pytest.approx([3.0, 0.25])


async def test_a_requested_delay_beyond_the_cap_fails_at_once_saying_so(
    server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    server.push(json_error(429, BUSY, {"retry-after": "120"}))
    started = trio.current_time()
    message = final(await collect(provider_for(api, retrying), make_model(api, server.base_url)))
    assert trio.current_time() == started
    assert message.error_message == (
        # pi 1.6.0's words, then the provider's text (the completions form since 1.6.0)
        'Server requested 120s retry delay (max: 60s). 429: {"message":"The server had an error",'
        '"type":"server_error"}'
    )
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "headers", "repeated"),
    [
        (400, {}, False),
        (401, {}, False),
        (404, {}, False),
        (408, {}, True),
        (409, {}, True),
        (429, {}, True),
        (529, {}, True),
        (500, {"x-should-retry": "false"}, False),
        (400, {"x-should-retry": "true"}, True),
    ],
)
async def test_which_statuses_are_repeated(
    server: LoopbackServer,
    retrying: HttpPool,
    autojump_clock: trio.testing.MockClock,
    status: int,
    headers: dict[str, str],
    repeated: bool,
) -> None:
    api = "openai-responses"
    server.push(json_error(status, BUSY, headers), ok(api))
    message = final(await collect(provider_for(api, retrying), make_model(api, server.base_url)))
    if repeated:
        assert message.stop_reason == "stop" and len(server.requests) == 2
    else:
        assert message.error_message == f"{status} The server had an error"
        assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_refused_connection_is_repeated_then_reported(
    api: str, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    started = trio.current_time()
    events = await collect(provider_for(api, retrying), make_model(api, f"http://127.0.0.1:{port}"))
    assert trio.current_time() - started == pytest.approx(1.5)  # 0.5 s + 1 s of back-off
    assert final(events).error_message == "Connection error."  # pi's text (the SDKs')


async def test_a_break_after_the_response_started_is_not_repeated(
    server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    body = recording(TEXT_RECORDINGS[api])
    server.push(sse(body[: len(body) // 2], ending="reset"), ok(api))
    events = await collect(provider_for(api, retrying), make_model(api, server.base_url))
    assert events[0].type == "start"
    assert (final(events).error_message or "").startswith("Connection error: ")
    assert len(server.requests) == 1  # what streamed was seen: the session decides


async def test_max_retries_zero_makes_one_try(
    server: LoopbackServer, autojump_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    pool = HttpPool(HttpSettings(trust_env=False, max_retries=0))
    try:
        server.push(json_error(500, BUSY), ok(api))
        message = final(await collect(provider_for(api, pool), make_model(api, server.base_url)))
    finally:
        await pool.aclose()
    assert (
        message.error_message == '500: {"message":"The server had an error","type":"server_error"}'
    )
    assert len(server.requests) == 1


async def test_diagnostics_only_when_asked_for(
    server: LoopbackServer, retrying: HttpPool, autojump_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    server.push(*(json_error(429, BUSY, {"retry-after-ms": "10"}) for _ in range(3)))
    provider = provider_for(api, retrying, settings=ProviderSettings(diagnostics=True))
    message = final(await collect(provider, make_model(api, server.base_url)))
    assert message.diagnostics is not None
    (diagnostic,) = message.diagnostics
    assert diagnostic.details == {"status": 429, "retryAfterMs": 10}


async def test_an_abort_during_the_backoff_ends_it_at_once(
    server: LoopbackServer, retrying: HttpPool, mock_clock: trio.testing.MockClock
) -> None:
    api = "openai-completions"
    server.push(json_error(500, BUSY), ok(api))
    provider = provider_for(api, retrying)
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    model = make_model(api, server.base_url)
    started = trio.current_time()
    outcome: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:

        async def run() -> None:
            with trio.CancelScope() as scope:
                outcome["scope"] = scope
                await provider.stream(model, CONTEXT, StreamOptions(), send)
            outcome["cancelled"] = scope.cancelled_caught

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        while len(server.requests) < 1:  # the 500 has been answered
            await trio.testing.wait_all_tasks_blocked()
        mock_clock.jump(0.25)  # half-way through the 0.5 s back-off
        await trio.testing.wait_all_tasks_blocked()
        assert len(server.requests) == 1
        outcome["scope"].cancel()
    assert outcome["cancelled"]
    assert trio.current_time() - started == 0.25  # no more of the back-off was waited
    assert len(server.requests) == 1
    send.close()
    assert [event async for event in receive] == []  # an abort sends nothing
