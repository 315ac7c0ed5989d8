"""Provider benchmarks: parse throughput and first-byte overhead (not part of the test run).

    .venv/bin/python bench/bench_providers.py [--deltas 20000] [--runs 5] [--requests 200]

For each HTTP provider (openai-completions, openai-responses, anthropic-messages):

* **parser** — stream events per second out of the sans-IO parser fed the SSE events of a
  recorded response of ``--deltas`` 4-character text deltas (in the vendor's wire format);
  every event carries its partial-message snapshot, as the agent loop receives it;
* **http** — the same response served by a loopback HTTP server and read through the whole
  transport (httpx, httpx-sse, parser, memory channel), events per second from the call to
  the final event;
* **first byte** — from calling the provider's stream function (key lookup and request
  building included) to the first byte of the request arriving at the server, median of
  ``--requests`` sequential requests on a warm connection pool; ``cold`` is the same with a
  new connection (TCP connect included) for each request. Creating the process's HTTP client
  (its TLS context) costs another ~20 ms once per process, on the first real request; it is
  printed separately.

Figures are medians (min-max) over ``--runs``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pitrio.actors.model_router.providers.base import HttpSettings
from pitrio.actors.model_router.providers.http import HttpPool, SseParser
from pitrio.messages import user_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent
from tests.actors.providers.loopback import LoopbackServer, loopback_server, sse
from tests.actors.providers.support import (
    APIS,
    make_model,
    make_provider,
    split_sse,
)

DELTA = "abcd"


def _data(obj: object) -> bytes:
    return orjson.dumps(obj)


def completions_body(deltas: int) -> bytes:
    """A Chat Completions stream with ``deltas`` text deltas."""
    head = {"id": "chatcmpl-b", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    parts = [b"data: " + _data({**head, "choices": [{"index": 0, "delta": {"role": "assistant"}}]})]
    chunk = b"data: " + _data(
        {**head, "choices": [{"index": 0, "delta": {"content": DELTA}, "finish_reason": None}]}
    )
    parts.extend([chunk] * deltas)
    parts.append(
        b"data: " + _data({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    )
    usage = {"prompt_tokens": 10, "completion_tokens": deltas, "total_tokens": 10 + deltas}
    parts.append(b"data: " + _data({**head, "choices": [], "usage": usage}))
    parts.append(b"data: [DONE]")
    return b"\n\n".join(parts) + b"\n\n"


def anthropic_body(deltas: int) -> bytes:
    """A Messages API stream with ``deltas`` text deltas."""

    def event(name: str, obj: object) -> bytes:
        return b"event: " + name.encode() + b"\ndata: " + _data(obj) + b"\n\n"

    message = {
        "id": "msg_b",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    parts = [
        event("message_start", {"type": "message_start", "message": message}),
        event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    delta = event(
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": DELTA}},
    )
    parts.extend([delta] * deltas)
    parts.append(event("content_block_stop", {"type": "content_block_stop", "index": 0}))
    parts.append(
        event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": deltas},
            },
        )
    )
    parts.append(event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def responses_body(deltas: int) -> bytes:
    """A Responses API stream with ``deltas`` text deltas."""

    def event(obj: dict[str, object]) -> bytes:
        return b"event: " + str(obj["type"]).encode() + b"\ndata: " + _data(obj) + b"\n\n"

    response = {"id": "resp_b", "object": "response", "status": "in_progress", "model": "m"}
    item = {"id": "msg_b", "type": "message", "role": "assistant", "content": []}
    parts = [
        event({"type": "response.created", "response": response}),
        event({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ]
    delta = event(
        {
            "type": "response.output_text.delta",
            "item_id": "msg_b",
            "output_index": 0,
            "content_index": 0,
            "delta": DELTA,
        }
    )
    parts.extend([delta] * deltas)
    parts.append(
        event(
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**item, "status": "completed"},
            }
        )
    )
    usage = {"input_tokens": 10, "output_tokens": deltas, "total_tokens": 10 + deltas}
    parts.append(
        event(
            {
                "type": "response.completed",
                "response": {**response, "status": "completed", "usage": usage},
            }
        )
    )
    return b"".join(parts)


BODIES: dict[str, Callable[[int], bytes]] = {
    "openai-completions": completions_body,
    "openai-responses": responses_body,
    "anthropic-messages": anthropic_body,
}

CONTEXT = LlmContext(system_prompt="You are terse.", messages=(user_message("hi", timestamp=1),))


def bench_parser(api: str, body: bytes) -> tuple[float, int]:
    """(seconds, events) of parsing ``body``'s SSE events with the sans-IO parser."""
    events = split_sse(body)
    provider = make_provider(api, HttpPool())
    parser: SseParser = provider.new_parser(make_model(api))
    count = 0
    started = time.perf_counter()
    for name, data in events:
        count += len(parser.feed(name, data))
    count += len(parser.end())
    elapsed = time.perf_counter() - started
    assert parser.final is not None and parser.final.type == "done", parser.final
    return elapsed, count


async def bench_http(
    api: str, server: LoopbackServer, pool: HttpPool, body: bytes
) -> tuple[float, int]:
    """(seconds, events) of streaming ``body`` from the loopback server through the transport.

    The consumer reads concurrently from a channel of 16 (the agent loop's buffer) and drops
    each event, as the loop does once it has forwarded it.
    """
    server.push(sse(body))
    provider = make_provider(api, pool)
    send, receive = trio.open_memory_channel[AssistantMessageEvent](16)
    counted: list[str] = []

    async def consume() -> None:
        count = 0
        last = ""
        async with receive:
            async for event in receive:
                count += 1
                last = event.type
        counted.extend([str(count), last])

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        async with send:
            await provider.stream(make_model(api, server.base_url), CONTEXT, StreamOptions(), send)
    elapsed = time.perf_counter() - started
    assert counted[1] == "done", counted
    return elapsed, int(counted[0])


async def first_byte(api: str, server: LoopbackServer, pool: HttpPool, body: bytes) -> float:
    """Seconds from calling the stream function to the request's first byte at the server."""
    server.push(sse(body))
    provider = make_provider(api, pool)
    send, receive = trio.open_memory_channel[AssistantMessageEvent](math.inf)
    started = trio.current_time()
    async with send:
        await provider.stream(make_model(api, server.base_url), CONTEXT, StreamOptions(), send)
    async with receive:
        pass
    return server.requests[-1].first_byte_at - started


def summary(values: list[float]) -> str:
    """``median (min-max)``."""
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


async def main(deltas: int, runs: int, requests: int) -> None:
    """Run every benchmark and print a table."""
    small = {api: BODIES[api](3) for api in APIS}
    started = time.perf_counter()
    HttpPool().client  # noqa: B018 - what the first real request of a process pays
    print(f"creating the HTTP client: {(time.perf_counter() - started) * 1000:.1f} ms")
    print(f"providers: {deltas} deltas of {len(DELTA)} chars, {runs} runs, {requests} requests")
    print(
        f"{'api':<20} {'parser events/s':>26} {'http events/s':>26} {'first byte us':>18} "
        f"{'cold us':>10}"
    )
    async with loopback_server() as server:
        for api in APIS:
            body = BODIES[api](deltas)
            parser_rates, http_rates = [], []
            for _ in range(runs):
                elapsed, count = bench_parser(api, body)
                parser_rates.append(count / elapsed)
            pool = HttpPool(HttpSettings(trust_env=False))
            try:
                await bench_http(api, server, pool, body)  # warm-up: connect, TLS-free pool
                for _ in range(runs):
                    elapsed, count = await bench_http(api, server, pool, body)
                    http_rates.append(count / elapsed)
                warm = [
                    await first_byte(api, server, pool, small[api]) * 1e6 for _ in range(requests)
                ]
            finally:
                await pool.aclose()
            cold: list[float] = []
            for _ in range(max(5, requests // 10)):
                fresh = HttpPool(HttpSettings(trust_env=False))
                fresh.client  # noqa: B018 - built before timing (once per process in real use)
                try:
                    cold.append(await first_byte(api, server, fresh, small[api]) * 1e6)
                finally:
                    await fresh.aclose()
            print(
                f"{api:<20} {summary(parser_rates):>26} {summary(http_rates):>26} "
                f"{statistics.median(warm):>18,.0f} {statistics.median(cold):>10,.0f}"
            )


if __name__ == "__main__":
    arguments = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arguments.add_argument("--deltas", type=int, default=20000)
    arguments.add_argument("--runs", type=int, default=5)
    arguments.add_argument("--requests", type=int, default=200)
    options = arguments.parse_args()
    trio.run(main, options.deltas, options.runs, options.requests)
