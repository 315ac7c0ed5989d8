"""Typed access to an :class:`~pitrio.actors.session.extensions.host.ExtensionHost`.

What can be answered from the host's published :class:`~.host.HostPort` is answered in the
caller's task without a message: whether any handler wants an event, which extension command a
prompt names, the notification queue (a session's inbox queues notifications without waiting).
A call that runs handlers costs one message, and only when a handler wants the event, so a
plain turn of a session whose extensions do not listen costs nothing more.

A call that runs handlers hands the host a fresh cancel scope with the command; if the caller is
cancelled (abort reaching the loop's hook, say) it cancels that scope and waits, shielded, for
the host's task to unwind: handlers are cancelled with the run that awaited them and have
finished unwinding when the caller goes on, as when they ran in the caller's task.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from pitrio.actors._actor import Handle, Reply
from pitrio.actors.agent_loop import LoopHooks
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TurnContext,
)
from pitrio.actors.session.extensions.events import (
    BeforeTreeResult,
    CacheWarmingDecisionEvent,
    DiscoveredPaths,
    InputResult,
    InputSource,
    ProviderResponseEvent,
    ProviderStreamEvent,
    ResourcesDiscoverEvent,
    SessionBeforeTreeEvent,
    SessionTreeEvent,
    TreePreparation,
    UserBashEvent,
    UserBashResult,
)
from pitrio.actors.session.extensions.host_commands import (
    Accepted,
    AfterCompact,
    AfterTree,
    BeforeAgentStart,
    BeforeCompact,
    BeforeTree,
    DiscoverResources,
    Emit,
    HostCommand,
    Input,
    Lifecycle,
    ProviderStage,
    RunCommand,
    SetBasePrompt,
    SettleBoundary,
    ToolCall,
    ToolResult,
    TransformContext,
    TurnBoundary,
    UiAnswer,
    UserBash,
    WarmingDecision,
    Work,
    WorkCommand,
    queue_notification,
)
from pitrio.actors.supervisor.compaction import CompactionPreparation
from pitrio.messages.agent import AgentMessage, CustomMessage
from pitrio.messages.content import ImageContent
from pitrio.messages.entries import CompactionEntry, CompactionResult, SessionEntry
from pitrio.messages.events import AgentEvent, TurnEnd

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host import HostPort

T = TypeVar("T")


def split_command(text: str) -> tuple[str, str]:
    """``/name args`` as (name, args)."""
    body = text[1:]
    name, _, args = body.partition(" ")
    return name, args


def queued_command_error(name: str) -> str:
    """pi's refusal of an extension command sent as steer / follow-up."""
    return (
        f'Extension command "/{name}" cannot be queued. Use prompt() or execute the command '
        "when not streaming."
    )


class ExtensionHostHandle(Handle[HostCommand]):
    """Typed access to a session's extension host."""

    @property
    def _port(self) -> HostPort:
        port: HostPort = self._address.published
        return port

    async def _run(self, make: Callable[[Work], WorkCommand]) -> Any:
        """Send a handler-running command and await its answer (see the module's docstring)."""
        reply: Reply[Any] = self.new_reply()
        scope = trio.CancelScope()
        await self.tell(make(Work(reply, scope)))
        try:
            return await reply.wait()
        except trio.Cancelled:
            scope.cancel()
            with trio.CancelScope(shield=True), suppress(Exception):
                await reply.wait()  # the handlers have unwound
            raise

    # -- what is answered without a message ----------------------------------------------------

    def has(self, event: str) -> bool:
        """Whether any extension handles ``event``."""
        return self._port.registry.has(event)

    def command_name(self, text: str) -> str | None:
        """The name of the extension command ``text`` invokes, if any."""
        if not text.startswith("/"):
            return None
        name, _ = split_command(text)
        return name if self._port.registry.command(name) is not None else None

    def wants_funnel(self, text: str, expand: bool) -> bool:
        """Whether a prompt needs extension handlers (an extension command, ``input``)."""
        if expand and self.command_name(text) is not None:
            return True
        return self.has("input")

    def commands(self) -> list[dict[str, Any]]:
        """Extension commands as ``get_commands`` lists them (before templates and skills)."""
        out: list[dict[str, Any]] = []
        for name, command in self._port.registry.commands():
            entry: dict[str, Any] = {"name": name}
            if command.description:
                entry["description"] = command.description
            entry["source"] = "extension"
            entry["sourceInfo"] = command.extension.source_info.to_json()
            out.append(entry)
        return out

    def notify(self, event: str, payload: Any) -> None:
        """Queue a notification-only event for the extensions (never waits: safe from an
        inbox task); a full queue drops it, reported as an ``extension_error``."""
        port = self._port
        queue_notification(port.registry, port.notify, event, payload)

    def wants_settle_boundary(self) -> bool:
        """Whether the run's end needs the ``agent_before_settle`` boundary."""
        return self._port.boundary_continue.get() or self.has("agent_before_settle")

    # -- the session's calls --------------------------------------------------------------------

    async def answer(self, response: UiAnswer) -> None:
        """A client's answer to a dialog."""
        await self.tell(response)

    async def lifecycle(self, command: Lifecycle) -> None:
        """A ``session_before_*`` or ``session_shutdown`` event (``command.reply`` answers)."""
        await self.tell(command)

    async def set_base_prompt(self, prompt: str) -> None:
        """The system prompt ``before_agent_start`` handlers chain from."""
        await self.tell(SetBasePrompt(prompt))

    async def run_command(self, text: str, accepted: Reply[Accepted], settled: Reply[None]) -> bool:
        """Start the extension command ``text`` names (answered through ``accepted`` and
        ``settled`` when it returns); ``False`` if ``text`` names none."""
        name, args = split_command(text)
        if self._port.registry.command(name) is None:
            return False
        await self.tell(RunCommand(name, args, accepted, settled))
        return True

    async def input(
        self, text: str, images: tuple[ImageContent, ...], source: InputSource
    ) -> InputResult | None:
        """The ``input`` handlers' verdict on a prompt (``None``: no handler)."""
        if not self.has("input"):
            return None
        result: InputResult = await self._run(lambda work: Input(text, images, source, work))
        return result

    async def before_agent_start(
        self, text: str, images: tuple[Any, ...], message: CustomMessage | None = None
    ) -> tuple[AgentMessage, ...]:
        """``before_agent_start``: extra custom messages (the host sets the run's prompt);
        ``message``: the custom message starting the run, when one does."""
        if not self.has("before_agent_start"):
            return ()
        added: tuple[AgentMessage, ...] = await self._run(
            lambda work: BeforeAgentStart(text, images, work, message)
        )
        return added

    async def agent_event(self, event: AgentEvent) -> AgentEvent:
        """Agent events reach extensions before subscribers; ``message_end`` may be replaced
        (same role), in the loop's transcript too. ``turn_end`` is the boundary's."""
        if not self.has(event.type) or isinstance(event, TurnEnd):
            return event
        emitted: AgentEvent = await self._run(lambda work: Emit(event, work))
        return emitted

    async def user_bash(
        self, command: str, exclude_from_context: bool, cwd: str
    ) -> UserBashResult | None:
        """The ``user_bash`` handlers' answer (``None``: run it locally); raises
        :class:`~.runner.UserBashBlockedError` when a handler failed (fail closed)."""
        if not self.has("user_bash"):
            return None
        event = UserBashEvent(command=command, exclude_from_context=exclude_from_context, cwd=cwd)
        result: UserBashResult | None = await self._run(lambda work: UserBash(event, work))
        return result

    async def settle_boundary(self, outcome: str) -> tuple[bool, bool]:
        """``agent_before_settle``: (continue requested, can continue)."""
        result: tuple[bool, bool] = await self._run(lambda work: SettleBoundary(outcome, work))
        return result

    # -- the supervisor's calls -----------------------------------------------------------------

    async def before_compact(
        self,
        preparation: CompactionPreparation,
        path: Sequence[SessionEntry],
        instructions: str | None,
    ) -> CompactionResult | bool | None:
        """``session_before_compact``: ``True`` cancels, a result replaces the summary."""
        if not self.has("session_before_compact"):
            return None
        result: CompactionResult | bool | None = await self._run(
            lambda work: BeforeCompact(preparation, tuple(path), instructions, work)
        )
        return result

    async def after_compact(self, entry: CompactionEntry, from_extension: bool) -> None:
        """``session_compact``, once the entry is in the file (awaited: the compaction's
        caller returns after the handlers, as in pi)."""
        if self.has("session_compact"):
            await self._run(lambda work: AfterCompact(entry, from_extension, work))

    async def discover_resources(
        self, cwd: str, reason: Literal["startup", "reload"]
    ) -> DiscoveredPaths | None:
        """``resources_discover``, after the notifications queued before it (``session_start``):
        the paths the handlers added, ``None`` when nobody listens."""
        port = self._port
        if not port.registry.has("resources_discover"):
            return None
        reply: Reply[DiscoveredPaths] = self.new_reply()
        event = ResourcesDiscoverEvent(cwd=cwd, reason=reason)
        # Awaited, not dropped when the queue is full: the caller waits for the answer.
        await port.notify.send(("resources_discover", DiscoverResources(event, reply)))
        paths: DiscoveredPaths = await reply.wait()
        return paths

    # -- tree navigation -----------------------------------------------------------------------

    async def before_tree(self, preparation: TreePreparation) -> BeforeTreeResult | None:
        """``session_before_tree``: the handlers' result (``None`` when nobody answered)."""
        if not self.has("session_before_tree"):
            return None
        event = SessionBeforeTreeEvent(preparation=preparation)
        result: BeforeTreeResult | None = await self._run(lambda work: BeforeTree(event, work))
        return result

    async def after_tree(self, event: SessionTreeEvent) -> None:
        """``session_tree``, awaited: the navigation returns after its handlers, as in pi."""
        if self.has("session_tree"):
            await self._run(lambda work: AfterTree(event, work))

    async def cache_warming_decision(
        self, event: CacheWarmingDecisionEvent
    ) -> Literal["warm", "stop"]:
        """``cache_warming_decision``: the action the handlers leave (pi's without any)."""
        if not self.has(event.type):
            return event.action
        action: Literal["warm", "stop"] = await self._run(lambda work: WarmingDecision(event, work))
        return action

    # -- the agent loop's hooks -----------------------------------------------------------------

    def hooks(self, base: LoopHooks) -> LoopHooks:
        """``base`` with the hooks through which extensions see the loop's turns and its
        provider requests."""
        return attrs.evolve(
            base,
            transform_context=self._hook_context,
            before_tool_call=self._hook_tool_call,
            after_tool_call=self._hook_tool_result,
            should_stop_after_turn=self._hook_turn_end,
            provider=ExtensionProviderHooks(self),
            wants=self._wants,
        )

    def _wants(self, hook: str) -> bool:
        """Whether a loop hook has handlers now (see ``LoopHooks.wants``)."""
        if hook == "transform_context":
            return self.has("context") or self.has("context_with_system")
        return True

    async def provider_stage(self, stage: str, payload: Any) -> Any:
        """Run ``stage``'s handlers (see :class:`ExtensionProviderHooks`)."""
        return await self._run(lambda work: ProviderStage(stage, payload, work))

    async def _hook_context(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        if not self._wants("transform_context"):
            return messages
        result: list[AgentMessage] = await self._run(lambda work: TransformContext(messages, work))
        return result

    async def _hook_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        if not self.has("tool_call"):
            return None
        result: BeforeToolCallResult | None = await self._run(lambda work: ToolCall(ctx, work))
        return result

    async def _hook_tool_result(self, ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        if not self.has("tool_result"):
            return None
        result: AfterToolCallResult | None = await self._run(lambda work: ToolResult(ctx, work))
        return result

    async def _hook_turn_end(self, context: TurnContext) -> bool:
        if not self.has("turn_end"):
            return False
        stop: bool = await self._run(lambda work: TurnBoundary(context, work))
        return stop


class ExtensionProviderHooks:
    """The session's extensions as a provider request's hooks
    (:class:`~pitrio.actors.model_router.provider_hooks.ProviderHooks`): each stage some
    handler listens to is one message to the host, the provider awaiting its answer (so stream
    events reach handlers in order); other stages cost a registry look-up."""

    __slots__ = ("_host",)

    def __init__(self, host: ExtensionHostHandle) -> None:
        self._host = host

    def wants(self, stage: str) -> bool:
        """Whether a handler listens to ``stage``."""
        return self._host.has(stage)

    async def headers(self, headers: dict[str, str | None]) -> None:
        """``before_provider_headers``: handlers change ``headers`` in place."""
        await self._host.provider_stage("before_provider_headers", headers)

    async def payload(self, payload: Any) -> Any:
        """``before_provider_request``: the payload to send."""
        return await self._host.provider_stage("before_provider_request", payload)

    async def response(self, status: int, headers: dict[str, str]) -> None:
        """``after_provider_response``."""
        event = ProviderResponseEvent(status=status, headers=headers)
        await self._host.provider_stage("after_provider_response", event)

    async def stream_event(self, provider: str, api: str, model: str, data: Any) -> None:
        """``provider_stream_event``."""
        event = ProviderStreamEvent(provider=provider, api=api, model=model, data=data)
        await self._host.provider_stage("provider_stream_event", event)
