"""The acceptor's relay of host events to one worker (``serve --workers``): in order, bounded,
and a worker that falls behind gets the loss notice in place of what was dropped."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from pitrio.transports.daemon.workers.relay import LOST, Relay


def _event(index: int) -> dict[str, Any]:
    return {"op": "host_event", "event": {"type": "session_busy", "sessionId": str(index)}}


async def test_events_go_out_in_order_and_overflow_becomes_one_loss_notice() -> None:
    relay = Relay(capacity=3)
    sent: list[dict[str, Any]] = []
    done = trio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if len(sent) == 5:
            done.set()

    for index in range(3):
        relay.put(_event(index))
    relay.put(_event(3))  # full: the three queued are dropped for the notice
    assert relay.dropped == 3
    async with trio.open_nursery() as nursery:
        nursery.start_soon(relay.run, send)
        relay.put(_event(4))  # the sender is waiting: taken at once, in order
        await trio.testing.wait_all_tasks_blocked()
        relay.put(_event(5))
        relay.put(_event(6))
        await done.wait()
        nursery.cancel_scope.cancel()
    assert sent == [LOST, _event(3), _event(4), _event(5), _event(6)]


def test_a_relay_holds_the_notice_and_one_event() -> None:
    with pytest.raises(ValueError):
        Relay(capacity=1)
