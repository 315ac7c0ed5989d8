"""The bridge of one ACP session on a scripted link (no session behind it): RPC responses
matched to calls, a prompt answered at the settle of its run, calls and prompts failing when
the link ends, malformed lines skipped."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.lowlevel
from trio_websocket import ConnectionClosed

from pitrio.transports.acp.bridge import Bridge
from pitrio.transports.acp.jsonrpc import RpcError
from pitrio.transports.acp.messages import Update


class ScriptedLink:
    """Commands sent are kept; lines are fed by the test."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.sent_event = trio.Event()
        self._send, self._receive = trio.open_memory_channel[str](16)

    async def send_message(self, message: str) -> None:
        self.sent.append(json.loads(message))
        self.sent_event.set()

    async def get_message(self) -> str:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise ConnectionClosed(None) from None

    async def aclose(self) -> None:
        await self._send.aclose()

    async def feed(self, *frames: dict[str, Any] | str) -> None:
        for frame in frames:
            await self._send.send(frame if isinstance(frame, str) else json.dumps(frame))

    async def next_sent(self) -> dict[str, Any]:
        while not self.sent:
            self.sent_event = trio.Event()
            await self.sent_event.wait()
        return self.sent.pop(0)


async def _no_ask(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError("no request expected")


async def test_a_prompt_is_answered_at_its_runs_settle_with_the_updates_before() -> None:
    link = ScriptedLink()
    updates: list[Update] = []

    async def notify(update: Update) -> None:
        updates.append(update)

    bridge = Bridge(link, "/w", notify, _no_ask)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bridge.read_frames, nursery)
        answer: list[str] = []
        answered = trio.Event()

        async def prompt() -> None:
            answer.append(await bridge.prompt("hi", (), steer=False))
            answered.set()

        nursery.start_soon(prompt)
        sent = await link.next_sent()
        assert (sent["type"], sent["message"], sent["streamingBehavior"]) == (
            "prompt",
            "hi",
            "followUp",
        )
        # The run settles before the prompt's response is read: still answered.
        await link.feed(
            {"type": "agent_start"},
            "not json",
            {
                "type": "message_update",
                "assistantMessageEvent": {"type": "text_delta", "delta": "Yo"},
            },
            {"type": "message_end", "message": {"role": "assistant", "stopReason": "length"}},
            {"type": "agent_settled", "aborted": False},
            {
                "type": "response",
                "id": sent["id"],
                "success": True,
                "data": {"disposition": "started"},
            },
        )
        with trio.fail_after(5):
            await answered.wait()
        assert answer == ["max_tokens"]
        assert [u.to_json() for u in updates] == [
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Yo"}}
        ]
        await link.aclose()


async def test_calls_and_prompts_fail_when_the_link_ends() -> None:
    link = ScriptedLink()

    async def notify(update: Update) -> None:
        pass

    bridge = Bridge(link, "/w", notify, _no_ask)
    failures: list[str] = []
    with trio.fail_after(5):
        await _fail_both(bridge, link, failures)
    assert failures == ["the session has ended"] * 2
    assert bridge.closed.is_set()


async def _fail_both(bridge: Bridge, link: ScriptedLink, failures: list[str]) -> None:
    """A call and a prompt in flight, then the link ends."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(bridge.read_frames, nursery)

        async def call() -> None:
            with pytest.raises(RpcError) as caught:
                await bridge.call({"type": "get_state"})
            failures.append(caught.value.message)

        async def prompt() -> None:
            with pytest.raises(RpcError) as caught:
                await bridge.prompt("x", (), steer=False)
            failures.append(caught.value.message)

        nursery.start_soon(call)
        nursery.start_soon(prompt)
        await link.next_sent()
        await link.next_sent()
        await link.aclose()
