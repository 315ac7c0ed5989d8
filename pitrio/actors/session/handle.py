"""Typed access to a session actor: one async method per command (``DESIGN.md`` §2)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from pitrio.actors._actor import Handle, Reply
from pitrio.actors.session.commands import (
    Abort,
    Accepted,
    Bash,
    ClearQueue,
    Compact,
    GetState,
    Invoke,
    Navigate,
    Prompt,
    PumpBarrier,
    PumpState,
    Queue,
    SessionCommand,
    SessionState,
    Stamped,
    StreamingBehavior,
    Subscribe,
    SubscribeInto,
    SubscribeSink,
    WaitForIdle,
)
from pitrio.actors.session.emitter import Sink
from pitrio.actors.session.extensions.asks import InputSource, Lifecycle, UiAnswer
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.operations import CycleResult, NavigationResult, SessionStats
from pitrio.actors.session_store.command_stamp import COMMAND_STAMP
from pitrio.messages.agent import AgentMessage, CustomMessage, ThinkingLevel
from pitrio.messages.content import ImageContent
from pitrio.messages.entries import CompactionResult
from pitrio.messages.model import Model

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.ui import UiResponse
    from pitrio.actors.session.target import SessionTarget
    from pitrio.actors.session.user_bash import BashResult  # named: a bash command's answer
    from pitrio.actors.session_store.tree import TreeNode

T = TypeVar("T")

DEFAULT_SUBSCRIBER_CAPACITY = 4096


class SessionHandle(Handle[SessionCommand]):
    """Typed access to a :class:`~pitrio.actors.session.actor.SessionActor`."""

    async def tell(self, command: SessionCommand) -> None:
        """Send ``command``; sent while a client command id is being applied (a transport's
        :func:`~pitrio.actors.session_store.command_stamp.stamping`), it carries the id to
        the entries it produces."""
        stamp = COMMAND_STAMP.get()
        if stamp is not None:
            if isinstance(command, Prompt | Queue):
                command = attrs.evolve(command, stamp=stamp)
            elif not isinstance(command, Stamped):
                command = Stamped(command, stamp)
        await super().tell(command)

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        expand: bool = True,
        source: InputSource = "interactive",
    ) -> None:
        """Send a prompt and return once its run settles (at once if it was only queued)."""
        settled, _ = await self.submit_with_seq(
            text, images=images, streaming_behavior=streaming_behavior, expand=expand, source=source
        )
        await settled.wait()

    async def submit(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        expand: bool = True,
        source: InputSource = "interactive",
    ) -> Reply[None]:
        """Send a prompt, return once it is accepted; the returned reply resolves at settle."""
        settled, _ = await self.submit_with_seq(
            text, images=images, streaming_behavior=streaming_behavior, expand=expand, source=source
        )
        return settled

    async def submit_with_seq(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
        expand: bool = True,
        source: InputSource = "interactive",
    ) -> tuple[Reply[None], Accepted]:
        """Like :meth:`submit`, also returning how the prompt was accepted: its disposition
        (``started``, ``queued``, ``handled``) and the ``seq`` of the last event emitted
        before, which a transport writes before the prompt's response."""
        accepted: Reply[Accepted] = self.new_reply()
        settled: Reply[None] = self.new_reply()
        await self.tell(
            Prompt(text, tuple(images), streaming_behavior, accepted, settled, expand, source)
        )
        return settled, await accepted.wait()

    async def extension_lifecycle(self, event: str, payload: Any) -> bool:
        """Run the extensions' ``session_before_*`` handlers (``True``: one cancelled) or
        ``session_shutdown`` handlers (``False`` once they ran)."""
        cancelled: bool = await self.ask(lambda reply: Lifecycle(event, payload, reply))
        return cancelled

    async def respond_ui(self, response: UiResponse) -> None:
        """Answer an extension's dialog (an ``extension_ui_request``); unknown ids are
        ignored."""
        await self.tell(UiAnswer(response))

    async def pump_barrier(self, messages: Sequence[AgentMessage]) -> PumpState:
        """Return once the session's event pump has processed every agent event sent so far,
        with the entry ids ``messages`` were recorded as (the extension host's hooks)."""
        return await self.ask(lambda reply: PumpBarrier(tuple(messages), reply))

    async def steer(
        self,
        text: str,
        images: Sequence[ImageContent] = (),
        *,
        source: InputSource = "interactive",
    ) -> str | None:
        """Queue a steering message; returns its queue id (see ``message_start.queueId``), or
        ``None`` when an extension's ``input`` handler took it."""
        return await self.ask(lambda reply: Queue(text, tuple(images), "steer", reply, source))

    async def follow_up(
        self,
        text: str,
        images: Sequence[ImageContent] = (),
        *,
        source: InputSource = "interactive",
    ) -> str | None:
        """Queue a follow-up message; returns its queue id (see ``message_start.queueId``),
        or ``None`` when an extension's ``input`` handler took it."""
        return await self.ask(lambda reply: Queue(text, tuple(images), "followUp", reply, source))

    async def clear_queue(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Empty both queues; returns the removed (steering, follow-up) texts."""
        return await self.ask(ClearQueue)

    async def abort(self, *, detach: bool = False) -> None:
        """Abort the active run and return once the session is idle; with ``detach`` the
        rest of the run (its aborted reply, its ``agent_end``) is not reported or recorded."""
        await self.ask(lambda reply: Abort(reply, detach=detach))

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        await self.ask(WaitForIdle)

    async def state(self) -> SessionState:
        """A snapshot of the session."""
        return await self.ask(GetState)

    async def invoke(self, operation: Callable[[SessionTarget], Awaitable[T]]) -> T:
        """Run one of the actor's operations in its task and return the result."""
        result: T = await self.ask(lambda reply: Invoke(operation, reply))
        return result

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult:
        """Compact now (aborting a run first); raises pi's errors when there is nothing to do."""
        return await self.ask(lambda reply: Compact(custom_instructions, reply))

    async def set_model(self, provider: str, model_id: str) -> Model:
        """Switch to an available model; raises ``Model not found: p/id``."""
        return await self.invoke(lambda actor: actor.operations.set_model(provider, model_id))

    async def cycle_model(self) -> CycleResult | None:
        """Switch to the next model; ``None`` when there is only one."""
        return await self.invoke(lambda actor: actor.operations.cycle_model())

    async def set_thinking_level(self, level: str) -> ThinkingLevel:
        """Set the thinking level (clamped to the model); returns the effective level."""
        return await self.invoke(lambda actor: actor.operations.set_thinking_level(level))

    async def cycle_thinking_level(self) -> ThinkingLevel | None:
        """The next thinking level; ``None`` when the model does not reason."""
        return await self.invoke(lambda actor: actor.operations.cycle_thinking_level())

    async def set_queue_mode(
        self, kind: Literal["steering", "followUp"], mode: Literal["all", "one-at-a-time"]
    ) -> None:
        """Set the steering or follow-up delivery mode (persisted)."""
        await self.invoke(lambda actor: actor.operations.set_queue_mode(kind, mode))

    async def set_auto_compaction(self, enabled: bool) -> None:
        """Turn automatic compaction on or off (persisted)."""
        await self.invoke(lambda actor: actor.operations.set_auto_compaction(enabled))

    async def set_auto_retry(self, enabled: bool) -> None:
        """Turn automatic retry on or off (persisted)."""
        await self.invoke(lambda actor: actor.operations.set_auto_retry(enabled))

    async def abort_retry(self) -> None:
        """Cancel a pending retry sleep (no-op when not retrying)."""
        await self.invoke(lambda actor: actor.abort_retry())

    async def set_session_name(self, name: str) -> str:
        """Name the session; raises ``Session name cannot be empty``."""
        return await self.invoke(lambda actor: actor.operations.set_session_name(name))

    async def bash(
        self,
        command: str,
        *,
        exclude_from_context: bool | None = None,
        accepted: Callable[[], None] | None = None,
        stream_id: str | None = None,
    ) -> BashResult:
        """Run a user shell command; its output reaches the model with the next request
        (unless ``exclude_from_context``).

        ``accepted`` is called once the command is in the session's inbox: an
        :meth:`abort_bash` sent after that is handled after it, so it cancels it.
        ``stream_id`` is the ``id`` of its ``bash_execution_update`` events."""
        reply: Reply[BashResult] = self.new_reply()
        await self.tell(Bash(command, exclude_from_context, reply, stream_id))
        if accepted is not None:
            accepted()
        return await reply.wait()

    async def abort_bash(self) -> None:
        """Cancel the running user command (its result then says ``cancelled``)."""
        await self.invoke(lambda actor: actor.abort_bash())

    async def export_html(self, output_path: str | None = None) -> str:
        """Export the session as an HTML page; returns the path written."""
        return await self.invoke(lambda actor: actor.queries.export_html(output_path))

    async def export_jsonl(self, output_path: str | None = None) -> str:
        """Export the current branch as a JSONL file; returns the path written."""
        return await self.invoke(lambda actor: actor.queries.export_jsonl(output_path))

    async def entry_lines(self) -> tuple[list[tuple[str, bytes]], str | None]:
        """Every entry of the session file as (id, JSON), in append order (all branches and
        the history before a compaction; not the header), and the leaf id."""
        return await self.invoke(lambda actor: actor.queries.entry_lines())

    async def tree(self) -> tuple[list[TreeNode], str | None]:
        """The session tree (pi's ``getTree``: roots, children by timestamp, labels) and the
        leaf id."""
        return await self.invoke(lambda actor: actor.queries.tree())

    async def available_thinking_levels(self) -> tuple[ThinkingLevel, ...]:
        """The levels the current model supports (``("off",)`` without reasoning)."""
        return await self.invoke(lambda actor: actor.operations.available_thinking_levels())

    async def fork_messages(self) -> list[tuple[str, str]]:
        """The user messages a fork may start before: (entry id, text)."""
        return await self.invoke(lambda actor: actor.queries.fork_messages())

    async def navigate_tree(
        self,
        target_id: str,
        *,
        summarize: bool = False,
        custom_instructions: str | None = None,
        replace_instructions: bool = False,
        label: str | None = None,
    ) -> NavigationResult:
        """Move to another point of the session tree, optionally summarizing the branch left."""
        return await self.ask(
            lambda reply: Navigate(
                target_id, summarize, custom_instructions, replace_instructions, label, reply
            )
        )

    async def send_custom_message(
        self,
        message: CustomMessage,
        *,
        trigger_turn: bool = False,
        deliver_as: Literal["steer", "followUp", "nextTurn"] | None = None,
    ) -> None:
        """Send an extension's custom message (it reaches the model as a user message)."""
        await self.invoke(
            lambda actor: actor.send_custom_message(
                message, trigger_turn=trigger_turn, deliver_as=deliver_as
            )
        )

    async def commands(self) -> list[dict[str, Any]]:
        """The prompt templates and skills a prompt can invoke (``get_commands``)."""
        return await self.invoke(lambda actor: actor.commands())

    async def last_assistant_text(self) -> str | None:
        """The last assistant reply's text, or ``None``."""
        return await self.invoke(lambda actor: actor.queries.last_assistant_text())

    async def emitted_seq(self) -> int:
        """The ``seq`` of the last event emitted so far: a response barrier for transports."""
        return await self.invoke(lambda actor: actor.emitted_seq())

    async def cache_warming(self) -> dict[str, Any]:
        """The prompt-cache warmer's ``mode``, ``status`` line and, when known, the
        decision's ``missCost`` and ``warmCost`` (pi's ``/session`` block)."""
        return await self.invoke(lambda actor: actor.queries.cache_warming())

    async def session_stats(self) -> SessionStats:
        """Counts, tokens and cost over the current context."""
        return await self.invoke(lambda actor: actor.operations.stats())

    async def set_prompt_section(self, name: str, text: str | None) -> None:
        """Replace (``None``: remove) a prompt section the session's parts add (MCP's
        ``mcp_servers``); the next run's system prompt has it."""
        await self.invoke(lambda actor: actor.set_prompt_section(name, text))

    async def notify(self, message: str, notify_type: str = "info") -> None:
        """Tell the clients ``message`` as an extension's ``ctx.ui.notify`` does (pi 1.6.0's
        built-in MCP extension reports its servers' problems so)."""
        await self.invoke(lambda actor: actor.notify(message, notify_type))

    async def models(self, which: Literal["all", "available"]) -> tuple[Model, ...]:
        """The registry's models, or those usable (with credentials)."""
        return await self.invoke(lambda actor: actor.operations.models(which))

    async def messages(self) -> tuple[AgentMessage, ...]:
        """The agent's current messages (the context, custom roles included)."""
        messages = await (await self.state()).agent.load_messages()
        # The SDK's documented type; the state's snapshot is copied only when asked for.
        return messages if isinstance(messages, tuple) else tuple(messages)

    async def messages_json(self) -> Sequence[Any]:
        """:meth:`messages` as plain JSON values, built as they are read: a resumed session's
        stored messages come from their lines without being decoded (``get_messages``)."""
        return (await self.state()).agent.messages_json()

    async def subscribe(
        self, capacity: int = DEFAULT_SUBSCRIBER_CAPACITY
    ) -> trio.MemoryReceiveChannel[Sequenced]:
        """Every event from now on with its ``seq``; a subscriber that falls too far behind
        is coalesced, then disconnected (its channel closes)."""
        return await self.ask(lambda reply: Subscribe(capacity, reply))

    async def subscribe_into(
        self,
        send: trio.MemorySendChannel[Sequenced],
        capacity: int = DEFAULT_SUBSCRIBER_CAPACITY,
        *,
        runs: bool = False,
    ) -> None:
        """Like :meth:`subscribe`, delivering into ``send`` (e.g. a clone of a channel that
        outlives this session); ``send`` is closed when delivery ends. Saves the relay task a
        caller would otherwise run between the two channels. With ``runs``, a run of
        streamed deltas comes as one ``SequencedRun`` item, which the caller expands
        (issue 38); else every delta is its own item."""
        await self.ask(lambda reply: SubscribeInto(capacity, send, reply, runs))

    async def subscribe_sink(
        self, deliver: Callable[[Sequenced], None], ended: Callable[[], None]
    ) -> None:
        """Have every event from now on handed to ``deliver``, in the emitting task, as it is
        emitted; ``ended()`` once delivery ends. For a subscriber that never blocks (the
        host's relay): no buffer, channel or task between the two (issue 38)."""
        await self.ask(lambda reply: SubscribeSink(Sink(deliver, ended), reply))
