"""The session actor: pi's ``AgentSession`` as an actor (``DESIGN.md`` §2-§3).

It owns one session: the agent loop (a child actor), the persistence log, the display queues,
the run lifecycle and the subscribers. Commands arrive on its inbox in order; a *run* (one
accepted prompt, from acceptance to ``agent_settled``) is a task in the actor's nursery inside a
cancel scope, and abort is that scope's cancellation.

Two tasks of the actor touch its state: the inbox loop and the *event pump*, which takes the
agent loop's events in emission order, updates the queue display, hands them to subscribers
(each with a per-session ``seq``), and persists messages at ``message_end``. A run waits for the
pump to have processed its low-level run (by run number) before deciding what comes next, so
decisions always see persisted state.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import attrs
import trio

from pitrio.actors._actor import Actor, Reply
from pitrio.actors.agent_loop import AgentLoopHandle, LoopHooks
from pitrio.actors.agent_loop.actor import RunEndFacts, RunFacts, RunResult
from pitrio.actors.model_router.diagnostics import retry_after_ms
from pitrio.actors.session.commands import (
    Abort,
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
    SessionBusyError,
    SessionCommand,
    SessionSettings,
    SessionState,
    StreamingBehavior,
    Subscribe,
    SubscribeInto,
    WaitForIdle,
)
from pitrio.actors.session.emitter import EventOutlet
from pitrio.actors.session.export import (
    EMPTY_EXPORT,
    IN_MEMORY_EXPORT,
    default_html_name,
    default_jsonl_name,
    export_html,
    export_jsonl,
    write_export,
)
from pitrio.actors.session.extensions.events import SessionStartEvent
from pitrio.actors.session.extensions.host import ExtensionHost, HostSettings
from pitrio.actors.session.extensions.host_commands import Lifecycle, UiAnswer
from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle, queued_command_error
from pitrio.actors.session.extensions.runner import ExtensionRunner
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.funnel import PromptFunnel
from pitrio.actors.session.handle import DEFAULT_SUBSCRIBER_CAPACITY, SessionHandle
from pitrio.actors.session.log import SessionLog
from pitrio.actors.session.operations import (
    COMPACTION_RUNNING,
    SessionOperations,
    SummarizeBranch,
    last_assistant_text,
    navigate_tree,
)
from pitrio.actors.session.policy import STREAMING_WITHOUT_BEHAVIOR
from pitrio.actors.session.resources.loader import (
    Resources,
    commands,
    expand_input,
    system_prompt_sections,
)
from pitrio.actors.session.resources.system_prompt import (
    PromptSection,
    render_sections,
    system_prompt_patch,
    today,
)
from pitrio.actors.session.shell import UserShell
from pitrio.actors.session_store.paths import session_file_name
from pitrio.actors.supervisor.actor.compactor import StreamCall, known_entries
from pitrio.actors.supervisor.actor.shell import (
    CompactionCancelled,
    Lent,
    Supervisor,
    SupervisorHandle,
    SupervisorSettings,
)
from pitrio.actors.supervisor.branch_summary import BranchSummaryResult
from pitrio.actors.supervisor.compaction import (
    COMPACTION_CANCELLED,
    CompactionCheck,
    is_same_model,
)
from pitrio.actors.supervisor.decisions import (
    BeforeSettle,
    Continue,
    End,
    PostRunAction,
    PostRunDecision,
    Retry,
    RunEnded,
    decide_after_boundary,
)
from pitrio.actors.supervisor.decisions import Compact as CompactAction
from pitrio.actors.tool_executor import ToolExecutorHandle
from pitrio.errors import PitrioError, ReadOnlySessionError
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    CustomMessage,
    LlmMessage,
    SystemMessage,
    UserMessage,
    now_ms,
    user_message,
)
from pitrio.messages.content import ImageContent, text_of
from pitrio.messages.convert import PrefixConverter
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.events import (
    AgentEnd,
    AgentEvent,
    AgentSessionEvent,
    AgentSettled,
    AgentStart,
    EntryAppended,
    MessageEnd,
    MessageStart,
    QueueUpdate,
    SessionReadOnly,
    TurnStart,
)
from pitrio.messages.model import Model

__all__ = [  # the commands and the handle moved out; imported from here by many modules
    "DEFAULT_SUBSCRIBER_CAPACITY",
    "Abort",
    "Bash",
    "ClearQueue",
    "Compact",
    "GetState",
    "Invoke",
    "Navigate",
    "Prompt",
    "Queue",
    "SessionActor",
    "SessionBusyError",
    "SessionCommand",
    "SessionHandle",
    "SessionSettings",
    "SessionState",
    "StreamingBehavior",
    "Subscribe",
    "SubscribeInto",
    "WaitForIdle",
]

if TYPE_CHECKING:
    from pitrio.actors.model_router import ModelRouterHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle

T = TypeVar("T")

FINALIZE_SECONDS = 10.0  # the shielded finaliser's deadline: a stuck loop cannot hang abort
DECISION_CAPACITY = 16
"""Post-run decisions the pump has made and the run has not taken yet. One per low-level run,
and the loop starts the next low-level run only after the run took the last decision, so at
most one waits; when full the pump would wait (back-pressure), which cannot happen."""
DEFERRED_CAPACITY = 64
"""Plain prompts waiting for a settling run; one more is refused (``TOO_MANY_DEFERRED``)."""
TOO_MANY_DEFERRED = "Too many prompts are waiting for the current run to settle"


@attrs.define
class _Run:
    """The state of one accepted run."""

    number: int
    scope: trio.CancelScope
    settled: list[Reply[None]]
    abort_waiters: list[Reply[None]] = attrs.field(factory=list)
    idle_waiters: list[Reply[None]] = attrs.field(factory=list)  # wait_for_idle, set at settle
    failure: ReadOnlySessionError | None = None  # the session file failed during this run
    # Set by the pump from an agent_end after which the run only settles (no retry, nothing
    # queued yet), or only compacts and then settles (a threshold compaction: pi is idle
    # then); a new low-level run clears it. A plain prompt sent then (a client that reacts to
    # agent_end) waits for the settle instead of being refused.
    closing: bool = False
    # The scope of the supervisor's step in progress (a retry back-off, a compaction), lent
    # with a nursery for it: abort cancels it together with the run's scope.
    work: trio.CancelScope | None = None
    # Aborted by a command that replaces what it did (compact, new_session, a switch): the
    # pump neither reports nor records its remaining events (pi stops listening first).
    detached: bool = False


def _only_settles(action: PostRunAction) -> bool:
    """Whether the run has no turn left after ``action``: it settles, maybe after a compaction
    that does not continue the run (a continuation for messages queued meanwhile clears it)."""
    if isinstance(action, CompactAction):
        return not action.will_retry
    return isinstance(action, End | BeforeSettle)


@attrs.define
class _Maintenance:
    """A manual compaction or a navigation in progress (no run then): prompts, compactions
    and navigations are refused meanwhile."""

    # The supervisor's step in progress (the summary), as in :class:`_Run`: abort cancels it.
    work: trio.CancelScope | None = None


class SessionActor(Actor[SessionCommand]):
    """Owns one session: its agent loop, log, queues, runs and subscribers."""

    def __init__(
        self,
        *,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        router: ModelRouterHandle | None = None,
        stream: StreamCall | None = None,
        settings: SessionSettings | None = None,
        agent_dir: Path | None = None,
        scoped_models: tuple[Model, ...] = (),
        resources: Resources | None = None,
        extensions: ExtensionRunner | None = None,
        ui_clients: bool = False,
        start_reason: str = "startup",
        tools: ToolExecutorHandle | None = None,
        prompt_sections: tuple[PromptSection, ...] = (),
        capacity: int = 256,
    ) -> None:
        super().__init__(name="session", capacity=capacity)
        self._loop = loop
        self._store = store
        self._log: SessionLog = store
        self._router = router
        self._stream = stream or (router.stream if router is not None else None)
        self._agent_dir = agent_dir
        self._scoped_models = scoped_models
        self._resources = resources
        self._next_turn: list[CustomMessage] = []
        self._cwd = store.header.cwd
        self._maintenance: _Maintenance | None = None
        self._settings = settings or SessionSettings()
        self._shell = UserShell(
            loop=loop,
            store=store,
            emit=self._emit,
            cwd=self._cwd,
            shell_path=self._settings.shell_path,
            command_prefix=self._settings.shell_command_prefix,
        )
        self._steering: list[str] = []
        self._follow_up: list[str] = []
        self._steering_ids: list[str] = []
        self._follow_up_ids: list[str] = []
        self._outlet = EventOutlet()
        self._run: _Run | None = None
        self._runs = 0
        # Plain prompts sent while a run only settles: taken, in order, right after its
        # agent_settled (see _finish_run).
        self._defer, self._deferred = trio.open_memory_channel[Prompt](DEFERRED_CAPACITY)
        self._agent_ends = 0  # low-level runs whose agent_end the pump has processed
        self._decisions_taken = 0  # the number of the last low-level run the run has taken
        self._decided_send, self._decided = trio.open_memory_channel[tuple[int, PostRunDecision]](
            DECISION_CAPACITY
        )
        self._entry_ids: dict[int, tuple[AgentMessage, str]] = {}
        self._end_facts: RunFacts | None = None  # sent by the loop before each agent_end
        self._write_failure: ReadOnlySessionError | None = None
        self._extensions = extensions
        self._ui_clients = ui_clients
        self._start_reason = start_reason
        self._tools = tools
        self._sent_sections = prompt_sections  # the system prompt as the transcript last saw it
        self._section_inputs: tuple[object, str] | None = None
        # The extension host (with extensions only) and what the session keeps of them: the
        # funnel's order, the pump's barriers and the turn index the pump counts.
        self._host: ExtensionHostHandle | None = None
        self._funnel: PromptFunnel | None = None
        self._barriers: list[PumpBarrier] = []
        self._pump_busy = False
        self._events: trio.MemoryReceiveChannel[AgentEvent | RunEndFacts] | None = None
        self._turn_index = -1

    async def started(self) -> None:
        # The session decides what reaches the model: custom, bash and summary messages too.
        # A converter of its own for the loop (only the loop's task calls it): a request
        # converts the messages added since the last one, not the whole transcript.
        converter = PrefixConverter()

        async def convert(messages: Sequence[AgentMessage]) -> Sequence[LlmMessage]:
            return converter.convert(messages)

        host = None
        if self._extensions is not None:
            host = ExtensionHost(
                settings=HostSettings(runner=self._extensions, ui_clients=self._ui_clients),
                session=self._self_handle(),
                loop=self._loop,
                store=self._store,
                outlet=self._outlet,
            )
            self._host = ExtensionHostHandle(host.address)  # started below, as before
            self._funnel = PromptFunnel(self._host, self._prompt, lambda: self._seq, self.nursery)
        supervisor = Supervisor(
            loop=self._loop,
            store=self._store,
            stream=self._stream,
            emit=self._outlet.emit,
            settings=SupervisorSettings(
                retry=self._settings.retry,
                compaction=self._settings.compaction,
                branch_summary=self._settings.branch_summary,
            ),
            before_compact=None if self._host is None else self._host.before_compact,
            after_compact=None if self._host is None else self._host.after_compact,
        )
        self.supervisor = SupervisorHandle(await self.nursery.start(supervisor.run))
        self.operations = SessionOperations(
            loop=self._loop,
            store=self._store,
            supervisor=self.supervisor,
            emit=self._emit,
            notify=self._notify_extensions,
            router=self._router,
            agent_dir=self._agent_dir,
            scoped_models=self._scoped_models,
            default_thinking_level=self._settings.default_thinking_level,
        )
        hooks = LoopHooks(convert_to_llm=convert)
        if self._host is not None:
            hooks = self._host.hooks(hooks)
        await self._loop.configure(hooks=hooks)
        events = await self._loop.subscribe_with_facts(capacity=1024)
        self._events = events
        self.nursery.start_soon(self._pump, events)
        if host is not None:
            # Not awaited: its handlers run once the session's handle is out (an extension's
            # late registrations need the session's port, set by whoever started the session).
            self.nursery.start_soon(host.run)
        self._notify_extensions("session_start", SessionStartEvent(reason=self._start_reason))

    def _notify_extensions(self, event: str, payload: Any) -> None:
        """Queue a notification-only event for the extensions (never waits)."""
        if self._host is not None:
            self._host.notify(event, payload)

    def _self_handle(self) -> SessionHandle:
        return SessionHandle(self.address)

    # -- inbox -----------------------------------------------------------------------------

    async def handle(self, command: SessionCommand) -> None:
        if (
            isinstance(command, Prompt)
            and command.streaming_behavior is None
            and self._run is not None
            and self._run.closing
        ):
            self._defer_prompt(command)  # the run only settles now: next, not refused
            return
        match command:
            case Prompt():
                if self._maintenance is not None:
                    command.accepted.fail(PitrioError(COMPACTION_RUNNING))
                    command.settled.fail(PitrioError(COMPACTION_RUNNING))
                    return
                if self._funnel is not None and self._funnel.needs(command):
                    self._funnel.enter(command)  # extension handlers run outside the inbox
                    return
                await self._prompt(command)
            case Invoke(operation=operation, reply=reply):
                try:
                    reply.set(await operation(self))
                except PitrioError as exc:
                    reply.fail(exc)
            case Bash(command=text, exclude_from_context=exclude, reply=reply):
                self._shell.start(self.nursery, text, exclude, reply, lambda: self._run is not None)
            case Navigate(reply=reply):
                if self._run is not None or self._maintenance is not None:
                    reply.fail(PitrioError("Cannot navigate the tree while the agent is busy"))
                    return
                self._maintenance = _Maintenance()  # nothing else may change the tree meanwhile
                self.nursery.start_soon(self._navigate_command, command)
            case Compact(custom_instructions=instructions, reply=reply):
                if self._maintenance is not None:
                    reply.fail(PitrioError(COMPACTION_RUNNING))
                    return
                self._maintenance = _Maintenance()
                self.nursery.start_soon(self._compact_command, instructions, reply)
            case Queue(text=text, images=images, kind=kind, reply=reply):
                extension_command = None if self._host is None else self._host.command_name(text)
                if extension_command is not None:
                    reply.fail(PitrioError(queued_command_error(extension_command)))
                    return
                reply.set(await self._queue(await self._expand(text), images, kind))
            case ClearQueue(reply=reply):
                removed = (tuple(self._steering), tuple(self._follow_up))
                self._steering.clear()
                self._follow_up.clear()
                self._steering_ids.clear()
                self._follow_up_ids.clear()
                await self._loop.clear_queues()
                self._emit(QueueUpdate(steering=(), follow_up=()))
                reply.set(removed)
            case Abort(reply=reply, detach=detach):
                if detach and self._run is not None:
                    self._run.detached = True
                for busy in (self._maintenance, self._run):
                    if busy is not None and busy.work is not None:
                        busy.work.cancel()  # the supervisor's step in progress, at once
                if self._run is None:
                    reply.set(None)
                else:
                    self._run.abort_waiters.append(reply)
                    self._run.scope.cancel()
            case WaitForIdle(reply=reply):
                if self._run is None:
                    reply.set(None)
                else:
                    self._run.idle_waiters.append(reply)  # woken by its settle
            case GetState(reply=reply):
                reply.set(await self._snapshot())
            case Subscribe(capacity=capacity, reply=reply):
                reply.set(self._subscribe(capacity))
            case SubscribeInto(capacity=capacity, send=send, reply=reply):
                self._add_subscriber(capacity, send)
                reply.set(None)
            case PumpBarrier():
                self._barriers.append(command)
                self._release_barriers()
            case UiAnswer() | Lifecycle():
                if self._host is not None:
                    await self._host.tell(command)  # the host's inbox never waits for ours
                elif isinstance(command, Lifecycle):
                    command.reply.set(False)

    async def _expand(self, text: str) -> str:
        """``/skill:`` and prompt-template expansion (file reads happen in a thread)."""
        resources = self._resources
        if resources is None or not text.startswith("/"):
            return text
        return await trio.to_thread.run_sync(lambda: expand_input(text, resources))

    async def commands(self) -> list[dict[str, Any]]:
        """``get_commands``: prompt templates and skills (extension commands come first)."""
        await trio.lowlevel.checkpoint()
        listed = [] if self._host is None else self._host.commands()
        return listed + (commands(self._resources) if self._resources is not None else [])

    async def _prompt(self, command: Prompt) -> None:
        if self._write_failure is not None:  # nothing could be recorded: refuse, say why
            refused = ReadOnlySessionError(str(self._write_failure))
            command.accepted.fail(refused)
            command.settled.fail(refused)
            return
        if command.expand:
            command = attrs.evolve(command, text=await self._expand(command.text))
        if self._run is not None:
            if command.streaming_behavior is None:
                command.accepted.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                command.settled.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                return
            await self._queue(command.text, command.images, command.streaming_behavior)
            command.accepted.set(self._seq)
            command.settled.set(None)
            return
        self._runs += 1
        run = _Run(number=self._runs, scope=trio.CancelScope(), settled=[command.settled])
        self._run = run
        message = user_message(command.text, command.images)
        self.nursery.start_soon(self._run_one, run, message, command.accepted)

    async def _queue(
        self, text: str, images: tuple[ImageContent, ...], kind: StreamingBehavior
    ) -> str:
        message = user_message(text, images)
        queue_id = secrets.token_hex(6)
        # The agent loop holds the message before the display says so: a run that sees a
        # queued text may continue and find the message there.
        if kind == "followUp":
            await self._loop.follow_up(message)
            self._follow_up.append(text)
            self._follow_up_ids.append(queue_id)
        else:
            await self._loop.steer(message)
            self._steering.append(text)
            self._steering_ids.append(queue_id)
        self._emit(QueueUpdate(steering=tuple(self._steering), follow_up=tuple(self._follow_up)))
        return queue_id

    # -- the run -----------------------------------------------------------------------------

    async def _run_one(self, run: _Run, prompt: UserMessage, accepted: Reply[int]) -> None:
        """A user prompt's run: preflight (pending bash, compaction check), then the run."""

        async def start() -> RunResult:
            await self._flush_pending_bash()
            await self._before_prompt(run)
            next_turn, self._next_turn = self._next_turn, []
            patch = await self._system_patch()
            added = () if self._host is None else await self._host.before_agent_start(
                text_of(prompt.content), _images_of(prompt)
            )
            accepted.set(self._seq)  # pi answers a prompt after its preflight
            return await self._loop.run_prompt((*patch, prompt, *next_turn, *added))

        await self._drive(run, start)
        if run.failure is not None:
            accepted.fail(run.failure)  # failed in its preflight (an answer set before stays)

    async def _drive(self, run: _Run, start: Callable[[], Awaitable[RunResult]]) -> None:
        """Run an accepted run to its settle: the low-level runs and what the supervisor
        decides after each, inside the run's cancel scope; then the shielded finaliser."""
        try:
            with run.scope:
                result = await start()
                while True:
                    decision = await self._take_decision(result.run)
                    follow = await self._after_low_run(run, decision)
                    if follow is None and self._queued() and not run.scope.cancel_called:
                        # Queued after the loop's last poll (e.g. a steer sent on agent_end):
                        # the accepted run delivers it before settling.
                        follow = await self._continue()
                    if follow is None:
                        break
                    result = follow
        except ReadOnlySessionError as exc:
            self._read_only(exc)
        finally:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + FINALIZE_SECONDS):
                await self._finish_run(run)

    async def _system_patch(self) -> tuple[SystemMessage, ...]:
        """A ``system`` message for the sections that changed since the transcript last saw
        the system prompt (tools activated, skills, the date); the prompt itself stays, so a
        provider's prompt cache does too. Before any message, the prompt is simply rebuilt."""
        if self._resources is None or self._tools is None or not self._sent_sections:
            return ()
        # The sections depend on the resources (fixed for the session), the tools and the date:
        # rebuild them only when one of the last two changed (this runs before every prompt).
        inputs = (await self._tools.prompt_entries(), today())
        if inputs == self._section_inputs:
            return ()
        first_look = self._section_inputs is None
        self._section_inputs = inputs
        current = system_prompt_sections(self._resources, inputs[0], date=inputs[1])
        if first_look and current == self._sent_sections:
            return ()
        patch = system_prompt_patch(self._sent_sections, current)
        if patch is None:
            return ()
        self._sent_sections = current
        if (await self._loop.state()).message_count == 0:
            rendered = render_sections(current)
            if self._host is not None:
                await self._host.set_base_prompt(rendered)
            await self._loop.configure(system_prompt=rendered)
            return ()
        return (SystemMessage(content=patch.render(), timestamp=now_ms()),)

    def _queued(self) -> bool:
        return bool(self._steering or self._follow_up)

    async def _before_prompt(self, run: _Run) -> None:
        """The compaction check before a new prompt runs (pi's preflight, spec §3.4.1 step 7):
        the supervisor's, which compacts in a nursery the run lends when it must."""
        facts = self._loop.facts()  # what the loop published: no round trip before each prompt
        last = facts.last_assistant
        if last is None:
            return
        check = CompactionCheck(
            message=last,
            context_window=facts.model.context_window,
            same_model=is_same_model(last, facts.model),
            settings=self.supervisor.view().settings.compaction,
        )
        if self.supervisor.wants_before_prompt(check):
            last_id = self._entry_id_of(last)
            await self._lent(
                run,
                lambda lent: self.supervisor.before_prompt(check, last_entry_id=last_id, lent=lent),
            )

    async def _lent(
        self, busy: _Run | _Maintenance, call: Callable[[Lent], Awaitable[T]]
    ) -> T | None:
        """``call`` with a nursery lent to the supervisor, in a scope abort cancels (``busy``'s
        ``work``); ``None`` when abort cancelled it. An error of the call is raised here, not
        as a group out of the nursery."""
        result: T | None = None
        error: Exception | None = None
        with trio.CancelScope() as scope:
            busy.work = scope
            try:
                async with trio.open_nursery() as nursery:
                    try:
                        result = await call(Lent(nursery, scope))
                    except Exception as exc:
                        error = exc
            finally:
                busy.work = None
        if error is not None:
            raise error
        return result

    async def _lent_summary(
        self,
        entries: tuple[SessionEntry, ...],
        model: Model,
        custom_instructions: str | None,
        replace_instructions: bool,
    ) -> BranchSummaryResult | None:
        """A navigation's branch summary, the supervisor's; ``None`` when aborted."""
        maintenance = self._maintenance
        assert maintenance is not None  # navigations run as maintenance
        return await self._lent(
            maintenance,
            lambda lent: self.supervisor.summarize_branch(
                entries,
                model,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                lent=lent,
            ),
        )

    def _entry_id_of(self, message: AgentMessage | None) -> str | None:
        """The id of the entry ``message`` was recorded as in this process, if it was."""
        known = None if message is None else self._entry_ids.get(id(message))
        return None if known is None else known[1]

    async def _compact_command(
        self, instructions: str | None, reply: Reply[CompactionResult]
    ) -> None:
        """Manual compaction: a run in progress is aborted first (pi)."""
        maintenance = self._maintenance
        assert maintenance is not None
        try:
            run = self._run
            if run is not None:
                waiter: Reply[None] = Reply()
                run.detached = True  # pi: the aborted reply is neither reported nor kept
                run.abort_waiters.append(waiter)
                run.scope.cancel()
                await waiter.wait()
            result = await self._lent(
                maintenance, lambda lent: self.supervisor.compact(instructions, lent)
            )
            if result is None:
                raise CompactionCancelled(COMPACTION_CANCELLED)
        except PitrioError as exc:
            reply.fail(exc)
        else:
            reply.set(result)
        finally:
            self._maintenance = None

    async def emitted_seq(self) -> int:
        """The ``seq`` of the last event this session emitted (0 before any)."""
        await trio.lowlevel.checkpoint()
        return self._seq

    async def abort_retry(self) -> None:
        """Cancel a pending retry sleep (the supervisor's)."""
        await self.supervisor.abort_retry()

    async def send_custom_message(
        self,
        message: CustomMessage,
        *,
        trigger_turn: bool,
        deliver_as: Literal["steer", "followUp", "nextTurn"] | None,
    ) -> None:
        """pi's ``sendCustomMessage`` (spec §3.5): queue it, start a run with it, or record it."""
        if deliver_as == "nextTurn":
            self._next_turn.append(message)
        elif self._run is not None:
            if deliver_as == "followUp":
                await self._loop.follow_up(message)
            else:
                await self._loop.steer(message)
        elif trigger_turn:
            self._runs += 1
            run = _Run(number=self._runs, scope=trio.CancelScope(), settled=[])
            self._run = run
            self.nursery.start_soon(self._run_custom, run, message)
        else:
            await self._loop.append_message(message)
            self._emit(MessageStart(message=message))
            self._emit(MessageEnd(message=message))
            await self._persist(message)

    async def append_custom_entry(self, custom_type: str, data: Any = None) -> str:
        """An extension's ``custom`` entry (state, not context); its id."""
        entry = await self._store.append_custom_entry(custom_type, data)
        self._emit(EntryAppended(entry=entry))
        return entry.id

    async def set_label(self, entry_id: str, label: str | None) -> None:
        """Label an entry (``None`` clears the label)."""
        if await self._store.get_entry(entry_id) is None:
            raise PitrioError(f"Entry {entry_id} not found")
        entry = await self._store.append_label_change(entry_id, label)
        self._emit(EntryAppended(entry=entry))

    async def _run_custom(self, run: _Run, message: CustomMessage) -> None:
        """A run whose prompt is a custom message (no preflight, as in pi)."""
        await self._drive(run, lambda: self._loop.run_prompt((message,)))

    async def _navigate_command(self, command: Navigate) -> None:
        try:
            result = await navigate_tree(
                command.target_id,
                store=self._store,
                loop=self._loop,
                emit=self._emit,
                summarize=self._summarizer if command.summarize else None,
                custom_instructions=command.custom_instructions,
                replace_instructions=command.replace_instructions,
                label=command.label,
            )
        except PitrioError as exc:
            command.reply.fail(exc)
        else:
            command.reply.set(result)
        finally:
            self._maintenance = None

    async def _flush_pending_bash(self) -> None:
        try:
            await self._shell.flush()
        except ReadOnlySessionError as exc:
            self._read_only(exc)

    def _read_only(self, failure: ReadOnlySessionError) -> None:
        """The session file cannot be written: stop the run (nothing it did could be recorded)
        and refuse prompts from now on; the run's ``prompt()`` raises ``failure``."""
        if self._write_failure is None:
            self._write_failure = failure
            self._emit(SessionReadOnly(error=str(failure)))  # clients learn it once, at once
        run = self._run
        if run is not None:
            if run.failure is None:
                run.failure = failure
            run.scope.cancel()

    async def abort_bash(self) -> None:
        """Cancel the running user command, if any."""
        await trio.lowlevel.checkpoint()
        self._shell.abort()

    async def fork_messages(self) -> list[tuple[str, str]]:
        """Every user message of the file (all branches) with text: (entry id, text)."""
        return [(m.entry_id, m.text) for m in await self._store.user_messages_for_forking()]

    async def last_assistant_text(self) -> str | None:
        """The last assistant reply's text (pi's ``getLastAssistantText``)."""
        return last_assistant_text((await self._loop.state()).messages)

    async def export_html(self, output_path: str | None) -> str:
        """Write the session as a self-contained HTML page; returns its path. A session kept
        in a database exports like a file's (its default name is the file name it would have)."""
        path = self._store.path
        if path is None:
            status = await self._store.status()
            if status.location is None:
                raise PitrioError(IN_MEMORY_EXPORT)
            if not status.persisted:
                raise PitrioError(EMPTY_EXPORT)
            header = self._store.header
            name = session_file_name(header.timestamp, header.id)
        elif not await trio.Path(path).exists():
            raise PitrioError(EMPTY_EXPORT)
        else:
            name = path.name
        state = await self._loop.state()
        page = export_html(
            self._store.header,
            await self._store.entries(),
            await self._store.leaf_id(),
            system_prompt=state.system_prompt,
            tools=[],
        )
        target = output_path or default_html_name(name)  # answered as given (pi: relative)
        await write_export(target, page)
        return target

    async def export_jsonl(self, output_path: str | None) -> str:
        """Write the current branch as a new linear session file; returns its path."""
        branch = known_entries(await self._store.branch_entries())
        data = export_jsonl(self._store.header, branch)
        target = await trio.Path(output_path or default_jsonl_name()).absolute()
        await write_export(str(target), data)
        return str(target)

    def _summarizer(self) -> SummarizeBranch:
        """A navigation's summary call (raises when this session cannot make requests)."""
        self._stream_call()
        return self._lent_summary

    def _stream_call(self) -> StreamCall:
        if self._stream is None:
            raise PitrioError("No model router: this session cannot make model requests")
        return self._stream

    async def _after_low_run(self, run: _Run, decision: PostRunDecision) -> RunResult | None:
        """Carry out the supervisor's decision for a low-level run; the next run's result."""
        match decision.action:
            case Retry() | CompactAction() as action:
                failed_id = self._entry_id_of(action.failed)
                step = await self._lent(
                    run,
                    lambda lent: self.supervisor.carry_out(
                        action, failed_entry_id=failed_id, run_scope=run.scope, lent=lent
                    ),
                )
                # After a compaction the boundary does not run (pi): only a continuation.
                return await self._continue() if isinstance(step, Continue) else None
            case Continue():
                return await self._continue()
            case BeforeSettle():
                requested, can_continue = False, True
                if self._host is not None and self._host.wants_settle_boundary():
                    last = (await self._loop.run_facts()).last_assistant
                    outcome = _outcome(last, self._run)
                    requested, can_continue = await self._host.settle_boundary(outcome)
                # The display queues, not a round trip to the loop: the loop holds a queued
                # message before the display does, and the pump has seen every delivery of
                # this run; one whose display entry is not in yet is delivered by the next
                # run, as one sent after the settle would be (issue 7: a round trip less
                # between agent_end and the settle, which a prompt sent on agent_end awaits).
                after: End | Continue = decide_after_boundary(
                    abort_requested=self._run is None or self._run.scope.cancel_called,
                    continue_requested=requested,
                    has_queued_messages=self._queued(),
                    can_continue=can_continue,
                )
                return await self._continue() if isinstance(after, Continue) else None
            case End():
                return None
        return None

    async def _continue(self) -> RunResult:
        """Continue the agent loop from the projected context."""
        await self._loop.set_messages(await self._log.context_messages())
        return await self._loop.run_continue()

    async def _take_decision(self, number: int) -> PostRunDecision:
        """The pump's decision for low-level run ``number`` (it has processed that run)."""
        while True:
            try:  # the pump is usually done with the run already: no task switch then
                taken, decision = self._decided.receive_nowait()
            except trio.WouldBlock:
                taken, decision = await self._decided.receive()
            self._decisions_taken = taken
            if taken >= number:
                return decision

    async def _drop_decisions(self, number: int) -> None:
        """Wait until the pump has processed low-level run ``number``; drop its decisions."""
        while self._decisions_taken < number:
            self._decisions_taken, _ = await self._decided.receive()
        with suppress(trio.WouldBlock):
            while True:
                self._decisions_taken, _ = self._decided.receive_nowait()

    async def _finish_run(self, run: _Run) -> None:
        """The shielded finaliser: stop the loop, drain its events, settle, run deferred work."""
        if run.scope.cancelled_caught or run.abort_waiters:
            await self._loop.abort()
            state = await self._loop.state()
            await self._drop_decisions(state.runs)
            await self.supervisor.run_aborted()
        settled = AgentSettled()
        self._emit(settled)
        self._notify_extensions("agent_settled", settled)
        self._run = None
        for reply in run.settled:
            if run.failure is not None:
                reply.fail(run.failure)
            else:
                reply.set(None)
        for reply in (*run.abort_waiters, *run.idle_waiters):
            reply.set(None)
        # The deferred channel, drained in arrival order until one of them starts a run (the
        # rest then wait for that run's settle).
        while self._run is None:
            try:
                deferred = self._deferred.receive_nowait()
            except trio.WouldBlock:
                break
            await self.handle(deferred)

    def _defer_prompt(self, command: Prompt) -> None:
        try:
            self._defer.send_nowait(command)
        except trio.WouldBlock:  # overflow policy: refuse, saying why (nothing is dropped)
            refused = SessionBusyError(TOO_MANY_DEFERRED)
            command.accepted.fail(refused)
            command.settled.fail(refused)

    # -- the event pump ----------------------------------------------------------------------

    async def _pump(self, events: trio.MemoryReceiveChannel[AgentEvent | RunEndFacts]) -> None:
        async with events:
            async for event in events:
                self._pump_busy = True
                await self._on_agent_event(event)
                # Take what else is queued without a task switch per event (issue 7).
                while True:
                    try:
                        event = events.receive_nowait()
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                    await self._on_agent_event(event)
                self._pump_busy = False
                self._release_barriers()

    async def _on_agent_event(self, event: AgentEvent | RunEndFacts) -> None:
        if isinstance(event, RunEndFacts):
            self._end_facts = event.facts  # for the agent_end that follows
            return
        if self._run is not None and self._run.detached:
            await self._on_detached_event(event)
            return
        if isinstance(event, MessageStart) and isinstance(event.message, UserMessage):
            await self.supervisor.user_message_started()
            queue_id = self._take_from_display(text_of(event.message.content))
            if queue_id is not None:
                event = attrs.evolve(event, queue_id=queue_id)
        if self._host is not None:
            if isinstance(event, AgentStart):
                self._turn_index = -1
            elif isinstance(event, TurnStart):
                self._turn_index += 1
            event = await self._host.agent_event(event)  # extensions first, then subscribers
        decision: PostRunDecision | None = None
        if isinstance(event, AgentEnd):
            # Decide now, so agent_end can say whether a retry follows (seed willRetry).
            decision = await self._decide(event)
            event = attrs.evolve(event, will_retry=decision.will_retry)
            if self._run is not None:
                self._run.closing = _only_settles(decision.action)
        elif isinstance(event, AgentStart) and self._run is not None:
            self._run.closing = False
        self._emit(event)
        if isinstance(event, MessageEnd):
            try:
                await self._persist(event.message)
            except ReadOnlySessionError as exc:
                self._read_only(exc)  # the pump goes on; the run stops, the session stays up
            if isinstance(event.message, AssistantMessage):
                succeeded = await self.supervisor.assistant_message_ended(event.message)
                if succeeded is not None:
                    self._emit(succeeded)
        elif decision is not None:
            for follow in decision.events:
                self._emit(follow)
            self._agent_ends += 1
            try:  # without a task switch (there is room: see DECISION_CAPACITY)
                self._decided_send.send_nowait((self._agent_ends, decision))
            except trio.WouldBlock:
                await self._decided_send.send((self._agent_ends, decision))

    async def _on_detached_event(self, event: AgentEvent) -> None:
        """An event of a run a replacing command aborted: not reported, not recorded, not
        shown to extensions; its ``agent_end`` still goes through the decision channel the
        run's finaliser drains."""
        if isinstance(event, AgentEnd):
            decision = await self._decide(event)
            self._agent_ends += 1
            try:
                self._decided_send.send_nowait((self._agent_ends, decision))
            except trio.WouldBlock:
                await self._decided_send.send((self._agent_ends, decision))

    async def _decide(self, event: AgentEnd) -> PostRunDecision:
        # The loop sent its facts right before this agent_end: no round trip before it goes
        # out (issue 7). Asked only if they did not come.
        facts, self._end_facts = self._end_facts, None
        if facts is None:
            facts = await self._loop.run_facts()
        last = _last_assistant(event.messages)
        run = self._run
        settings = self.supervisor.view().settings
        ended = RunEnded(
            retry_settings=settings.retry,
            compaction_settings=settings.compaction,
            last_assistant=last,
            abort_requested=run is None or run.scope.cancel_called,
            has_queued_messages=facts.has_queued,
            context_window=facts.model.context_window,
            same_model=last is not None and is_same_model(last, facts.model),
            retry_after_ms=retry_after_ms(last) if last is not None else None,
        )
        return await self.supervisor.decide(ended)

    def _take_from_display(self, text: str) -> str | None:
        """Remove a delivered text from the display queues; its queue id, if it was queued."""
        for queue, ids in (
            (self._steering, self._steering_ids),
            (self._follow_up, self._follow_up_ids),
        ):
            if text in queue:
                index = queue.index(text)
                del queue[index]
                queue_id = ids.pop(index)
                self._emit(
                    QueueUpdate(steering=tuple(self._steering), follow_up=tuple(self._follow_up))
                )
                return queue_id
        return None

    async def _persist(self, message: AgentMessage) -> None:
        entry: SessionEntry
        if isinstance(message, CustomMessage):
            entry = await self._store.append_custom_message_entry(
                message.custom_type, message.content, message.display, message.details
            )
            self._emit(EntryAppended(entry=entry))
            return
        if message.role not in ("user", "assistant", "toolResult", "system"):
            return  # bash messages are recorded by their own path, summaries are derived
        entry = await self._log.append_message(message)
        self._entry_ids[id(message)] = (message, entry.id)
        self._emit(EntryAppended(entry=entry))

    def _pump_caught_up(self) -> bool:
        events = self._events
        return not self._pump_busy and (
            events is None or events.statistics().current_buffer_used == 0
        )

    def _release_barriers(self) -> None:
        if self._barriers and self._pump_caught_up():
            barriers, self._barriers = self._barriers, []
            for barrier in barriers:
                ids = tuple(self._entry_id_of(message) for message in barrier.messages)
                barrier.reply.set(PumpState(self._turn_index, ids))

    def _subscribe(self, capacity: int) -> trio.MemoryReceiveChannel[Sequenced]:
        return self._outlet.subscribe(capacity, self.nursery)

    def _add_subscriber(self, capacity: int, send: trio.MemorySendChannel[Sequenced]) -> None:
        self._outlet.add(capacity, send, self.nursery)

    def _emit(self, event: AgentSessionEvent) -> None:
        self._outlet.emit(event)

    @property
    def _seq(self) -> int:
        """The ``seq`` of the last event emitted (0 before any)."""
        return self._outlet.seq

    async def _snapshot(self) -> SessionState:
        supervisor = self.supervisor.view()
        return SessionState(
            agent=await self._loop.state(),
            is_running=self._run is not None,
            is_settling=self._run is not None and self._run.closing,
            is_retrying=supervisor.state.retry.retrying,
            retry_attempt=supervisor.state.retry.attempt,
            steering=tuple(self._steering),
            follow_up=tuple(self._follow_up),
            session_id=self._log.header.id,
            session_file=str(self._log.path) if self._log.path else None,
            is_compacting=supervisor.compacting,
            auto_compaction_enabled=supervisor.settings.compaction.enabled,
            auto_retry_enabled=supervisor.settings.retry.enabled,
            session_name=await self._store.session_name(),
            write_error=None if self._write_failure is None else str(self._write_failure),
        )


def _outcome(last: AssistantMessage | None, run: _Run | None) -> str:
    """``agent_before_settle``'s outcome for the run as it stands."""
    if run is None or run.scope.cancel_called or (last and last.stop_reason == "aborted"):
        return "aborted"
    return "error" if last is not None and last.stop_reason == "error" else "completed"


def _images_of(message: UserMessage) -> tuple[ImageContent, ...]:
    content = message.content
    if isinstance(content, str):
        return ()
    return tuple(part for part in content if isinstance(part, ImageContent))


def _last_assistant(messages: Sequence[AgentMessage]) -> AssistantMessage | None:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return message
    return None
