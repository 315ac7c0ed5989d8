"""The extension host: where a session meets its extensions (``DESIGN.md`` §2, spec §3.3-§7.3).

One per session with extensions, started in the session's nursery. It owns the
:class:`~pitrio.actors.session.extensions.runner.ExtensionRunner`, the UI a handler sees, the
dialogs in flight, the notification queue, the base system prompt ``before_agent_start``
handlers chain from, and the boundary state (whether a ``turn_end`` handler asked for one more
request). The session, the agent loop's hooks and the supervisor reach it through an
:class:`~pitrio.actors.session.extensions.host_handle.ExtensionHostHandle`; it reaches the
session only through the session's handle (what ``ctx`` does too).

The rule that keeps it free of deadlocks: extension handlers never run in an inbox task, the
host's or the session's. Every command that runs handlers starts a task of the host (in the
cancel scope the caller handed over, which the caller cancels if it is cancelled itself);
notifications go through the *notification task*, one at a time in arrival order. A handler may
therefore call back into the session, and into the host (a dialog), through their handles.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallResult,
    BeforeToolCallResult,
    TurnContext,
)
from pitrio.actors.latest import Latest, LatestReader
from pitrio.actors.session.extensions.asks import ModelScope, ShutdownRequest
from pitrio.actors.session.extensions.boundary import can_continue, commit_drafts
from pitrio.actors.session.extensions.context import (
    CommandContext,
    ExtensionContext,
    StreamCall,
)
from pitrio.actors.session.extensions.drafts import DraftError, draft_entry, parse_drafts
from pitrio.actors.session.extensions.events import (
    AgentBeforeSettleEvent,
    BeforeCompactResult,
    BeforeTreeResult,
    BoundaryContext,
    CancelResult,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
    ToolResultEvent,
    TurnEndEvent,
    UiPromptEvent,
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
    UiAsk,
    UiForget,
    UserBash,
    WarmingDecision,
    WorkCommand,
    queue_notification,
)
from pitrio.actors.session.extensions.runner import ExtensionRunner, ToolCallBlockedError
from pitrio.actors.session.extensions.ui import ClientUI, ExtensionUI, NoUI, UiResponse
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, CustomMessage
from pitrio.messages.entries import CompactionResult, iso_now
from pitrio.messages.events import AgentEvent, ExtensionUiRequest, MessageEnd

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session.emitter import EventOutlet
    from pitrio.actors.session.handle import SessionHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle

NOTIFICATION_CAPACITY = 1024
"""Notifications waiting for the notification task; when full, one more is dropped and
reported (an ``extension_error``): only a handler stuck past its timeout could cause it, and the
session's inbox must not wait for handlers."""

CANCELLED = "the caller of this extension call was cancelled"


@attrs.frozen
class HostSettings:
    """What the host is made of, besides the handles it talks to."""

    runner: ExtensionRunner
    ui_clients: bool = False  # a client can answer dialogs (RPC, the daemon)
    mode: str = "print"  # ctx.mode: tui, rpc, json or print (pi 1.6.0)
    project_trusted: bool = True  # ctx.is_project_trusted(): the session's trust decision
    stream: StreamCall | None = None  # ctx.model_registry's requests: the session's router
    scope: ModelScope | None = None  # ctx.scoped_models, filled in by the transport
    shutdown: ShutdownRequest | None = None  # ctx.shutdown(): the transport's


@attrs.frozen
class HostPort:
    """What the host publishes for its handle, read without a round trip: the runner's
    registry (only which events and commands are registered is read there: handlers change it
    in the host's tasks, and a read sees it as of now, as when the session held the runner),
    the notification queue's send side, and the boundary's ``continue`` request."""

    registry: ExtensionRunner
    notify: trio.MemorySendChannel[tuple[str, Any]]
    boundary_continue: LatestReader[bool]


class ExtensionHost(Actor[HostCommand]):
    """Owns a session's extensions: the runner, its UI and dialogs, boundaries, notifications."""

    def __init__(
        self,
        *,
        settings: HostSettings,
        session: SessionHandle,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        outlet: EventOutlet,
        capacity: int = 256,
    ) -> None:
        super().__init__(name="extensions", capacity=capacity)
        self._runner = settings.runner
        self._ui_clients = settings.ui_clients
        self._mode = settings.mode
        self._project_trusted = settings.project_trusted
        self._stream = settings.stream
        self._scope = settings.scope
        self._shutdown = settings.shutdown
        self._session = session
        self._loop = loop
        self._store = store
        self._outlet = outlet
        self._dialogs: dict[str, Reply[UiResponse]] = {}
        self._ui: ExtensionUI = NoUI()
        self._base_system_prompt: str | None = None
        self._prompt_depth = 0  # dialogs open now (ui_prompt_start / ui_prompt_end)
        self._prompt_open: UiPromptEvent | None = None
        self._notify_send, self._notify_receive = trio.open_memory_channel[tuple[str, Any]](
            NOTIFICATION_CAPACITY
        )
        # A turn_end handler asked for one more request: published for the handle (the run
        # asks for the settle boundary only then or when a handler wants it), cleared by it.
        self._continue = Latest(False)
        self.address.published = HostPort(
            registry=self._runner,
            notify=self._notify_send,
            boundary_continue=self._continue.reader(),
        )

    @property
    def boundary_continue(self) -> bool:
        """Whether a ``turn_end`` handler asked for one more request."""
        return self._continue.get()

    @boundary_continue.setter
    def boundary_continue(self, value: bool) -> None:
        self._continue.publish(value)

    async def started(self) -> None:
        if self._ui_clients:
            self._ui = ClientUI(self._ui_ask, self._ui_tell)
        self._runner.bind(report=self._outlet.emit, context=self.extension_context)
        self._base_system_prompt = (await self._loop.state()).system_prompt
        self.nursery.start_soon(self._notification_task)

    # -- contexts ----------------------------------------------------------------------------

    def extension_context(self) -> ExtensionContext:
        """A fresh ``ctx`` for a handler."""
        return ExtensionContext(
            session=self._session,
            store=self._store,
            ui=self._ui,
            system_prompt=self._runner.system_prompt,
            mode=self._mode,
            project_trusted=self._project_trusted,
            stream=self._stream,
            scope=self._scope,
            shutdown=self._shutdown,
        )

    def _command_context(self) -> CommandContext:
        return CommandContext(
            session=self._session,
            store=self._store,
            ui=self._ui,
            mode=self._mode,
            project_trusted=self._project_trusted,
            stream=self._stream,
            scope=self._scope,
            shutdown=self._shutdown,
        )

    # -- the inbox ----------------------------------------------------------------------------

    async def handle(self, command: HostCommand) -> None:
        # Nothing here waits: handlers run in tasks (they may ask this inbox for a dialog).
        match command:
            case UiAsk(request=request, reply=reply):
                self._dialogs[request.id] = reply
                self._outlet.emit(request)
            case UiAnswer(response=response):
                pending = self._dialogs.pop(response.id, None)
                if pending is not None:
                    pending.set(response)
            case UiForget(id=dialog_id):
                self._dialogs.pop(dialog_id, None)
            case SetBasePrompt(prompt=prompt):
                self._base_system_prompt = prompt
            case Lifecycle(event=event, payload=payload, reply=reply):
                self.nursery.start_soon(self._lifecycle, event, payload, reply)
            case RunCommand():
                # Runs beside everything else (pi: even while streaming); the prompt is
                # answered when the handler returns.
                self.nursery.start_soon(self._run_command, command)
            case _:
                self.nursery.start_soon(self._serve, command)

    async def _serve(self, command: WorkCommand) -> None:
        """A handler-running command in its own task, in the scope its caller handed over; an
        error is the caller's answer (raised in its task, as when it called the runner)."""
        work = command.work
        with work.scope:
            try:
                work.reply.set(await self._work(command))
            except Exception as exc:
                work.reply.fail(exc)
        work.reply.fail(PitrioError(CANCELLED))  # ignored when answered above

    def _work(self, command: WorkCommand) -> Awaitable[Any]:
        match command:
            case Emit(event=event):
                return self._agent_event(event)
            case Input(text=text, images=images, source=source):
                return self._runner.input(text, images, source)
            case BeforeAgentStart(text=text, images=images, message=message):
                return self._before_agent_start(text, images, message)
            case BeforeCompact():
                return self._before_compact(command)
            case AfterCompact(entry=entry, from_extension=from_extension):
                compacted = SessionCompactEvent(
                    compaction_entry=entry, from_extension=from_extension
                )
                return self._runner.notify("session_compact", compacted)
            case BeforeTree(event=event):
                return self._runner.before("session_before_tree", event, BeforeTreeResult)
            case AfterTree(event=event):
                return self._runner.notify("session_tree", event)
            case TransformContext(messages=messages):
                return self._runner.context(messages)
            case ToolCall():
                return self._tool_call(command)
            case ToolResult():
                return self._tool_result(command)
            case TurnBoundary(context=context):
                return self._turn_boundary(context)
            case SettleBoundary(outcome=outcome):
                return self._settle_boundary(outcome)
            case WarmingDecision(event=event):
                return self._runner.cache_warming_decision(event)
            case UserBash(event=event):
                return self._runner.user_bash(event)
            case ProviderStage(stage="before_provider_headers", payload=headers):
                return self._runner.provider_headers(headers)
            case ProviderStage(stage="before_provider_request", payload=payload):
                return self._runner.provider_payload(payload)
            case ProviderStage(stage=stage, payload=payload):
                # after_provider_response, provider_stream_event: awaited in order
                return self._runner.notify(stage, payload)

    # -- notifications ------------------------------------------------------------------------

    async def _notification_task(self) -> None:
        async with self._notify_receive:
            async for event, payload in self._notify_receive:
                if isinstance(payload, DiscoverResources):
                    payload.reply.set(await self._runner.resources_discover(payload.event))
                else:
                    await self._runner.notify(event, payload)

    async def _lifecycle(self, event: str, payload: Any, reply: Reply[bool]) -> None:
        cancelled = False
        if self._runner.has(event):
            if event.startswith("session_before_"):
                result = await self._runner.before(event, payload, CancelResult)
                cancelled = result is not None and result.cancel
            else:
                await self._runner.notify(event, payload)
        reply.set(cancelled)

    # -- prompts ------------------------------------------------------------------------------

    async def _run_command(self, command: RunCommand) -> None:
        found = self._runner.command(command.name)
        if found is not None:
            await self._runner.run_command(
                command.name, found, command.args, self._command_context()
            )
        command.accepted.set(Accepted(self._outlet.seq, "handled"))
        command.settled.set(None)

    async def _before_agent_start(
        self, text: str, images: tuple[Any, ...], message: CustomMessage | None
    ) -> tuple[AgentMessage, ...]:
        """Extra custom messages, and this run's system prompt (the base prompt again when no
        handler changes it)."""
        base = self._base_system_prompt or ""
        additions = await self._runner.before_agent_start(text, images, base, message)
        # A handler's prompt replaces the transcript's in this run's requests; the transcript
        # keeps its sections (pi 1.6.0's forced prompt).
        await self._loop.configure(forced_system_prompt=additions.system_prompt)
        return additions.messages

    # -- compaction ---------------------------------------------------------------------------

    async def _before_compact(self, command: BeforeCompact) -> CompactionResult | bool | None:
        event = SessionBeforeCompactEvent(
            preparation=command.preparation,
            branch_entries=command.path,
            custom_instructions=command.instructions,
        )
        result = await self._runner.before("session_before_compact", event, BeforeCompactResult)
        if result is None:
            return None
        if result.cancel:
            return True
        supplied = result.compaction
        if supplied is None:
            return None
        return CompactionResult(
            summary=supplied.summary,
            first_kept_entry_id=supplied.first_kept_entry_id,
            tokens_before=supplied.tokens_before,
            details=supplied.details,
        )

    # -- the agent loop's hooks and events ------------------------------------------------------

    async def _agent_event(self, event: AgentEvent) -> AgentEvent:
        if isinstance(event, MessageEnd):
            replacement = await self._runner.message_end(event.message, event)
            if replacement is not event.message:
                await self._loop.replace_message(event.message, replacement)
                return attrs.evolve(event, message=replacement)
            return event
        await self._runner.notify(event.type, event)
        return event

    async def _tool_call(self, command: ToolCall) -> BeforeToolCallResult | None:
        # The hook sees the session as persisted so far (spec S35): wait for the pump.
        await self._session.pump_barrier(())
        ctx = command.context
        try:
            result = await self._runner.tool_call(
                ctx.tool_call.name, ctx.tool_call.id, ctx.args, ctx.parent_tool_call_id
            )
        except ToolCallBlockedError as exc:
            return BeforeToolCallResult(block=True, reason=str(exc))
        return result if result is not None and result.block else None

    async def _tool_result(self, command: ToolResult) -> AfterToolCallResult | None:
        ctx = command.context
        before = ToolResultEvent(
            tool_name=ctx.tool_call.name,
            tool_call_id=ctx.tool_call.id,
            input=ctx.args,
            content=tuple(ctx.result.content),
            details=ctx.result.details,
            is_error=ctx.is_error,
            parent_tool_call_id=ctx.parent_tool_call_id,
        )
        after = await self._runner.tool_result(before)
        if after == before:
            return None
        return AfterToolCallResult(
            content=after.content if after.content != before.content else None,
            details=after.details if after.details is not before.details else None,
            is_error=after.is_error if after.is_error != before.is_error else None,
        )

    # -- boundaries ---------------------------------------------------------------------------

    async def _commit(self, event: str, drafts: tuple[Any, ...]) -> bool:
        changed = await commit_drafts(
            event,
            drafts,
            runner=self._runner,
            store=self._store,
            loop=self._loop,
            emit=self._outlet.emit,
        )
        if changed is None:  # malformed: nothing written, and no continue on their word
            self.boundary_continue = False
            return False
        return changed

    async def _turn_boundary(self, context: TurnContext) -> bool:
        """The seed's actionable ``turn_end``: handlers see the turn with its entry ids and
        may add drafts or ask for one more request. Drafts that change the context stop the
        loop after this turn, so the next request is built from the file's projection."""
        # The turn's messages are persisted and their ids known once the pump caught up.
        pump = await self._session.pump_barrier((context.message, *context.tool_results))
        projected = await self._store.context_messages()
        event = TurnEndEvent(
            turn_index=max(pump.turn_index, 0),
            message=context.message,
            tool_results=context.tool_results,
            message_entry_id=pump.entry_ids[0],
            tool_result_entry_ids=tuple(i for i in pump.entry_ids[1:] if i is not None),
            outcome=turn_outcome(context.message),
            context=BoundaryContext(
                context_messages=tuple(projected), can_continue=can_continue(projected)
            ),
        )
        drafts, proceed = await self._runner.boundary("turn_end", event, self._preview)
        changed = await self._commit("turn_end", drafts)
        # Stopping the loop to re-project must not end a run that had more to do.
        if proceed or (changed and context.tool_results):
            self.boundary_continue = True
        return changed

    async def _preview(self, raw: tuple[Any, ...]) -> BoundaryContext:
        """The context a boundary handler sees: the persisted one with the drafts of the
        handlers before it applied, not written (pi 1.6.0's per-handler preview). Drafts that
        do not parse are left out of it (they will be reported, and none written, at commit)."""
        try:
            drafts = parse_drafts(raw)
        except DraftError:
            drafts = ()
        stamp = iso_now()
        entries = [draft_entry(d, id="", parent_id=None, timestamp=stamp) for d in drafts]
        messages = await self._store.preview_messages(entries)
        return BoundaryContext(context_messages=messages, can_continue=can_continue(messages))

    async def _settle_boundary(self, outcome: str) -> tuple[bool, bool]:
        """``agent_before_settle``: commit the handlers' drafts; (continue requested, can
        continue). A ``continue`` the context cannot honour is reported and ignored."""
        proceed, self.boundary_continue = self.boundary_continue, False
        runner = self._runner
        context = await self._store.context_messages()
        can = can_continue(context)
        if runner.has("agent_before_settle"):
            event = AgentBeforeSettleEvent(
                outcome=outcome,  # type: ignore[arg-type]
                context_messages=tuple(context),
                can_continue=can,
                continue_=proceed,
                context=BoundaryContext(context_messages=tuple(context), can_continue=can),
            )
            drafts, asked = await runner.boundary("agent_before_settle", event, self._preview)
            if await self._commit("agent_before_settle", drafts):
                can = can_continue(await self._store.context_messages())
            proceed = proceed or asked
            if asked and not can:
                runner.report(
                    "<runtime>",
                    "agent_before_settle",
                    "continue was requested but the context ends with an assistant message",
                )
        return proceed, can

    # -- UI dialogs --------------------------------------------------------------------------

    async def _ui_ask(
        self, request: ExtensionUiRequest, time_limit: float | None
    ) -> UiResponse | None:
        # Called by a handler (in one of this host's tasks): through the inbox, like a client's
        # answer, so a dialog and its answer meet in one place.
        reply: Reply[UiResponse] = Reply(self.address.link)
        self._prompt_span(+1, request)
        try:
            await self._tell(UiAsk(request, reply))
            with trio.move_on_after(math.inf if time_limit is None else time_limit):
                try:
                    return await reply.wait()
                except PitrioError:
                    return None
            with trio.CancelScope(shield=True):
                await self._tell(UiForget(request.id))
            return None
        finally:
            self._prompt_span(-1, request)

    def _prompt_span(self, step: int, request: ExtensionUiRequest) -> None:
        """``ui_prompt_start`` when the first dialog opens, ``ui_prompt_end`` when the last
        one closes (overlapping dialogs are one span, named after its first), queued for the
        notification task: the dialog never waits for their handlers (pi 1.6.0)."""
        self._prompt_depth += step
        if step > 0 and self._prompt_depth == 1:
            self._prompt_open = UiPromptEvent(
                type="ui_prompt_start", kind=request.method, title=request.title
            )
            self._notify_prompt(self._prompt_open)
        elif step < 0 and self._prompt_depth == 0 and self._prompt_open is not None:
            self._notify_prompt(attrs.evolve(self._prompt_open, type="ui_prompt_end"))
            self._prompt_open = None

    def _notify_prompt(self, event: UiPromptEvent) -> None:
        queue_notification(self._runner, self._notify_send, event.type, event)

    async def _tell(self, command: HostCommand) -> None:
        await Handle(self.address).tell(command)

    async def _ui_tell(self, request: ExtensionUiRequest) -> None:
        await trio.lowlevel.checkpoint()
        self._outlet.emit(request)


def turn_outcome(message: AgentMessage) -> Literal["completed", "aborted", "error"]:
    """How a turn's response ended, as pi 1.6.0's boundaries name it."""
    reason = getattr(message, "stop_reason", None)
    if reason == "aborted":
        return "aborted"
    if reason == "error":
        return "error"
    return "completed"
