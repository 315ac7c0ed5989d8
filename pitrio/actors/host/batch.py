"""Merging the deltas the host relay finds queued together (issue 27).

The host relay drains every event its session subscription holds before relaying any, and
merges adjacent ``text_delta`` / ``thinking_delta`` / ``toolcall_delta`` updates of one content
block into one ``message_update`` (deltas concatenated, the later partial kept, the later
``seq``): the coalescing a daemon client's feed already applies when its queue is full
(``DESIGN.md`` §2), applied per wake-up of the relay. It never waits to make a batch: a delta
that arrives alone is relayed alone, so an unloaded daemon sends what it sent before, event for
event. Only daemon clients are fed through the host; the RPC stdio transport is not.

Only message deltas merge here; ``tool_execution_update``s, which the full-queue policy also
merges, are passed on one by one (they are few next to a reply's deltas).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import trio

from pitrio.actors.session.fanout import Sequenced, merge
from pitrio.messages.events import MessageUpdate


def merge_queued(items: Sequence[Sequenced]) -> list[Sequenced]:
    """``items`` (queued in this order) with every run of adjacent mergeable message deltas
    merged into one event carrying the run's last ``seq``; anything else kept as it is."""
    if len(items) < 2:
        return list(items)
    out: list[Sequenced] = [items[0]]
    for item in items[1:]:
        last = out[-1]
        if isinstance(item.event, MessageUpdate) and isinstance(last.event, MessageUpdate):
            merged = merge(last.event, item.event)
            if merged is not None:
                out[-1] = Sequenced(item.seq, merged)
                continue
        out.append(item)
    return out


async def relay_in_batches(
    events: trio.MemoryReceiveChannel[Sequenced],
    relay: Callable[[list[Sequenced], int], None],
) -> None:
    """Until ``events`` closes: at each wake-up, take every event queued, merge them
    (:func:`merge_queued`) and call ``relay`` with the events to relay and how many were
    merged away. Never waits for a second event: a lone one is relayed at once, unchanged."""
    async with events:
        async for item in events:
            batch = [item]
            while True:
                try:
                    batch.append(events.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
            relayed = merge_queued(batch) if len(batch) > 1 else batch
            relay(relayed, len(batch) - len(relayed))
