"""Aborting a bedrock-converse-stream run, through the agent loop against a loopback Bedrock.

pi 0.73.1 (measured: pi-ai's ``streamBedrock`` on the AWS SDK's default HTTP/2 handler against
a loopback event-stream server) reports an abort before the response began with the SDK's
``Request aborted``, and one after it with its own ``Request was aborted``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router.providers.http import HttpPool
from pitrio.messages import AssistantMessage, TextContent
from pitrio.messages.events import MessageEnd, MessageUpdate
from pitrio.messages.model import Model
from tests.actors.providers import eventstream as es
from tests.actors.providers.loopback import loopback_server
from tests.actors.providers.support import make_model
from tests.actors.providers.test_bedrock_converse_stream import API, CLAUDE, provider
from tests.loopback_tcp import serving
from tests.stray_cancel import no_stray_cancel


@asynccontextmanager
async def bedrock_loop(pool: HttpPool, model: Model) -> AsyncIterator[AgentLoopHandle]:
    async with trio.open_nursery() as nursery:
        actor = AgentLoop(stream=provider(pool).stream, model=model)
        with no_stray_cancel():
            yield AgentLoopHandle(await nursery.start(actor.run))
        nursery.cancel_scope.cancel()


async def aborted_end(loop: AgentLoopHandle, *, when_streaming: bool) -> AssistantMessage:
    """Prompt, abort (once text streams, or once the request is out), the assistant's end."""
    events = await loop.subscribe(capacity=10_000)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop.prompt, "go")
        async for event in events:
            if (
                when_streaming
                and isinstance(event, MessageUpdate)
                and event.assistant_message_event.type == "text_delta"
            ):
                await loop.abort()
            if isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
                return event.message
    raise AssertionError("no assistant message")  # pragma: no cover


async def test_an_abort_before_bedrock_answers_has_the_sdks_wording(pool: HttpPool) -> None:
    arrived = trio.Event()

    async def silent(stream: trio.SocketStream) -> None:
        # Reads the request and never answers: the abort lands before any response header.
        await stream.receive_some(65536)
        arrived.set()
        await trio.sleep_forever()

    async with serving(silent) as port:
        model = make_model(API, f"http://127.0.0.1:{port}", id=CLAUDE)
        async with bedrock_loop(pool, model) as loop:
            with trio.fail_after(30):
                async with trio.open_nursery() as nursery:
                    result: list[AssistantMessage] = []

                    async def run() -> None:
                        result.append(await aborted_end(loop, when_streaming=False))

                    nursery.start_soon(run)
                    await arrived.wait()
                    await loop.abort()
    message = result[0]
    assert (message.stop_reason, message.error_message) == ("aborted", "Request aborted")
    assert message.content == ()


async def test_an_abort_mid_stream_has_pis_wording(pool: HttpPool) -> None:
    body = es.event("messageStart", {"role": "assistant"})
    body += es.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Hel"}})
    async with loopback_server() as server:
        server.push(es.stream_reply(body, ending="hang"))
        model = make_model(API, server.base_url, id=CLAUDE)
        async with bedrock_loop(pool, model) as loop:
            with trio.fail_after(30):
                message = await aborted_end(loop, when_streaming=True)
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    assert message.content == (TextContent(text="Hel"),)
