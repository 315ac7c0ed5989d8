"""The ordinary prompt path: a prompt starts a run or is queued, a steer or follow-up is
queued, after ``/skill:`` and prompt-template expansion and with its images fitted.

Split from :mod:`.actor`: the actor owns one :class:`PromptIntake`, made with its run driver,
and calls it from its inbox (and the extension funnel calls it, in the actor's task too).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio.actors.session.commands import (
    Accepted,
    Prompt,
    Queue,
    SessionBusyError,
    StreamingBehavior,
)
from pitrio.actors.session.policy import STREAMING_WITHOUT_BEHAVIOR
from pitrio.actors.session.resources.loader import Resources, expand_input
from pitrio.actors.session_store.command_stamp import CommandStamp
from pitrio.actors.tool_executor.tools.images import normalize_prompt_images
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import UserMessage, user_message
from pitrio.messages.content import ImageContent

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session.driver import RunDriver
    from pitrio.actors.session.pump import EventPump
    from pitrio.actors.session.queues import DisplayQueues


@attrs.frozen(slots=True)
class PromptIntake:
    """Takes prompts, steers and follow-ups in for one session (in its actor's task)."""

    driver: RunDriver
    loop: AgentLoopHandle
    pump: EventPump
    queues: DisplayQueues
    auto_resize_images: bool
    resources: Callable[[], Resources | None]  # the session's, as they are now
    seq: Callable[[], int]  # the ``seq`` of the last event emitted

    async def expand(self, text: str) -> str:
        """``/skill:`` and prompt-template expansion (file reads happen in a thread)."""
        resources = self.resources()
        if resources is None or not text.startswith("/"):
            return text
        return await trio.to_thread.run_sync(lambda: expand_input(text, resources))

    async def prompt(self, command: Prompt) -> None:
        """Start a run with the prompt, queue it while one runs, or refuse it."""
        failure = self.driver.write_failure
        if failure is not None:  # nothing could be recorded: refuse, say why
            refused = ReadOnlySessionError(str(failure))
            command.accepted.fail(refused)
            command.settled.fail(refused)
            return
        if command.expand:
            expanded = await self.expand(command.text)
            if expanded is not command.text:  # most prompts: no copy of the command
                command = attrs.evolve(command, text=expanded)
        if self.driver.current is not None:
            if command.streaming_behavior is None:
                command.accepted.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                command.settled.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                return
            await self.queue(
                command.text, command.images, command.streaming_behavior, command.stamp
            )
            command.accepted.set(Accepted(self.seq(), "queued"))
            command.settled.set(None)
            return
        message = self.user_message(command.text, command.images, command.stamp)
        self.driver.start_prompt(message, command.accepted, command.settled)

    async def queue_command(self, command: Queue) -> None:
        """Queue what the ``input`` handlers left of a steer or follow-up."""
        text = await self.expand(command.text)
        command.reply.set(await self.queue(text, command.images, command.kind, command.stamp))

    def user_message(
        self, text: str, images: tuple[ImageContent, ...], stamp: CommandStamp | None = None
    ) -> UserMessage:
        """A prompt's user message, its images fitted or left out with a note (pi 1.6.0);
        with ``stamp``, its entry will carry the client's command id."""
        text, images = normalize_prompt_images(text, images, auto_resize=self.auto_resize_images)
        message = user_message(text, images)
        if stamp is not None:
            self.pump.stamp(message, stamp)
        return message

    async def queue(
        self,
        text: str,
        images: tuple[ImageContent, ...],
        kind: StreamingBehavior,
        stamp: CommandStamp | None = None,
    ) -> str:
        """Queue a steer or follow-up with the agent loop and on the display; its id."""
        message = self.user_message(text, images, stamp)
        queue_id = secrets.token_hex(6)
        # The agent loop holds the message before the display says so: a run that sees a
        # queued text may continue and find the message there.
        if kind == "followUp":
            await self.loop.follow_up(message)
        else:
            await self.loop.steer(message)
        self.queues.add(kind == "followUp", text, queue_id)
        return queue_id
