"""openai-codex-responses over its WebSocket transport, against a loopback WebSocket vendor.

The vendor is written from the Responses API's documented stream events (the same JSON as the
SSE events, one text message each) and the frames pi 0.73.1 was seen to send: one
``{"type": "response.create", ...body}`` message per request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
import trio
from trio_websocket import WebSocketConnection, WebSocketRequest, serve_websocket

from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.providers.base import ProviderSettings
from pitrio.actors.model_router.providers.codex_websocket import (
    Continuation,
    close_text,
    continued_body,
    handshake_headers,
    websocket_url,
)
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.actors.model_router.providers.openai_codex_responses import (
    OpenAICodexResponsesProvider,
)
from pitrio.messages import AssistantMessage, TextContent, ToolCall, user_message
from pitrio.messages.model import LlmContext, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, TextDelta
from tests.actors.providers.loopback import LoopbackServer, Reply, recording, sse
from tests.actors.providers.support import collect, final, make_model, split_sse, tool_result
from tests.actors.providers.test_openai_codex_responses import TOKEN
from tests.stray_cancel import no_stray_cancel

API = "openai-codex-responses"
Script = list[Any]  # per request: event dicts, or ("close", code, reason), or ("hang",)


def answer(response_id: str, text: str) -> Script:
    """One whole text answer as Responses stream events."""
    item = {"type": "message", "id": f"msg_{response_id}", "role": "assistant",
            "status": "in_progress", "content": []}  # fmt: skip
    done = {**item, "status": "completed", "content": [{"type": "output_text", "text": text}]}
    return [
        {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.content_part.added", "item_id": item["id"], "output_index": 0,
         "content_index": 0, "part": {"type": "output_text", "text": ""}},
        {"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
         "content_index": 0, "delta": text},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": {"id": response_id, "status": "completed",
         "usage": {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}}},
    ]  # fmt: skip


@attrs.define
class WsVendor:
    """Scripted answers, one script per ``response.create``; what arrived, per connection."""

    scripts: list[Script] = attrs.field(factory=list)
    handshakes: list[tuple[str, dict[str, str]]] = attrs.field(factory=list)
    messages: list[tuple[int, Any]] = attrs.field(factory=list)  # (connection number, JSON)
    closed: list[int] = attrs.field(factory=list)
    changed: trio.Event = attrs.field(factory=trio.Event)
    port: int = 0

    async def wait_closed(self, count: int) -> None:
        """Until ``count`` connections have ended on the vendor's side."""
        with trio.fail_after(10):
            while len(self.closed) < count:
                await self.changed.wait()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/backend-api"

    async def handle(self, request: WebSocketRequest) -> None:
        headers = {k.decode().lower(): v.decode() for k, v in request.headers}
        self.handshakes.append((request.path, headers))
        number = len(self.handshakes)
        connection: WebSocketConnection = await request.accept()
        try:
            while True:
                message = await connection.get_message()
                self.messages.append((number, orjson.loads(message)))
                for step in self.scripts.pop(0):
                    if isinstance(step, tuple) and step[0] == "close":
                        await connection.aclose(code=step[1], reason=step[2])
                        return
                    if isinstance(step, tuple) and step[0] == "hang":
                        while True:  # until the client leaves (ConnectionClosed)
                            await connection.get_message()
                    await connection.send_message(orjson.dumps(step).decode())
        except Exception:  # the client went away: this connection is over
            pass
        finally:
            self.closed.append(number)
            self.changed.set()
            self.changed = trio.Event()


@asynccontextmanager
async def ws_vendor() -> AsyncIterator[WsVendor]:
    vendor = WsVendor()
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, vendor.handle, "127.0.0.1", 0, None)
        vendor.port = server.port
        with no_stray_cancel():
            yield vendor
        nursery.cancel_scope.cancel()


def codex(pool: HttpPool, transport: str = "auto") -> OpenAICodexResponsesProvider:
    creds = Credentials(auth_path=None, env={}, provider_keys={"test": TOKEN})
    return OpenAICodexResponsesProvider(pool, creds, ProviderSettings(transport=transport))


def context(*texts: str, answers: tuple[AssistantMessage, ...] = ()) -> LlmContext:
    messages: list[Any] = []
    for index, text in enumerate(texts):
        messages.append(user_message(text, timestamp=index + 1))
        if index < len(answers):
            messages.append(answers[index])
    return LlmContext(system_prompt="sys", messages=tuple(messages))


OPTIONS = StreamOptions(session_id="sess-1")


def texts(message: AssistantMessage) -> list[str]:
    return [block.text for block in message.content if isinstance(block, TextContent)]


# -- pure parts ------------------------------------------------------------------------------


def test_url_headers_and_close_texts() -> None:
    assert websocket_url("https://chatgpt.com/backend-api/codex/responses") == (
        "wss://chatgpt.com/backend-api/codex/responses"
    )
    assert websocket_url("http://127.0.0.1:8/codex/responses") == "ws://127.0.0.1:8/codex/responses"
    sse_headers = {"authorization": "Bearer t", "openai-beta": "responses=experimental",
                   "accept": "text/event-stream", "content-type": "application/json",
                   "originator": "pi", "session-id": "s"}  # fmt: skip
    assert handshake_headers(sse_headers, "s") == {
        "authorization": "Bearer t",
        "originator": "pi",
        "openai-beta": "responses_websockets=2026-02-06",
        "x-client-request-id": "s",
        "session-id": "s",
    }
    fresh = handshake_headers({}, None)
    assert fresh["session-id"] == fresh["x-client-request-id"] and len(fresh["session-id"]) == 36
    assert close_text(1011, "boom") == "WebSocket closed 1011 boom"
    assert close_text(1009, "") == "WebSocket closed 1009 message too big"
    assert close_text(1006, "") == "WebSocket closed 1006"


def test_a_continuation_sends_only_the_new_items() -> None:
    asked: list[Any] = [{"role": "user", "content": "a"}]
    first: dict[str, Any] = {"model": "m", "input": asked, "store": False}
    said = {"type": "message", "role": "assistant", "content": "b"}
    memory = Continuation(body=first, response_id="resp_1", items=(said,))
    new_user = {"role": "user", "content": "c"}
    follow: dict[str, Any] = {"model": "m", "input": [*asked, said, new_user], "store": False}
    assert continued_body(follow, memory) == {
        "model": "m", "input": [new_user], "store": False, "previous_response_id": "resp_1",
    }  # fmt: skip
    assert continued_body({**follow, "model": "other"}, memory) is None  # the rest changed
    edited = {**follow, "input": [{"role": "user", "content": "A"}, said, new_user]}
    assert continued_body(edited, memory) is None  # not an extension
    assert continued_body(first, memory) is None  # shorter than what was said


# -- over the wire ---------------------------------------------------------------------------


async def test_handshake_frame_and_answer(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts.append(answer("resp_1", "Hello"))
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        events = await collect(provider, model, context("hi"), OPTIONS)
        await provider.sockets.aclose()
    message = final(events)
    assert (message.stop_reason, texts(message)) == ("stop", ["Hello"])
    assert message.response_id == "resp_1" and message.usage.input == 7
    assert [e.type for e in events][:2] == ["start", "text_start"]
    path, headers = vendor.handshakes[0]
    assert path == "/backend-api/codex/responses"
    assert headers["authorization"] == f"Bearer {TOKEN}"
    assert headers["chatgpt-account-id"] == "acct-42"
    assert headers["openai-beta"] == "responses_websockets=2026-02-06"
    assert headers["session-id"] == headers["x-client-request-id"] == "sess-1"
    assert headers["originator"] == "pi" and headers["user-agent"].startswith("pi (")
    assert "accept" not in headers or headers["accept"] != "text/event-stream"
    _, frame = vendor.messages[0]
    assert frame["type"] == "response.create"
    assert {k: frame[k] for k in ("model", "store", "stream")} == {
        "model": "gpt-5.2-codex", "store": False, "stream": True,
    }  # fmt: skip
    assert "instructions" not in frame  # pi 1.6.0: the prompt is the first input item
    assert frame["input"] == [
        {"role": "system", "content": "sys"},  # not a reasoning model: "system"
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    assert frame["prompt_cache_key"] == "sess-1" and "previous_response_id" not in frame


@pytest.mark.parametrize("transport", ["auto", "websocket-cached", "websocket"])
async def test_a_session_keeps_its_connection(pool: HttpPool, transport: str) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts += [answer("resp_1", "one"), answer("resp_2", "two")]
        provider = codex(pool, transport)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        first = final(await collect(provider, model, context("a"), OPTIONS))
        second = final(await collect(provider, model, context("a", "b", answers=(first,)),
                                     OPTIONS))  # fmt: skip
        await provider.sockets.aclose()
        await vendor.wait_closed(1)
    assert texts(second) == ["two"]
    assert len(vendor.handshakes) == 1  # one connection for both requests
    (_, one), (_, two) = vendor.messages
    if transport == "websocket":  # no cached context: the whole input again
        # The whole input again: the system prompt's item, a, the answer, b.
        assert "previous_response_id" not in two and len(two["input"]) == 4
    else:
        assert two["previous_response_id"] == "resp_1"
        assert two["input"] == [{"role": "user", "content": [{"type": "input_text", "text": "b"}]}]
        assert {k: v for k, v in two.items() if k not in ("input", "previous_response_id")} == {
            k: v for k, v in one.items() if k != "input"
        }


async def test_an_idle_connection_expires(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts += [answer("resp_1", "one"), answer("resp_2", "two")]
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        first = final(await collect(provider, model, context("a"), OPTIONS))
        provider.sockets.by_session["sess-1"].idle_since -= 301  # pi keeps it 5 minutes
        await collect(provider, model, context("a", "b", answers=(first,)), OPTIONS)
        await provider.sockets.aclose()
    assert len(vendor.handshakes) == 2
    assert "previous_response_id" not in vendor.messages[1][1]  # a new connection: full body


async def test_another_sessions_request_closes_an_expired_connection(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts += [answer("resp_1", "one"), answer("resp_2", "two")]
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        await collect(provider, model, context("a"), OPTIONS)
        provider.sockets.by_session["sess-1"].idle_since -= 301  # an ended session's
        await collect(provider, model, context("a"), StreamOptions(session_id="sess-2"))
        assert list(provider.sockets.by_session) == ["sess-2"]
        await vendor.wait_closed(1)
        await provider.sockets.aclose()
    assert vendor.closed[0] == 1  # the first session's connection


async def test_without_a_session_each_request_has_its_own_connection(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts += [answer("resp_1", "one"), answer("resp_2", "two")]
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        for _ in range(2):
            await collect(provider, model, context("a"), StreamOptions())
        await vendor.wait_closed(2)  # each closed after its answer
    ids = [headers["session-id"] for _, headers in vendor.handshakes]
    assert len(ids) == 2 and ids[0] != ids[1]
    assert provider.sockets.by_session == {}


async def test_a_refused_handshake_falls_back_to_sse_for_the_session(
    server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording("openai_responses_text.sse").replace(b"response.completed", b"response.done")
    server.push(Reply(status=403, body=b"no", headers=[("content-type", "text/plain")]))
    server.push(sse(body), sse(body))
    provider = codex(pool)
    model = make_model(API, server.base_url, id="gpt-5.2-codex")
    first = final(await collect(provider, model, context("a"), OPTIONS))
    second = final(await collect(provider, model, context("b"), OPTIONS))
    assert first.stop_reason == second.stop_reason == "stop"
    # The upgrade, then SSE; the session's next request goes straight to SSE.
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/codex/responses"),
        ("POST", "/codex/responses"),
        ("POST", "/codex/responses"),
    ]
    assert server.requests[0].headers["upgrade"].lower() == "websocket"
    assert server.requests[1].headers["openai-beta"] == "responses=experimental"


async def test_a_close_after_the_first_event_fails_and_the_session_falls_back(
    pool: HttpPool,
) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts.append([*answer("resp_1", "Hel")[:4], ("close", 1011, "boom")])
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        events = await collect(provider, model, context("a"), OPTIONS)
    message = final(events)
    assert (message.stop_reason, message.error_message) == ("error", "WebSocket closed 1011 boom")
    assert texts(message) == ["Hel"]
    assert "sess-1" in provider.sockets.sse_sessions and provider.sockets.by_session == {}


async def test_a_codex_error_event_is_not_a_transport_failure(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts.append([{"type": "error", "code": "bad", "message": "Nope"}])
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        message = final(await collect(provider, model, context("a"), OPTIONS))
    assert (message.stop_reason, message.error_message) == ("error", "Codex error: Nope")
    assert provider.sockets.sse_sessions == set()  # no fallback: the vendor answered


async def test_sse_transport_never_opens_a_websocket(
    server: LoopbackServer, pool: HttpPool
) -> None:
    body = recording("openai_responses_text.sse")
    server.push(sse(body))
    model = make_model(API, server.base_url, id="gpt-5.2-codex")
    final(await collect(codex(pool, "sse"), model, context("a"), OPTIONS))
    assert [r.method for r in server.requests] == ["POST"]


async def test_an_abort_mid_stream_closes_the_connection(pool: HttpPool) -> None:
    async with ws_vendor() as vendor:
        vendor.scripts.append([*answer("resp_1", "Hel")[:4], ("hang",)])
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        send, receive = trio.open_memory_channel[AssistantMessageEvent](100)
        async with trio.open_nursery() as nursery:

            async def consume() -> None:
                async for event in receive:
                    if isinstance(event, TextDelta):
                        nursery.cancel_scope.cancel()

            nursery.start_soon(consume)
            await provider.stream(model, context("a"), OPTIONS, send)
        await vendor.wait_closed(1)
    assert provider.sockets.by_session == {}  # not kept for the next request


async def test_closing_the_pool_closes_the_kept_connections() -> None:
    pool = HttpPool()
    async with ws_vendor() as vendor:
        vendor.scripts.append(answer("resp_1", "one"))
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex")
        await collect(provider, model, context("a"), OPTIONS)
        assert list(provider.sockets.by_session) == ["sess-1"]
        await pool.aclose()  # what the model router does when it stops
        await vendor.wait_closed(1)
    assert provider.sockets.by_session == {}


async def test_after_a_tool_call_only_its_result_is_sent(pool: HttpPool) -> None:
    recorded = recording("openai_responses_reasoning_tools.sse")
    first_script = [orjson.loads(data) for _, data in split_sse(recorded)]
    async with ws_vendor() as vendor:
        vendor.scripts += [first_script, answer("resp_2", "done")]
        provider = codex(pool)
        model = make_model(API, vendor.url, id="gpt-5.2-codex", reasoning=True)
        asked = context("read it")
        called = final(await collect(provider, model, asked, OPTIONS))
        assert called.stop_reason == "toolUse"
        calls = [block for block in called.content if isinstance(block, ToolCall)]
        results = tuple(tool_result(call.id, f"body {n}") for n, call in enumerate(calls))
        follow = LlmContext(system_prompt="sys", messages=(*asked.messages, called, *results))
        await collect(provider, model, follow, OPTIONS)
        await provider.sockets.aclose()
    (_, one), (_, two) = vendor.messages
    assert two["previous_response_id"] == called.response_id
    # The answer's reasoning and calls are the server's already: only the results go.
    assert [item["type"] for item in two["input"]] == ["function_call_output"] * len(calls)
    assert [item["output"] for item in two["input"]] == [f"body {n}" for n in range(len(calls))]
    assert len(one["input"]) == 2  # the system prompt's item and the user's


async def test_wss_through_tls(pool: HttpPool, tmp_path: Path) -> None:
    import ssl

    from tests.actors.providers.test_transport import self_signed

    cert, server_context = await self_signed(tmp_path)
    vendor = WsVendor()
    vendor.scripts.append(answer("resp_1", "secure"))
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, vendor.handle, "127.0.0.1", 0, server_context)
        provider = codex(pool)
        provider._ssl = ssl.create_default_context(cafile=str(cert))  # trusts the test's CA
        model = make_model(API, f"https://localhost:{server.port}/backend-api", id="gpt-5.2-codex")
        message = final(await collect(provider, model, context("a"), OPTIONS))
        await provider.sockets.aclose()
        nursery.cancel_scope.cancel()
    assert texts(message) == ["secure"]
    assert vendor.handshakes[0][0] == "/backend-api/codex/responses"
