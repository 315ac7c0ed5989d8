"""Where a session meets its extensions (spec §3.4, §3.3, §7.3).

A mixin of :class:`~pitrio.actors.session.actor.SessionActor`. The rule that keeps it free of
deadlocks: extension handlers never run in the session's inbox task. Prompts that need
handlers (an extension command, ``input`` handlers) go through the *funnel task*, one at a
time in arrival order; notifications raised by inbox commands (``model_select``) go through
the *notification task*; agent events are handled by the event pump, and the loop's hooks run
in the loop's tasks. A handler may therefore call back into the session through its handle.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop import AgentLoopHandle, LoopHooks
from pitrio.actors.agent_loop.actor import RunEndFacts
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallContext,
    AfterToolCallResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TurnContext,
)
from pitrio.actors.session.extensions.context import CommandContext, ExtensionContext
from pitrio.actors.session.extensions.drafts import (
    CompactionDraft,
    ContextEditDraft,
    CustomDraft,
    CustomMessageDraft,
    DraftError,
    changes_context,
    parse_drafts,
)
from pitrio.actors.session.extensions.events import (
    AgentBeforeSettleEvent,
    BeforeCompactResult,
    CancelResult,
    SessionBeforeCompactEvent,
    SessionCompactEvent,
    ToolResultEvent,
    TurnEndEvent,
)
from pitrio.actors.session.extensions.runner import ExtensionRunner, ToolCallBlockedError
from pitrio.actors.session.extensions.ui import ClientUI, ExtensionUI, NoUI, UiResponse
from pitrio.actors.supervisor.compaction import CompactionPreparation
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.entries import (
    CompactionEntry,
    CompactionResult,
    ContentReplacement,
    SessionEntry,
)
from pitrio.messages.events import (
    AgentEvent,
    AgentSessionEvent,
    EntryAppended,
    ExtensionError,
    ExtensionUiRequest,
    MessageEnd,
    TurnEnd,
)

if TYPE_CHECKING:
    from pitrio.actors.session.actor import Prompt, SessionHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle

NOTIFICATION_CAPACITY = 1024
"""Notifications waiting for the notification task; when full, the inbox blocks (commands
back-pressure), which only a handler stuck past its timeout could cause."""


def queued_command_error(name: str) -> str:
    """pi's refusal of an extension command sent as steer / follow-up."""
    return (
        f'Extension command "/{name}" cannot be queued. Use prompt() or execute the command '
        "when not streaming."
    )


@attrs.frozen
class UiAsk:
    """Emit a dialog request; ``reply`` gets the client's answer."""

    request: ExtensionUiRequest
    reply: Reply[UiResponse]


@attrs.frozen
class UiAnswer:
    """A client's ``extension_ui_response`` (an unknown id is dropped, as in pi)."""

    response: UiResponse


@attrs.frozen
class UiForget:
    """A dialog timed out: a late answer is to be ignored."""

    id: str


@attrs.frozen
class PumpBarrier:
    """Answered once the event pump has processed every agent event sent so far."""

    reply: Reply[None]


@attrs.frozen
class Lifecycle:
    """Ask the extensions about the session's replacement or end: a ``session_before_*``
    event (answered with whether a handler cancelled) or ``session_shutdown`` (answered once
    every handler ran)."""

    event: str
    payload: Any
    reply: Reply[bool]


@attrs.frozen
class TurnBoundary:
    """The loop is between turns (its ``should_stop_after_turn`` hook): run the ``turn_end``
    boundary; answered with whether the loop should stop (the session then continues from the
    re-projected context)."""

    context: TurnContext
    reply: Reply[bool]


ExtensionCommand = UiAsk | UiAnswer | UiForget | PumpBarrier | Lifecycle | TurnBoundary


def split_command(text: str) -> tuple[str, str]:
    """``/name args`` as (name, args)."""
    body = text[1:]
    name, _, args = body.partition(" ")
    return name, args


class ExtensionGlue:
    """Mixin: the session's side of the extension system."""

    # Provided by SessionActor.
    _loop: AgentLoopHandle
    _store: SessionStoreHandle
    nursery: trio.Nursery
    _extensions: ExtensionRunner | None
    _ui_clients: bool
    _entry_ids: dict[int, tuple[AgentMessage, str]]

    @property
    def _seq(self) -> int:  # the seq of the last event emitted
        raise NotImplementedError

    def _emit(self, event: AgentSessionEvent) -> None:
        raise NotImplementedError

    def _self_handle(self) -> SessionHandle:
        raise NotImplementedError

    async def _prompt(self, command: Prompt) -> None:
        raise NotImplementedError

    def _init_extensions(self) -> None:
        self._dialogs: dict[str, Reply[UiResponse]] = {}
        self._barriers: list[Reply[None]] = []
        self._funnel: deque[Prompt] = deque()
        self._funnel_busy = False
        self._pump_busy = False
        self._events: trio.MemoryReceiveChannel[AgentEvent | RunEndFacts] | None = None
        self._base_system_prompt: str | None = None
        send, receive = trio.open_memory_channel[tuple[str, Any]](NOTIFICATION_CAPACITY)
        self._notify_send = send
        self._notify_receive = receive
        self._ui: ExtensionUI = NoUI()
        self._boundary_continue = False  # a turn_end handler asked for one more request
        self._turn_index = -1

    async def _start_extensions(self) -> None:
        runner = self._extensions
        if runner is None:
            return
        if self._ui_clients:
            self._ui = ClientUI(self._ui_ask, self._ui_tell)
        runner.bind(report=self._report_extension_error, context=self.extension_context)
        self._base_system_prompt = (await self._loop.state()).system_prompt
        self.nursery.start_soon(self._notification_task)

    # -- contexts and errors -----------------------------------------------------------------

    def extension_context(self) -> ExtensionContext:
        """A fresh ``ctx`` for a handler."""
        runner = self._extensions
        return ExtensionContext(
            session=self._self_handle(),
            store=self._store,
            ui=self._ui,
            system_prompt=None if runner is None else runner.system_prompt,
        )

    def _command_context(self) -> CommandContext:
        return CommandContext(session=self._self_handle(), store=self._store, ui=self._ui)

    def _report_extension_error(self, error: ExtensionError) -> None:
        self._emit(error)

    # -- the notification task ----------------------------------------------------------------

    def _notify_extensions(self, event: str, payload: Any) -> None:
        """Queue a notification-only event for the extensions (safe from the inbox task)."""
        runner = self._extensions
        if runner is None or not runner.has(event):
            return
        try:
            self._notify_send.send_nowait((event, payload))
        except trio.WouldBlock:
            runner.report("<runtime>", event, "notification queue full; event dropped")

    async def _notification_task(self) -> None:
        runner = self._extensions
        assert runner is not None
        async with self._notify_receive:
            async for event, payload in self._notify_receive:
                await runner.notify(event, payload)

    # -- the prompt funnel ---------------------------------------------------------------------

    def _needs_funnel(self, command: Prompt) -> bool:
        runner = self._extensions
        if self._funnel_busy:
            return True  # keep arrival order behind a prompt already in the funnel
        if runner is None:
            return False
        if command.expand and command.text.startswith("/"):
            name, _ = split_command(command.text)
            if runner.command(name) is not None:
                return True
        return runner.has("input")

    def _enter_funnel(self, command: Prompt) -> None:
        self._funnel.append(command)
        if not self._funnel_busy:
            self._funnel_busy = True
            self.nursery.start_soon(self._funnel_task)

    async def _funnel_task(self) -> None:
        try:
            while self._funnel:
                await self._funnel_one(self._funnel.popleft())
        finally:
            self._funnel_busy = False

    async def _funnel_one(self, command: Prompt) -> None:
        """Steps 2-4 of the seed funnel; the rest is the ordinary prompt path."""
        runner = self._extensions
        if runner is not None and command.expand and command.text.startswith("/"):
            name, args = split_command(command.text)
            found = runner.command(name)
            if found is not None:
                # Runs beside everything else (pi: even while streaming); the prompt is
                # answered when the handler returns.
                self.nursery.start_soon(self._run_extension_command, command, name, args)
                return
        if runner is not None and runner.has("input"):
            result = await runner.input(command.text, command.images, command.source)
            if result.action == "handled":
                command.accepted.set(self._seq)
                command.settled.set(None)
                return
            if result.action == "transform":
                command = attrs.evolve(
                    command,
                    text=result.text if result.text is not None else command.text,
                    images=result.images if result.images is not None else command.images,
                )
        await self._prompt(command)

    async def _run_extension_command(self, command: Prompt, name: str, args: str) -> None:
        runner = self._extensions
        assert runner is not None
        found = runner.command(name)
        if found is not None:
            await runner.run_command(name, found, args, self._command_context())
        command.accepted.set(self._seq)
        command.settled.set(None)

    def _extension_command_name(self, text: str) -> str | None:
        """The name of the extension command ``text`` invokes, if any."""
        runner = self._extensions
        if runner is None or not text.startswith("/"):
            return None
        name, _ = split_command(text)
        return name if runner.command(name) is not None else None

    def extension_commands(self) -> list[dict[str, Any]]:
        """Extension commands as ``get_commands`` lists them (before templates and skills)."""
        runner = self._extensions
        if runner is None:
            return []
        out: list[dict[str, Any]] = []
        for name, command in runner.commands():
            entry: dict[str, Any] = {"name": name}
            if command.description:
                entry["description"] = command.description
            entry["source"] = "extension"
            entry["sourceInfo"] = command.extension.source_info.to_json()
            out.append(entry)
        return out

    # -- start of a run ------------------------------------------------------------------------

    async def _before_agent_start(
        self, prompt: AgentMessage, text: str, images: tuple[Any, ...]
    ) -> tuple[AgentMessage, ...]:
        """``before_agent_start``: extra custom messages, and this run's system prompt (the
        base prompt again when no handler changes it)."""
        runner = self._extensions
        if runner is None or not runner.has("before_agent_start"):
            return ()
        base = self._base_system_prompt or ""
        additions = await runner.before_agent_start(text, images, base)
        await self._loop.configure(system_prompt=additions.system_prompt or base)
        return additions.messages

    # -- compaction ---------------------------------------------------------------------------

    async def _before_compact(
        self,
        preparation: CompactionPreparation,
        path: Sequence[SessionEntry],
        instructions: str | None,
    ) -> CompactionResult | bool | None:
        """``session_before_compact``: ``True`` cancels, a result replaces the summary."""
        runner = self._extensions
        if runner is None or not runner.has("session_before_compact"):
            return None
        event = SessionBeforeCompactEvent(
            preparation=preparation, branch_entries=tuple(path), custom_instructions=instructions
        )
        result = await runner.before("session_before_compact", event, BeforeCompactResult)
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

    async def _after_compact(self, entry: CompactionEntry, from_extension: bool) -> None:
        """``session_compact``, once the entry is in the file (awaited: the compaction's
        caller returns after the handlers, as in pi)."""
        runner = self._extensions
        if runner is not None and runner.has("session_compact"):
            event = SessionCompactEvent(compaction_entry=entry, from_extension=from_extension)
            await runner.notify("session_compact", event)

    # -- the agent loop's hooks ------------------------------------------------------------------

    def _loop_hooks(self, base: LoopHooks) -> LoopHooks:
        if self._extensions is None:
            return base
        return attrs.evolve(
            base,
            transform_context=self._hook_context,
            before_tool_call=self._hook_tool_call,
            after_tool_call=self._hook_tool_result,
            should_stop_after_turn=self._hook_turn_end,
        )

    async def _hook_turn_end(self, context: TurnContext) -> bool:
        runner = self._extensions
        if runner is None or not runner.has("turn_end"):
            return False
        reply: Reply[bool] = Reply()
        await self._self_handle().tell(TurnBoundary(context, reply))
        return await reply.wait()

    async def _wait_pump(self) -> None:
        while not self._pump_caught_up():
            barrier: Reply[None] = Reply()
            self._barriers.append(barrier)
            await barrier.wait()

    async def _turn_boundary(self, context: TurnContext, reply: Reply[bool]) -> None:
        """The seed's actionable ``turn_end``: handlers see the turn with its entry ids and
        may add drafts or ask for one more request. Drafts that change the context stop the
        loop after this turn, so the next request is built from the file's projection."""
        runner = self._extensions
        assert runner is not None
        try:
            await self._wait_pump()  # the turn's messages are persisted, their ids known
            known = self._entry_ids.get(id(context.message))
            event = TurnEndEvent(
                turn_index=max(self._turn_index, 0),
                message=context.message,
                tool_results=context.tool_results,
                message_entry_id=None if known is None else known[1],
                tool_result_entry_ids=tuple(
                    found[1]
                    for result in context.tool_results
                    if (found := self._entry_ids.get(id(result))) is not None
                ),
            )
            drafts, proceed = await runner.boundary("turn_end", event)
            changed = await self._commit_drafts("turn_end", drafts)
            # Stopping the loop to re-project must not end a run that had more to do.
            if proceed or (changed and context.tool_results):
                self._boundary_continue = True
            reply.set(changed)
        except PitrioError as exc:
            reply.fail(exc)

    async def _commit_drafts(self, event: str, raw: Sequence[Any]) -> bool:
        """Write a boundary's drafts together (none if any is malformed); whether the context
        changed (the loop's transcript is then re-projected)."""
        runner = self._extensions
        assert runner is not None
        if not raw:
            return False
        try:
            drafts = parse_drafts(raw)
        except DraftError as exc:
            runner.report("<runtime>", event, f"boundary drafts dropped: {exc}")
            self._boundary_continue = False
            return False
        for draft in drafts:
            entry: Any
            match draft:
                case CustomDraft(custom_type=custom_type, data=data):
                    entry = await self._store.append_custom_entry(custom_type, data)
                case CustomMessageDraft():
                    entry = await self._store.append_custom_message_entry(
                        draft.custom_type, draft.content, draft.display, draft.details
                    )
                case ContextEditDraft(target_id=target, replacement=replacement, reason=reason):
                    entry = await self._store.append_context_edit(
                        target,
                        None if replacement is None else ContentReplacement(content=replacement),
                        reason,
                    )
                case CompactionDraft():
                    entry = await self._store.append_compaction(
                        draft.summary,
                        draft.first_kept_entry_id,
                        draft.tokens_before,
                        draft.details,
                    )
            self._emit(EntryAppended(entry=entry))
        if not changes_context(drafts):
            return False
        await self._loop.set_messages(await self._store.context_messages())
        return True

    async def _settle_boundary(self, outcome: str) -> tuple[bool, bool]:
        """``agent_before_settle``: commit the handlers' drafts; (continue requested, can
        continue). A ``continue`` the context cannot honour is reported and ignored."""
        proceed, self._boundary_continue = self._boundary_continue, False
        runner = self._extensions
        context = await self._store.context_messages()
        can = bool(context) and not isinstance(context[-1], AssistantMessage)
        if runner is not None and runner.has("agent_before_settle"):
            event = AgentBeforeSettleEvent(
                outcome=outcome,  # type: ignore[arg-type]
                context_messages=tuple(context),
                can_continue=can,
                continue_=proceed,
            )
            drafts, asked = await runner.boundary("agent_before_settle", event)
            if await self._commit_drafts("agent_before_settle", drafts):
                context = await self._store.context_messages()
                can = bool(context) and not isinstance(context[-1], AssistantMessage)
            proceed = proceed or asked
            if asked and not can:
                runner.report(
                    "<runtime>",
                    "agent_before_settle",
                    "continue was requested but the context ends with an assistant message",
                )
        return proceed, can

    async def _hook_context(self, messages: list[AgentMessage]) -> list[AgentMessage]:
        runner = self._extensions
        if runner is None or not runner.has("context"):
            return messages
        return await runner.context(messages)

    async def _hook_tool_call(self, ctx: BeforeToolCallContext) -> BeforeToolCallResult | None:
        runner = self._extensions
        if runner is None or not runner.has("tool_call"):
            return None
        # The hook sees the session as persisted so far (spec S35): wait for the pump.
        barrier: Reply[None] = Reply()
        await self._self_handle().tell(PumpBarrier(barrier))
        await barrier.wait()
        try:
            result = await runner.tool_call(ctx.tool_call.name, ctx.tool_call.id, ctx.args)
        except ToolCallBlockedError as exc:
            return BeforeToolCallResult(block=True, reason=str(exc))
        return result if result is not None and result.block else None

    async def _hook_tool_result(self, ctx: AfterToolCallContext) -> AfterToolCallResult | None:
        runner = self._extensions
        if runner is None or not runner.has("tool_result"):
            return None
        before = ToolResultEvent(
            tool_name=ctx.tool_call.name,
            tool_call_id=ctx.tool_call.id,
            input=ctx.args,
            content=tuple(ctx.result.content),
            details=ctx.result.details,
            is_error=ctx.is_error,
        )
        after = await runner.tool_result(before)
        if after == before:
            return None
        return AfterToolCallResult(
            content=after.content if after.content != before.content else None,
            details=after.details if after.details is not before.details else None,
            is_error=after.is_error if after.is_error != before.is_error else None,
        )

    # -- the event pump's part ---------------------------------------------------------------

    async def _extension_event(self, event: AgentEvent) -> AgentEvent:
        """Agent events reach extensions before subscribers; ``message_end`` may be replaced
        (same role), in the loop's transcript too."""
        runner = self._extensions
        if runner is None or not runner.has(event.type):
            return event
        if isinstance(event, TurnEnd):
            return event  # handled at the turn boundary (the loop's hook), with entry ids
        if isinstance(event, MessageEnd):
            replacement = await runner.message_end(event.message, event)
            if replacement is not event.message:
                await self._loop.replace_message(event.message, replacement)
                return attrs.evolve(event, message=replacement)
            return event
        await runner.notify(event.type, event)
        return event

    def _pump_caught_up(self) -> bool:
        events = self._events
        return not self._pump_busy and (
            events is None or events.statistics().current_buffer_used == 0
        )

    def _release_barriers(self) -> None:
        if self._barriers and self._pump_caught_up():
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                barrier.set(None)

    # -- UI dialogs --------------------------------------------------------------------------

    async def _ui_ask(
        self, request: ExtensionUiRequest, time_limit: float | None
    ) -> UiResponse | None:
        handle = self._self_handle()
        reply: Reply[UiResponse] = handle.new_reply()
        await handle.tell(UiAsk(request, reply))
        with trio.move_on_after(math.inf if time_limit is None else time_limit):
            try:
                return await reply.wait()
            except PitrioError:
                return None
        with trio.CancelScope(shield=True):
            await handle.tell(UiForget(request.id))
        return None

    async def _ui_tell(self, request: ExtensionUiRequest) -> None:
        await trio.lowlevel.checkpoint()
        self._emit(request)

    def _handle_extension_command(self, command: ExtensionCommand) -> None:
        match command:
            case UiAsk(request=request, reply=reply):
                self._dialogs[request.id] = reply
                self._emit(request)
            case UiAnswer(response=response):
                pending = self._dialogs.pop(response.id, None)
                if pending is not None:
                    pending.set(response)
            case UiForget(id=dialog_id):
                self._dialogs.pop(dialog_id, None)
            case PumpBarrier(reply=reply):
                self._barriers.append(reply)
                self._release_barriers()
            case TurnBoundary(context=context, reply=reply):
                self.nursery.start_soon(self._turn_boundary, context, reply)
            case Lifecycle(event=event, payload=payload, reply=reply):
                # In a task: the handlers may call back into this session.
                self.nursery.start_soon(self._lifecycle, event, payload, reply)

    async def _lifecycle(self, event: str, payload: Any, reply: Reply[bool]) -> None:
        runner = self._extensions
        cancelled = False
        if runner is not None and runner.has(event):
            if event.startswith("session_before_"):
                result = await runner.before(event, payload, CancelResult)
                cancelled = result is not None and result.cancel
            else:
                await runner.notify(event, payload)
        reply.set(cancelled)
