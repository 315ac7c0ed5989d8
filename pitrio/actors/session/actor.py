"""The session actor: pi's ``AgentSession`` as an actor (``DESIGN.md`` §2-§3).

It owns one session: the agent loop (a child actor), the persistence log, the display queues,
the run lifecycle and the subscribers. Commands arrive on its inbox in order; a *run* (one
accepted prompt, from acceptance to ``agent_settled``) is a task in the actor's nursery inside a
cancel scope, and abort is that scope's cancellation.

The actor owns objects with state of their own, each touched only by the actor's tasks: the
*event pump* (:mod:`~pitrio.actors.session.pump`, one task that takes the agent loop's events
in emission order, updates the queue display, hands them to subscribers and persists messages
at ``message_end``), the *run driver* (:mod:`~pitrio.actors.session.driver`, whose runs wait for
the pump to have processed their low-level run, by number, before deciding what comes next, so
decisions always see persisted state) and the display queues
(:mod:`~pitrio.actors.session.queues`). The inbox here accepts, refuses or hands over.
"""

from __future__ import annotations

import contextvars
import os
import secrets
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors._actor import Actor, Reply
from pitrio.actors.agent_loop import AgentLoopHandle, LoopHooks
from pitrio.actors.mcp.state import McpServerState
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
    Queue,
    SessionBusyError,
    SessionCommand,
    SessionSettings,
    SessionState,
    Stamped,
    StreamingBehavior,
    Subscribe,
    SubscribeInto,
    SubscribeSink,
    WaitForIdle,
)
from pitrio.actors.session.driver import DriverSettings, RunDriver
from pitrio.actors.session.emitter import EventOutlet
from pitrio.actors.session.export import write_session_html, write_session_jsonl
from pitrio.actors.session.extensions.asks import Lifecycle, UiAnswer
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.funnel import PromptFunnel
from pitrio.actors.session.handle import DEFAULT_SUBSCRIBER_CAPACITY, SessionHandle
from pitrio.actors.session.log import SessionLog
from pitrio.actors.session.operations import (
    COMPACTION_RUNNING,
    SessionOperations,
    SummarizeBranch,
    TreeHooks,
    last_assistant_text,
    navigate_tree,
)
from pitrio.actors.session.policy import PROMPT_DURING_COMPACTION, STREAMING_WITHOUT_BEHAVIOR
from pitrio.actors.session.pump import DECISION_CAPACITY, Decided, EventPump
from pitrio.actors.session.queues import DisplayQueues
from pitrio.actors.session.resources.extension_paths import extend_resources
from pitrio.actors.session.resources.loader import (
    Resources,
    commands,
    expand_input,
    with_section,
)
from pitrio.actors.session.run import Maintenance, Run, lend
from pitrio.actors.session.shell import UserShell
from pitrio.actors.session.warming import UNAVAILABLE_WARMING, SessionWarming
from pitrio.actors.session_store.command_stamp import CommandStamp, stamping
from pitrio.actors.supervisor.actor.compactor import StreamCall
from pitrio.actors.supervisor.actor.shell import (
    CompactionCancelled,
    Supervisor,
    SupervisorHandle,
    SupervisorSettings,
)
from pitrio.actors.supervisor.branch_summary import BranchSummaryResult
from pitrio.actors.supervisor.compaction import (
    COMPACTION_CANCELLED,
)
from pitrio.actors.tool_executor import ToolExecutorHandle
from pitrio.actors.tool_executor.tools.images import normalize_prompt_images
from pitrio.errors import PitrioError, ReadOnlySessionError
from pitrio.messages.agent import (
    AgentMessage,
    CustomMessage,
    LlmMessage,
    UserMessage,
    user_message,
)
from pitrio.messages.content import ImageContent
from pitrio.messages.convert import PrefixConverter
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.events import (
    AgentSessionEvent,
    CompactionEnd,
    EntryAppended,
    EntryRecorded,
    ExtensionError,
    ExtensionUiRequest,
    MessageEnd,
    MessageStart,
    QueueUpdate,
    SessionReadOnly,
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
    "SubscribeSink",
    "WaitForIdle",
]

if TYPE_CHECKING:
    from pitrio.actors.model_router import ModelRouterHandle
    from pitrio.actors.session.extensions.asks import ModelScope, ShutdownRequest
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle
    from pitrio.actors.session.extensions.runner import ExtensionRunner
    from pitrio.actors.session_store.actor import SessionStoreHandle
    from pitrio.actors.session_store.commands import StoreNotice
    from pitrio.actors.session_store.tree import TreeNode


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
        extension_mode: str = "print",
        project_trusted: bool = True,
        save_model_defaults: bool = False,
        named_models: tuple[Model, ...] = (),
        extra_models: Callable[[], tuple[Model, ...]] | None = None,
        model_scope: ModelScope | None = None,
        shutdown: ShutdownRequest | None = None,
        start_reason: str = "startup",
        tools: ToolExecutorHandle | None = None,
        mcp_servers: Callable[[], tuple[McpServerState, ...]] | None = None,
        restore_tools: Callable[[Sequence[AgentMessage]], Awaitable[None]] | None = None,
        before_prompt: Callable[[], Awaitable[object]] | None = None,
        capacity: int = 256,
    ) -> None:
        super().__init__(name="session", capacity=capacity)
        self._loop = loop
        self._mcp_servers = mcp_servers
        self._restore_tools = restore_tools
        self._store = store
        self._log: SessionLog = store
        self._router = router
        self._stream = stream or (router.stream if router is not None else None)
        self._agent_dir = agent_dir
        self._scoped_models = scoped_models
        self._resources = resources
        self._cwd = store.header.cwd
        self._maintenance: Maintenance | None = None
        self._settings = settings or SessionSettings()
        self._outlet = EventOutlet()
        # The outlet's emit itself, bound once, goes to every part that emits (not a method
        # of the actor calling it: a call less per event).
        self._emit = self._outlet.emit
        self._shell = UserShell(
            loop=loop,
            store=store,
            emit=self._emit,
            cwd=self._cwd,
            shell_path=self._settings.shell_path,
            command_prefix=self._settings.shell_command_prefix,
            intercept=self._user_bash_hook,
        )
        self._queues = DisplayQueues(self._emit)
        self._driver_settings = DriverSettings(
            resources, tools, self._catch_up, before_prompt=before_prompt
        )
        self._merges_seen = 0  # the store's count of other writers' entries taken in
        self._notices: list[StoreNotice] = []  # handed over by the store, not forwarded yet
        self._actor_context = contextvars.Context()  # this actor's, once started
        self._extensions = extensions
        self._ui_clients = ui_clients
        self._extension_mode = extension_mode
        self._project_trusted = project_trusted
        self._save_model_defaults = save_model_defaults
        self._named_models = named_models
        self._extra_models = extra_models
        self._model_scope = model_scope
        self._shutdown_request = shutdown
        self._start_reason = start_reason
        # The extension host (with extensions only) and the funnel that keeps its prompts'
        # order; the event pump and the run driver, made once the supervisor is up.
        self._host: ExtensionHostHandle | None = None
        self.warming: SessionWarming | None = None
        """The prompt-cache warmer (with a model router only)."""
        self._funnel: PromptFunnel | None = None

    async def started(self) -> None:
        # The session decides what reaches the model: custom, bash and summary messages too.
        # A converter of its own for the loop (only the loop's task calls it): a request
        # converts the messages added since the last one, not the whole transcript.
        converter = PrefixConverter(block_images=self._settings.block_images)

        async def convert(messages: Sequence[AgentMessage]) -> Sequence[LlmMessage]:
            return converter.convert(messages)

        host = None
        if self._extensions is not None:
            with _attrs_cache.caching():  # the host's modules: only sessions with extensions
                from pitrio.actors.session.extensions.host import ExtensionHost, HostSettings
                from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle

            host = ExtensionHost(
                settings=HostSettings(
                    runner=self._extensions,
                    ui_clients=self._ui_clients,
                    mode=self._extension_mode,
                    project_trusted=self._project_trusted,
                    stream=self._stream,
                    scope=self._model_scope,
                    shutdown=self._shutdown_request,
                ),
                session=self._self_handle(),
                loop=self._loop,
                store=self._store,
                outlet=self._outlet,
            )
            self._host = ExtensionHostHandle(host.address)  # started below, as before
            self._funnel = PromptFunnel(
                self._host, self._prompt, self._queue_command, lambda: self._seq, self.nursery
            )
        supervisor = Supervisor(
            loop=self._loop,
            store=self._store,
            stream=self._stream,
            emit=self._outlet.emit if host is None else self._supervisor_emit,
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
            save_model_defaults=self._save_model_defaults,
            named_models=self._named_models,
            extra_models=self._extra_models,
        )
        hooks = LoopHooks(convert_to_llm=convert)
        if self._stream is not None:
            self.warming = SessionWarming(
                self.nursery,
                session_id=self._store.header.id,
                loop=self._loop,
                store=self._store,
                stream=self._stream,
                emit=self._emit,
                mode=lambda: self._settings.cache_warming,
                host=self._host,
                retention=self._settings.cache_retention,
            )
            hooks = attrs.evolve(hooks, on_request=self.warming.on_request)
            self._driver_settings.on_settled = self.warming.settled
        if self._host is not None:
            hooks = self._host.hooks(hooks)
        await self._loop.configure(hooks=hooks)
        decided_send, decided = trio.open_memory_channel[Decided](DECISION_CAPACITY)
        self._pump = EventPump(
            events=await self._loop.subscribe_with_facts(capacity=1024),
            loop=self._loop,
            store=self._store,
            log=self._log,
            supervisor=self.supervisor,
            host=self._host,
            queues=self._queues,
            emit=self._emit,
            current_run=self._current_run,
            read_only=self._read_only,
            decided=decided_send,
        )
        self._driver = RunDriver(
            loop=self._loop,
            log=self._log,
            supervisor=self.supervisor,
            host=self._host,
            shell=self._shell,
            queues=self._queues,
            entry_id_of=self._pump.entry_id_of,
            decisions=decided,
            emit=self._emit,
            notify=self._notify_extensions,
            seq=lambda: self._seq,
            handle_deferred=self.handle,
            nursery=self.nursery,
            settings=self._driver_settings,
        )
        self.nursery.start_soon(self._pump.run)
        # The store hands its notices over in its own task; a task of this actor forwards
        # them, started when one comes: an idle session keeps no task and channel waiting
        # for a notice that seldom comes (issue 38). The task runs in this actor's context.
        self._actor_context = contextvars.copy_context()
        await self._store.deliver_notices(self._store_notice)
        if host is not None:
            # Not awaited: its handlers run once the session's handle is out (an extension's
            # late registrations need the session's port, set by whoever started the session).
            self.nursery.start_soon(host.run)
        if self._host is not None:
            from pitrio.actors.session.extensions.events import SessionStartEvent

            self._host.notify("session_start", SessionStartEvent(reason=self._start_reason))
        if self._host is not None and self._host.has("resources_discover"):
            self._driver.resources_ready = trio.Event()
            self.nursery.start_soon(self._discover_resources, self._host)

    async def _discover_resources(self, host: ExtensionHostHandle) -> None:
        """``resources_discover`` after ``session_start``: the skills and prompt templates at
        the paths handlers return join the session's (themes: pitrio has none)."""
        ready = self._driver.resources_ready
        try:
            resources = self._resources
            reason: Literal["startup", "reload"] = (
                "reload" if self._start_reason == "reload" else "startup"
            )
            cwd = resources.cwd if resources is not None else os.getcwd()
            paths = await host.discover_resources(cwd, reason)
            if resources is None or paths is None:
                return
            if paths.skill_paths or paths.prompt_paths:
                skills, prompts = paths.skill_paths, paths.prompt_paths
                extended = await trio.to_thread.run_sync(
                    lambda: extend_resources(resources, skills, prompts)
                )
                # A path that is missing or not markdown is told as the handler's problem.
                for problem in extended.diagnostics[len(resources.diagnostics) :]:
                    self._emit(
                        ExtensionError(
                            extension_path="<runtime>",
                            event="resources_discover",
                            error=str(problem),
                        )
                    )
                self._resources = extended
                self._driver.use_resources(extended)
        finally:
            if ready is not None:
                ready.set()

    def _store_notice(self, notice: StoreNotice) -> None:
        """Called by the store's task with each notice (never waits): queued for a task of
        this actor, started for the first one queued (it takes every one queued by then)."""
        queued = bool(self._notices)
        self._notices.append(notice)
        nursery = self._nursery
        if not queued and nursery is not None:  # a stopped actor forwards nothing
            self._actor_context.run(nursery.start_soon, self._forward_notices)

    async def _forward_notices(self) -> None:
        """What the store tells unasked, to clients: another writer's entries were taken in
        (``entries_merged``), or the store turned read-only by itself (its lease was lost:
        the run stops, prompts are refused, ``session_read_only`` says why, at once)."""
        notices, self._notices = self._notices, []
        for notice in notices:
            if isinstance(notice, SessionReadOnly):
                self._read_only(ReadOnlySessionError(notice.error))
            else:
                self._emit(notice)

    async def _catch_up(self) -> bool:
        """The store takes in another writer's entries; whether any came since last time."""
        count = await self._store.catch_up()
        moved, self._merges_seen = count != self._merges_seen, count
        return moved

    def _notify_extensions(self, event: str, payload: Any) -> None:
        """Queue a notification-only event for the extensions (never waits)."""
        if self._host is not None:
            self._host.notify(event, payload)

    def _supervisor_emit(self, event: AgentSessionEvent) -> None:
        """The supervisor's events; a failed or aborted compaction is also the extensions'
        ``session_compact_failed`` (pi 1.6.0)."""
        self._outlet.emit(event)
        if isinstance(event, CompactionEnd) and (event.aborted or event.error_message):
            from pitrio.actors.session.extensions.events import SessionCompactFailedEvent

            self._notify_extensions(
                "session_compact_failed",
                SessionCompactFailedEvent(
                    reason=event.reason,
                    aborted=event.aborted,
                    will_retry=event.will_retry,
                    error_message=event.error_message,
                ),
            )

    def notify_extensions(self, event: str, payload: Any) -> None:
        """Queue a notification-only event for the extensions, in order (never waits)."""
        self._notify_extensions(event, payload)

    async def _user_bash_hook(self, command: str, exclude: bool, cwd: str) -> Any:
        """The extensions' ``user_bash`` answer (in the shell's task, never the inbox's)."""
        if self._host is None:
            return None
        return await self._host.user_bash(command, exclude, cwd)

    def _self_handle(self) -> SessionHandle:
        return SessionHandle(self.address)

    def _current_run(self) -> Run | None:
        return self._driver.current

    def _read_only(self, failure: ReadOnlySessionError) -> None:
        self._driver.read_only(failure)

    @property
    def pump(self) -> EventPump:
        """The event pump (the trace tap reads the loop's progress from it and, replaying,
        sets its gate)."""
        return self._pump

    @property
    def _runs(self) -> int:
        """The number of the latest run (the trace tap's probe reads it)."""
        return self._driver.count

    # -- inbox -----------------------------------------------------------------------------

    async def handle(self, command: SessionCommand) -> None:
        if isinstance(command, Stamped):
            # Entries appended here and in the tasks started here carry the client's id.
            with stamping(command.stamp):
                await self.handle(command.command)
            return
        if (
            isinstance(command, Prompt)
            and command.streaming_behavior is None
            and self._driver.current is not None
            and self._driver.current.closing
        ):
            self._driver.defer(command)  # the run only settles now: next, not refused
            return
        match command:
            case Prompt():
                if self._maintenance is not None:
                    command.accepted.fail(PitrioError(PROMPT_DURING_COMPACTION))
                    command.settled.fail(PitrioError(PROMPT_DURING_COMPACTION))
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
                self._shell.start(
                    self.nursery,
                    text,
                    exclude,
                    reply,
                    lambda: self._driver.current is not None,
                    stream_id=command.stream_id,
                )
            case Navigate(reply=reply):
                if self._driver.current is not None or self._maintenance is not None:
                    reply.fail(PitrioError("Cannot navigate the tree while the agent is busy"))
                    return
                self._maintenance = Maintenance()  # nothing else may change the tree meanwhile
                self.nursery.start_soon(self._navigate_command, command)
            case Compact(custom_instructions=instructions, reply=reply):
                if self._maintenance is not None:
                    reply.fail(PitrioError(COMPACTION_RUNNING))
                    return
                self._maintenance = Maintenance()
                self.nursery.start_soon(self._compact_command, instructions, reply)
            case Queue(text=text, reply=reply):
                extension_command = None if self._host is None else self._host.command_name(text)
                if extension_command is not None:
                    from pitrio.actors.session.extensions.host_handle import queued_command_error

                    reply.fail(PitrioError(queued_command_error(extension_command)))
                    return
                if not command.filtered and self._funnel is not None and self._funnel.needs_queue():
                    self._funnel.enter(command)  # input handlers first (pi 1.6.0)
                    return
                await self._queue_command(command)
            case ClearQueue(reply=reply):
                removed = self._queues.clear()
                await self._loop.clear_queues()
                self._emit(QueueUpdate(steering=(), follow_up=()))
                reply.set(removed)
            case Abort(reply=reply, detach=detach):
                maintenance = self._maintenance
                if maintenance is None:
                    self._driver.abort(reply, detach=detach)
                else:
                    # A manual compaction or a navigation's summary stops too, and the abort
                    # is answered once it has (pi: when the session is idle); a run it is
                    # still waiting for is aborted with it.
                    maintenance.abort(reply)
                    self._driver.abort(Reply(), detach=detach)
            case WaitForIdle(reply=reply):
                self._driver.wait_for_idle(reply)  # woken by the run's settle
            case GetState(reply=reply):
                reply.set(await self._snapshot())
            case Subscribe(capacity=capacity, reply=reply):
                reply.set(self._subscribe(capacity))
            case SubscribeInto(capacity=capacity, send=send, reply=reply):
                self._add_subscriber(capacity, send)
                reply.set(None)
            case SubscribeSink(sink=sink, reply=reply):
                self._outlet.add_sink(sink)
                reply.set(None)
            case PumpBarrier():
                self._pump.barrier(command)
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
        failure = self._driver.write_failure
        if failure is not None:  # nothing could be recorded: refuse, say why
            refused = ReadOnlySessionError(str(failure))
            command.accepted.fail(refused)
            command.settled.fail(refused)
            return
        if command.expand:
            command = attrs.evolve(command, text=await self._expand(command.text))
        if self._driver.current is not None:
            if command.streaming_behavior is None:
                command.accepted.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                command.settled.fail(SessionBusyError(STREAMING_WITHOUT_BEHAVIOR))
                return
            await self._queue(
                command.text, command.images, command.streaming_behavior, command.stamp
            )
            command.accepted.set(Accepted(self._seq, "queued"))
            command.settled.set(None)
            return
        message = self._user_message(command.text, command.images, command.stamp)
        self._driver.start_prompt(message, command.accepted, command.settled)

    async def _queue_command(self, command: Queue) -> None:
        """Queue what the ``input`` handlers left of a steer or follow-up."""
        text = await self._expand(command.text)
        command.reply.set(await self._queue(text, command.images, command.kind, command.stamp))

    def _user_message(
        self, text: str, images: tuple[ImageContent, ...], stamp: CommandStamp | None = None
    ) -> UserMessage:
        """A prompt's user message, its images fitted or left out with a note (pi 1.6.0);
        with ``stamp``, its entry will carry the client's command id."""
        text, images = normalize_prompt_images(
            text, images, auto_resize=self._settings.auto_resize_images
        )
        message = user_message(text, images)
        if stamp is not None:
            self._pump.stamp(message, stamp)
        return message

    async def _queue(
        self,
        text: str,
        images: tuple[ImageContent, ...],
        kind: StreamingBehavior,
        stamp: CommandStamp | None = None,
    ) -> str:
        message = self._user_message(text, images, stamp)
        queue_id = secrets.token_hex(6)
        # The agent loop holds the message before the display says so: a run that sees a
        # queued text may continue and find the message there.
        if kind == "followUp":
            await self._loop.follow_up(message)
        else:
            await self._loop.steer(message)
        self._queues.add(kind == "followUp", text, queue_id)
        return queue_id

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
        return await lend(
            maintenance,
            lambda lent: self.supervisor.summarize_branch(
                entries,
                model,
                custom_instructions=custom_instructions,
                replace_instructions=replace_instructions,
                lent=lent,
            ),
        )

    async def _compact_command(
        self, instructions: str | None, reply: Reply[CompactionResult]
    ) -> None:
        """Manual compaction: a run in progress is aborted first (pi)."""
        maintenance = self._maintenance
        assert maintenance is not None
        try:
            # pi 1.6.0: the aborted partial reply is reported and kept, and compacted with
            # the rest (0.73.1 dropped it unreported).
            await self._driver.abort_and_wait()
            result = await lend(
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
            # pi: the compaction's caller hears first, an abort that stopped it after (its
            # wait for idle resumes later); answered in one step, their order would be chance.
            try:
                await trio.lowlevel.checkpoint()
            finally:
                maintenance.finish()

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
            self._driver.add_next_turn(message)
        elif self._driver.current is not None:
            if deliver_as == "followUp":
                await self._loop.follow_up(message)
            else:
                await self._loop.steer(message)
        elif trigger_turn:
            self._driver.start_custom(message)
        else:
            await self._loop.append_message(message)
            self._emit(MessageStart(message=message))
            self._emit(MessageEnd(message=message))
            await self._pump.persist(message)

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
        self._emit(EntryRecorded(entry=entry))

    async def _navigate_command(self, command: Navigate) -> None:
        maintenance = self._maintenance
        assert maintenance is not None  # set by the inbox before this task starts
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
                restore_tools=self._restore_tools,
                hooks=self._tree_hooks(),
            )
        except PitrioError as exc:
            command.reply.fail(exc)
        else:
            command.reply.set(result)
        finally:
            self._maintenance = None
            maintenance.finish()

    async def notify(self, message: str, notify_type: str) -> None:
        """See :meth:`SessionHandle.notify`."""
        await trio.lowlevel.checkpoint()
        self._emit(
            ExtensionUiRequest(
                id=str(uuid.uuid4()), method="notify", message=message, notify_type=notify_type
            )
        )

    async def set_prompt_section(self, name: str, text: str | None) -> None:
        """See :meth:`SessionHandle.set_prompt_section`."""
        await trio.lowlevel.checkpoint()
        if self._resources is not None:
            self._resources = with_section(self._resources, name, text)
            self._driver.use_resources(self._resources)

    def _tree_hooks(self) -> TreeHooks | None:
        """The extensions' ``session_before_tree`` / ``session_tree`` (none without them)."""
        host = self._host
        if host is None:
            return None
        return TreeHooks(before=host.before_tree, after=host.after_tree)

    async def abort_bash(self) -> None:
        """Cancel the running user command, if any."""
        await trio.lowlevel.checkpoint()
        self._shell.abort()

    async def entry_lines(self) -> tuple[list[tuple[str, bytes]], str | None]:
        """Every entry of the file (all branches, compacted history too) as (id, JSON), in
        append order, and the leaf id (``get_entries``)."""
        return await self._store.entry_lines()

    async def tree(self) -> tuple[list[TreeNode], str | None]:
        """The session tree's roots and the leaf id (``get_tree``)."""
        return await self._store.tree_and_leaf()

    async def fork_messages(self) -> list[tuple[str, str]]:
        """Every user message of the file (all branches) with text: (entry id, text)."""
        return [(m.entry_id, m.text) for m in await self._store.user_messages_for_forking()]

    async def last_assistant_text(self) -> str | None:
        """The last assistant reply's text (pi's ``getLastAssistantText``)."""
        return last_assistant_text((await self._loop.state()).messages)

    async def cache_warming(self) -> dict[str, Any]:
        """The warmer's mode and status (pi's wording when a session makes no requests)."""
        if self.warming is None:
            return {"mode": self._settings.cache_warming, "status": UNAVAILABLE_WARMING}
        return await self.warming.info()

    async def export_html(self, output_path: str | None) -> str:
        """Write the session as a self-contained HTML page; returns its path."""
        return await write_session_html(self._store, self._loop, output_path)

    async def export_jsonl(self, output_path: str | None) -> str:
        """Write the current branch as a new linear session file; returns its path."""
        return await write_session_jsonl(self._store, output_path)

    def _summarizer(self) -> SummarizeBranch:
        """A navigation's summary call (raises when this session cannot make requests)."""
        self._stream_call()
        return self._lent_summary

    def _stream_call(self) -> StreamCall:
        if self._stream is None:
            raise PitrioError("No model router: this session cannot make model requests")
        return self._stream

    def stopped(self) -> None:
        # Sinks are told delivery ended as a feeder's channel closes when the actor stops.
        self._outlet.close()

    def _subscribe(self, capacity: int) -> trio.MemoryReceiveChannel[Sequenced]:
        return self._outlet.subscribe(capacity, self.nursery)

    def _add_subscriber(self, capacity: int, send: trio.MemorySendChannel[Sequenced]) -> None:
        self._outlet.add(capacity, send, self.nursery)

    @property
    def _seq(self) -> int:
        """The ``seq`` of the last event emitted (0 before any)."""
        return self._outlet.seq

    async def _snapshot(self) -> SessionState:
        supervisor = self.supervisor.view()
        run, failure = self._driver.current, self._driver.write_failure
        return SessionState(
            agent=await self._loop.state(),
            is_running=run is not None,
            is_settling=run is not None and run.closing,
            is_retrying=supervisor.state.retry.retrying,
            retry_attempt=supervisor.state.retry.attempt,
            steering=self._queues.steering,
            follow_up=self._queues.follow_up,
            session_id=self._log.header.id,
            session_file=str(self._log.path) if self._log.path else None,
            is_compacting=supervisor.compacting,
            auto_compaction_enabled=supervisor.settings.compaction.enabled,
            auto_retry_enabled=supervisor.settings.retry.enabled,
            session_name=await self._store.session_name(),
            write_error=None if failure is None else str(failure),
            mcp_servers=() if self._mcp_servers is None else self._mcp_servers(),
        )
