"""Typed access to the agent loop: :class:`AgentLoopHandle` turns calls into commands."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import trio

from pitrio.actors._actor import Handle
from pitrio.actors.agent_loop.commands import (
    KEEP,
    Abort,
    AgentCommand,
    ClearQueues,
    Configure,
    Continue,
    FollowUp,
    GetRunFacts,
    GetState,
    Keep,
    LoopFacts,
    LoopFeed,
    Prompt,
    ReplaceMessage,
    Reset,
    RunEndFacts,
    RunFacts,
    RunResult,
    SetMessages,
    Steer,
    Subscribe,
    WaitForIdle,
)
from pitrio.actors.agent_loop.hooks import LoopHooks, LoopOptions
from pitrio.actors.agent_loop.state import AgentState
from pitrio.actors.latest import LatestReader
from pitrio.messages.agent import AgentMessage, ThinkingLevel, user_message
from pitrio.messages.content import ImageContent
from pitrio.messages.events import AgentEvent
from pitrio.messages.model import Model


class AgentLoopHandle(Handle[AgentCommand]):
    """Typed access to an :class:`~pitrio.actors.agent_loop.actor.AgentLoop`."""

    async def prompt(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] = (),
    ) -> tuple[AgentMessage, ...]:
        """Run the loop on a prompt; returns the run's new messages when it ends.

        Raises :class:`~pitrio.errors.AgentBusyError` while another run is active.
        """
        if isinstance(prompt, str):
            messages: tuple[AgentMessage, ...] = (user_message(prompt, tuple(images)),)
        elif isinstance(prompt, list | tuple):
            messages = tuple(cast("Sequence[AgentMessage]", prompt))
        else:
            messages = (cast("AgentMessage", prompt),)
        return (await self.run_prompt(messages)).messages

    async def run_prompt(self, messages: Sequence[AgentMessage]) -> RunResult:
        """Like :meth:`prompt`, returning the run's number as well as its new messages."""
        return await self.ask(lambda reply: Prompt(tuple(messages), reply))

    async def continue_(self) -> tuple[AgentMessage, ...]:
        """Continue from the current transcript (spec §2.5); returns the run's new messages."""
        return (await self.run_continue()).messages

    async def run_continue(self) -> RunResult:
        """Like :meth:`continue_`, returning the run's number as well as its new messages."""
        return await self.ask(Continue)

    async def steer(self, message: str | AgentMessage) -> None:
        """Queue a steering message (delivered after the current turn)."""
        msg = user_message(message) if isinstance(message, str) else message
        await self.ask(lambda reply: Steer(msg, reply))

    async def follow_up(self, message: str | AgentMessage) -> None:
        """Queue a follow-up message (delivered when the agent would stop)."""
        msg = user_message(message) if isinstance(message, str) else message
        await self.ask(lambda reply: FollowUp(msg, reply))

    async def clear_queues(
        self, *, steering: bool = True, follow_up: bool = True
    ) -> tuple[AgentMessage, ...]:
        """Empty the queues; returns the removed messages."""
        return await self.ask(lambda reply: ClearQueues(steering, follow_up, reply))

    async def abort(self) -> None:
        """Abort the active run, if any, and return once the agent is idle."""
        await self.ask(Abort)

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        await self.ask(WaitForIdle)

    async def state(self) -> AgentState:
        """A snapshot of the agent's state."""
        return await self.ask(GetState)

    async def run_facts(self) -> RunFacts:
        """The model, the last assistant message and whether messages are queued."""
        return await self.ask(GetRunFacts)

    def facts(self) -> LoopFacts:
        """The model and the last assistant message as the loop last published them: no
        round trip (a change made by a command the caller awaited is included)."""
        self._check_alive()
        reader: LatestReader[LoopFacts] = self._address.published
        return reader.get()

    async def configure(
        self,
        *,
        system_prompt: str | None = None,
        model: Model | None = None,
        thinking_level: ThinkingLevel | None = None,
        options: LoopOptions | None = None,
        hooks: LoopHooks | None = None,
        forced_system_prompt: str | Keep | None = KEEP,
    ) -> None:
        """Change settings; the next run uses them (``forced_system_prompt``: a prompt sent
        instead of the transcript's, ``None`` for the transcript's again)."""
        await self.ask(
            lambda reply: Configure(
                system_prompt=system_prompt,
                model=model,
                thinking_level=thinking_level,
                options=options,
                hooks=hooks,
                forced_system_prompt=forced_system_prompt,
                reply=reply,
            )
        )

    async def set_messages(self, messages: Sequence[AgentMessage]) -> None:
        """Replace the transcript with a copy of ``messages``."""
        await self.ask(lambda reply: SetMessages(tuple(messages), False, reply))

    async def replace_message(self, old: AgentMessage, new: AgentMessage) -> bool:
        """Replace ``old`` (by identity) with ``new`` in the transcript; whether it was there."""
        found: bool = await self.ask(lambda reply: ReplaceMessage(old, new, reply))
        return found

    async def append_message(self, message: AgentMessage) -> None:
        """Append one message to the transcript."""
        await self.ask(lambda reply: SetMessages((message,), True, reply))

    async def reset(self) -> None:
        """Clear transcript, error, streaming state and queues."""
        await self.ask(Reset)

    async def subscribe(self, capacity: int = 256) -> trio.MemoryReceiveChannel[AgentEvent]:
        """A channel receiving every event from now on; a full channel blocks the loop."""
        channel: trio.MemoryReceiveChannel[AgentEvent] = await self.ask(
            lambda reply: Subscribe(capacity, reply)
        )
        return channel

    async def subscribe_with_facts(
        self, capacity: int = 256
    ) -> trio.MemoryReceiveChannel[AgentEvent | RunEndFacts]:
        """Like :meth:`subscribe`, with a :class:`RunEndFacts` right before each ``agent_end``."""
        channel: trio.MemoryReceiveChannel[AgentEvent | RunEndFacts] = await self.ask(
            lambda reply: Subscribe(capacity, reply, run_facts=True)
        )
        return channel

    async def subscribe_batched(self, capacity: int = 256) -> LoopFeed:
        """Like :meth:`subscribe_with_facts`, with the streamed updates the loop takes at one
        wake-up as one :class:`UpdateBatch` (see its contract), and the loop's count of the
        events sent (the session's pump: one hand-over per batch instead of per delta)."""
        feed: LoopFeed = await self.ask(
            lambda reply: Subscribe(capacity, reply, run_facts=True, batches=True)
        )
        return feed
