"""The provider's end of a response's stream: the channel, and a way past it for a delta.

A streamed delta crosses the provider → agent loop channel as a hand-over and a wake-up of
the loop's task (issue 38, the daemon target: a delta of a paced reply is alone at each
wake-up, so nothing batches it). The provider runs in a task of the loop's own run nursery
(``ModelRouterHandle.stream`` streams in the calling task), so taking the delta there keeps
the loop's state with the loop's tasks. :class:`StreamIntake` stands in for the channel's
send end (the providers use only ``send`` and ``send_nowait``): while the loop waits on the
empty channel it opens :attr:`StreamIntake.take_now`, which takes a delta in the provider's
task (the loop's bookkeeping for it, and its emission when the lone subscriber's channel is
empty) and says whether it did. Anything it does not take goes through the channel as
before, and from then on every event does, until the loop waits on the empty channel again
and opens it anew: an event handed to the loop but not yet taken is never overtaken, and a
burst queues and goes out in the loop's batches.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import trio

from pitrio._direct_init import direct_init
from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.delta_run import DeltaRun, StreamItem, UpdateItem
from pitrio.messages.events import MessageUpdate
from pitrio.messages.stream import TextDelta, ThinkingDelta, ToolCallDelta


class _Context(Protocol):
    """What the intake needs of the run's context (``context.RunContext``)."""

    def set_last(self, message: AssistantMessage) -> None:
        """Replace the last message (the response streaming) with ``message``."""


TakeNow = Callable[[StreamItem], bool]
"""Takes one event in the caller's task, or refuses it (``False``: nothing was done)."""
EmitUpdatesNow = Callable[[tuple[UpdateItem, ...]], bool]
"""Emits updates in the caller's task without a checkpoint when it can; whether it did
(``False``: nothing was emitted)."""

DELTAS = frozenset((TextDelta, ThinkingDelta, ToolCallDelta))
"""The stream events that add to an open block and open or close none."""

message_update = direct_init(MessageUpdate)
"""``MessageUpdate(assistant_message_event=..., message=...)`` at half the cost: one is made
per streamed delta, here or in the loop's own task (issue 38)."""


class StreamIntake:
    """The stream channel's send end for a provider, with the loop's direct intake. It takes
    a run of deltas whole (:class:`~pitrio.messages.delta_run.DeltaRun`, issue 38)."""

    __slots__ = ("channel", "take_now")

    takes_runs = True
    """A provider may send :class:`DeltaRun` items (see ``delta_run.RunSender``)."""

    def __init__(self, channel: trio.MemorySendChannel[StreamItem]) -> None:
        self.channel = channel
        self.take_now: TakeNow | None = None
        """Set by the loop while it waits on the empty channel (see the module doc)."""

    def send_nowait(self, event: StreamItem) -> None:
        """The channel's ``send_nowait``, unless the loop takes ``event`` at once."""
        take_now = self.take_now
        if take_now is not None and take_now(event):
            return
        self.take_now = None  # through the channel: nothing may overtake it
        self.channel.send_nowait(event)

    async def send(self, event: StreamItem) -> None:
        """The channel's ``send`` (a checkpoint, waiting for room), unless the loop takes
        ``event`` at once (a checkpoint all the same)."""
        take_now = self.take_now
        if take_now is None:
            await self.channel.send(event)
            return
        # The channel's checkpoints around a hand-over: cancelled before, nothing is sent.
        await trio.lowlevel.checkpoint_if_cancelled()  # never yields when not cancelled
        if take_now(event):
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        self.take_now = None
        await self.channel.send(event)


def delta_intake(
    emit_now: EmitUpdatesNow, abort: RunAbort, context: _Context, taken: list[AssistantMessage]
) -> TakeNow:
    """The loop's intake of a delta in the provider's task, while it waits on the empty
    channel of an announced response: what the loop does with a delta it takes from the
    channel and flushes before its next wait, when the update can go out at once
    (``emit_now``); ``False`` (nothing done) for any other event, after an abort, or when a
    subscriber cannot. The delta's partial is kept in ``taken`` (the last one only: a paced
    reply may pass every delta here without the loop waking) for the loop to read when it
    wakes."""

    def take_now(event: StreamItem) -> bool:
        if abort.aborted:
            return False
        kind = type(event)
        update: UpdateItem
        if kind is DeltaRun:  # a run goes on whole: its updates are made by who needs them
            partial = event.last_partial  # type: ignore[union-attr]
            update = event  # type: ignore[assignment]
        elif kind in DELTAS:
            partial = event.partial  # type: ignore[union-attr]
            update = message_update(assistant_message_event=event, message=partial)
        else:
            return False
        if not emit_now((update,)):
            return False
        context.set_last(partial)
        taken[:1] = [partial]  # bounded: only the latest is read
        return True

    return take_now


__all__ = [
    "DELTAS",
    "EmitUpdatesNow",
    "StreamIntake",
    "TakeNow",
    "delta_intake",
    "message_update",
]
