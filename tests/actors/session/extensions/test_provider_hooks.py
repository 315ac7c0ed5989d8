"""pi 1.6.0's provider-request hooks, end to end: a session whose extension registers an
``openai-completions`` provider served over real HTTP by the loopback vendor, with handlers
on ``context``, ``context_with_system``, ``before_provider_headers``,
``before_provider_request``, ``after_provider_response`` and ``provider_stream_event``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import trio
import trio.testing

import pitrio
from pitrio.messages.agent import AssistantMessage, SystemMessage
from pitrio.messages.content import text_of
from pitrio.messages.events import ExtensionError
from tests.actors import extension_probe
from tests.actors.providers.loopback import loopback_server, recording, sse
from tests.actors.test_session_extensions import agent_dir

__all__ = ["agent_dir"]  # the fixture, used by name

RECORDING = "openai_completions_text.sse"


def provider_block(base_url: str) -> dict[str, Any]:
    return {
        "baseUrl": f"{base_url}/v1",
        "api": "openai-completions",
        "apiKey": "local-key",
        "models": [{"id": "tiny", "contextWindow": 4096}],
    }


async def run_session(tmp_path: Path, setup: Any) -> tuple[list[Any], list[Any]]:
    """One prompt through the extension of ``setup``; the server's requests and the events."""
    extension_probe.setup = setup
    path = extension_probe.write_bridge(tmp_path / "exts")
    async with loopback_server() as server:
        server.push(sse(recording(RECORDING)))
        setup_with_provider = setup

        def full_setup(api: Any) -> None:
            api.register_provider("local", provider_block(server.base_url))
            setup_with_provider(api)

        extension_probe.setup = full_setup
        async with pitrio.create_session(
            cwd=str(tmp_path / "proj"),
            model="local/tiny",
            persist=False,
            extensions=[str(path)],
        ) as session:
            events = await session.subscribe()
            await session.prompt("hi")
            messages = await session.messages()
            seen = []
            while True:  # what the subscription holds (it is fed by a task of its own)
                await trio.testing.wait_all_tasks_blocked()
                try:
                    seen.append(events.receive_nowait().event)
                except trio.WouldBlock:
                    break
    reply = messages[-1]
    assert isinstance(reply, AssistantMessage)
    assert text_of(reply.content) == "Hello, world! Ünïcödé ✓"  # the stream was not changed
    return list(server.requests), seen


async def test_the_hooks_run_in_pis_order_and_change_the_request(
    tmp_path: Path, agent_dir: Path
) -> None:
    order: list[str] = []
    seen: dict[str, Any] = {}

    def setup(api: Any) -> None:
        def context(event: Any, ctx: Any) -> Any:
            order.append("context")
            seen["context_roles"] = [m.role for m in event.messages]
            return {"messages": list(event.messages)}  # a new list: the prompt is restored

        def with_system(event: Any, ctx: Any) -> None:
            order.append("context_with_system")
            seen["system_roles"] = [m.role for m in event.messages]

        def headers(event: Any, ctx: Any) -> None:
            order.append("before_provider_headers")
            event.headers["x-session-tag"] = "tagged"
            event.headers["authorization"] = None  # removed

        def payload_one(event: Any, ctx: Any) -> Any:
            order.append("before_provider_request")
            return {**event.payload, "temperature": 0}

        def payload_two(event: Any, ctx: Any) -> None:
            seen["chained"] = event.payload.get("temperature")
            event.payload["seed"] = 7  # in place, no return: still sent

        def response(event: Any, ctx: Any) -> None:
            order.append("after_provider_response")
            seen["status"] = event.status
            seen["content_type"] = event.headers.get("content-type")

        def stream_event(event: Any, ctx: Any) -> None:
            if not order or order[-1] != "provider_stream_event":
                order.append("provider_stream_event")
            seen.setdefault("stream", []).append(event)

        api.on("context", context)
        api.on("context_with_system", with_system)
        api.on("before_provider_headers", headers)
        api.on("before_provider_request", payload_one)
        api.on("before_provider_request", payload_two)
        api.on("after_provider_response", response)
        api.on("provider_stream_event", stream_event)

    requests, _ = await run_session(tmp_path, setup)
    assert order == [
        "context",
        "context_with_system",
        "before_provider_headers",
        "before_provider_request",
        "after_provider_response",
        "provider_stream_event",
    ]
    assert "system" not in seen["context_roles"]  # context sees no system message
    assert seen["system_roles"][0] == "system"  # context_with_system sees the head
    (request,) = requests
    assert request.headers["x-session-tag"] == "tagged"
    assert "authorization" not in request.headers
    body = request.json()
    assert (body["temperature"], body["seed"], seen["chained"]) == (0, 7, 0)
    assert body["messages"][0]["role"] == "system"  # the restored prompt was sent
    assert (seen["status"], seen["content_type"]) == (200, "text/event-stream")
    stream = seen["stream"]
    raw = [
        line[len("data: ") :]
        for line in recording(RECORDING).decode().splitlines()
        if line.startswith("data: ")
    ]
    assert [event.data for event in stream] == [
        orjson.loads(text) if text.startswith("{") else text for text in raw
    ]
    assert {(e.provider, e.api, e.model) for e in stream} == {
        ("local", "openai-completions", "tiny")
    }


async def test_context_with_system_owns_the_prompt_and_dropping_it_is_reported(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        def rewrite(event: Any, ctx: Any) -> Any:
            head = event.messages[0]
            assert isinstance(head, SystemMessage)
            replaced = SystemMessage(content="You are terse.", timestamp=head.timestamp)
            return {"messages": [replaced, *event.messages[1:]]}

        def drop(event: Any, ctx: Any) -> Any:
            return {"messages": [m for m in event.messages if m.role != "system"]}

        api.on("context_with_system", rewrite)
        api.on("context_with_system", drop)

    requests, events = await run_session(tmp_path, setup)
    body = requests[0].json()
    # The last list is sent as it is: no system message, so no prompt (pi 1.6.0's rule).
    assert [m["role"] for m in body["messages"]] == ["user"]
    (error,) = [e for e in events if isinstance(e, ExtensionError)]
    assert error.event == "context_with_system"
    assert "removed the leading system message" in error.error


async def test_without_provider_handlers_the_request_is_untouched(
    tmp_path: Path, agent_dir: Path
) -> None:
    def setup(api: Any) -> None:
        api.on("agent_start", lambda event, ctx: None)

    requests, _ = await run_session(tmp_path, setup)
    assert requests[0].headers["authorization"] == "Bearer local-key"
    assert "temperature" not in requests[0].json()
