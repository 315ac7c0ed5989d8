"""The session's prompt funnel (spec §3.4.1 steps 2-4): prompts that need extension handlers.

Owned by the session actor and run in its nursery: a prompt naming an extension command, or
any prompt while ``input`` handlers exist, waits here in arrival order (and every prompt behind
one already here, to keep that order); one at a time, the extension host runs the handlers, and
what they leave of the prompt takes the ordinary prompt path. The handlers run in the host's
tasks, never in the session's inbox, so they may call back into the session.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio.actors.session.commands import Accepted, Prompt, Queue

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle


class PromptFunnel:
    """The prompts waiting for extension handlers, and the task that takes them in order."""

    def __init__(
        self,
        host: ExtensionHostHandle,
        prompt: Callable[[Prompt], Awaitable[None]],
        queue: Callable[[Queue], Awaitable[None]],
        seq: Callable[[], int],
        nursery: trio.Nursery,
    ) -> None:
        self._host = host
        self._prompt = prompt  # the ordinary prompt path, in the session's task
        self._queue = queue  # the ordinary steer / follow-up path
        self._seq = seq
        self._nursery = nursery
        self._waiting: deque[Prompt | Queue] = deque()
        self._busy = False

    def needs(self, command: Prompt) -> bool:
        """Whether ``command`` goes through the funnel."""
        if self._busy:
            return True  # keep arrival order behind a prompt already in the funnel
        return self._host.wants_funnel(command.text, command.expand)

    def needs_queue(self) -> bool:
        """Whether a steer or follow-up goes through the funnel (pi 1.6.0 runs the ``input``
        handlers on them too)."""
        return self._busy or self._host.has("input")

    def enter(self, command: Prompt | Queue) -> None:
        """Queue ``command``; start the funnel's task if it is idle."""
        self._waiting.append(command)
        if not self._busy:
            self._busy = True
            self._nursery.start_soon(self._drain)

    async def _drain(self) -> None:
        try:
            while self._waiting:
                await self._one(self._waiting.popleft())
        finally:
            self._busy = False

    async def _one(self, command: Prompt | Queue) -> None:
        host = self._host
        if isinstance(command, Queue):
            verdict = await host.input(command.text, command.images, command.source)
            if verdict is not None and verdict.action == "handled":
                command.reply.set(None)
                return
            if verdict is not None and verdict.action == "transform":
                command = attrs.evolve(
                    command,
                    text=verdict.text if verdict.text is not None else command.text,
                    images=verdict.images if verdict.images is not None else command.images,
                )
            await self._queue(attrs.evolve(command, filtered=True))
            return
        # An extension command runs beside everything else; the prompt is answered when its
        # handler returns.
        if (
            command.expand
            and command.text.startswith("/")
            and await host.run_command(command.text, command.accepted, command.settled)
        ):
            return
        result = await host.input(command.text, command.images, command.source)
        if result is not None:
            if result.action == "handled":
                command.accepted.set(Accepted(self._seq(), "handled"))
                command.settled.set(None)
                return
            if result.action == "transform":
                command = attrs.evolve(
                    command,
                    text=result.text if result.text is not None else command.text,
                    images=result.images if result.images is not None else command.images,
                )
        await self._prompt(command)
