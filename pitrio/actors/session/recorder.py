"""The event pump between an agent loop and its subscribers, persisting as it goes.

It receives the loop's events in order, hands each to every subscriber, and persists a message
once subscribers have its ``message_end`` (so observing ``message_end`` never implies the entry
is on disk, as in pi). Every run ends with exactly one ``agent_end``, so counting them gives the
number of the last run fully delivered and saved: :meth:`wait_run_end` waits for a run number
the agent loop handed out.
"""

from __future__ import annotations

import trio

from pitrio.actors.session_store.writer import SessionWriter
from pitrio.messages.agent import BashExecutionMessage, CustomMessage
from pitrio.messages.events import AgentEnd, AgentEvent, MessageEnd

SUBSCRIBER_BUFFER = 1024


class SessionRecorder:
    """Owned by one task (:meth:`pump`); others only subscribe or wait for run ends."""

    def __init__(self, writer: SessionWriter) -> None:
        self.writer = writer
        self._subscribers: list[trio.MemorySendChannel[AgentEvent]] = []
        self._runs_ended = 0
        self._run_ended = trio.Event()

    def subscribe(self, capacity: int = SUBSCRIBER_BUFFER) -> trio.MemoryReceiveChannel[AgentEvent]:
        """A channel of every event from now on; a full channel blocks the pump."""
        send, receive = trio.open_memory_channel[AgentEvent](capacity)
        self._subscribers.append(send)
        return receive

    @property
    def runs_ended(self) -> int:
        """How many runs' ``agent_end`` events have been delivered (their messages saved)."""
        return self._runs_ended

    async def wait_run_end(self, run: int) -> None:
        """Wait until run number ``run`` (1-based, as the agent loop numbers them) is recorded."""
        while self._runs_ended < run:
            await self._run_ended.wait()

    async def pump(
        self,
        events: trio.MemoryReceiveChannel[AgentEvent],
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Deliver and persist events until the loop closes the channel."""
        task_status.started()
        async with events:
            async for event in events:
                for subscriber in list(self._subscribers):
                    try:
                        await subscriber.send(event)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        self._subscribers.remove(subscriber)
                if isinstance(event, MessageEnd):
                    await self._persist(event)
                elif isinstance(event, AgentEnd):
                    self._runs_ended += 1
                    self._run_ended.set()
                    self._run_ended = trio.Event()
        for subscriber in self._subscribers:
            await subscriber.aclose()

    async def _persist(self, event: MessageEnd) -> None:
        message = event.message
        if isinstance(message, CustomMessage | BashExecutionMessage):
            return  # persisted by their own paths (custom_message entries, bash results)
        await trio.to_thread.run_sync(self.writer.append_message, message)
