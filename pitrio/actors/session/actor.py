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
    Bash,
    ClearQueue,
    Compact,
    GetState,
    Invoke,
    Navigate,
    Prompt,
    PumpBarrier,
    Queue,
    SessionCommand,
    SessionSettings,
    Stamped,
    Subscribe,
    SubscribeInto,
    SubscribeSink,
    WaitForIdle,
)
from pitrio.actors.session.discovery import discover_resources
from pitrio.actors.session.driver import DriverSettings, RunDriver
from pitrio.actors.session.emitter import EventOutlet
from pitrio.actors.session.extensions.asks import Lifecycle, UiAnswer
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.funnel import PromptFunnel
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session.intake import PromptIntake
from pitrio.actors.session.log import SessionLog
from pitrio.actors.session.maintenance import MaintenanceGate, TreeParts
from pitrio.actors.session.notices import StoreNotices
from pitrio.actors.session.operations import SessionOperations
from pitrio.actors.session.policy import PROMPT_DURING_COMPACTION
from pitrio.actors.session.pump import DECISION_CAPACITY, LOOP_EVENTS, Decided, EventPump
from pitrio.actors.session.queries import SessionQueries
from pitrio.actors.session.queues import DisplayQueues
from pitrio.actors.session.resources.loader import (
    Resources,
    commands,
    with_section,
)
from pitrio.actors.session.resumed_prefix import ResumedPrefix
from pitrio.actors.session.run import Run
from pitrio.actors.session.shell import UserShell
from pitrio.actors.session.warming import SessionWarming
from pitrio.actors.session_store.command_stamp import stamping
from pitrio.actors.supervisor.actor.compactor import StreamCall
from pitrio.actors.supervisor.actor.shell import (
    Supervisor,
    SupervisorHandle,
    SupervisorSettings,
)
from pitrio.actors.tool_executor import ToolExecutorHandle
from pitrio.errors import PitrioError, ReadOnlySessionError
from pitrio.messages.agent import (
    AgentMessage,
    CustomMessage,
    LlmMessage,
)
from pitrio.messages.convert import PrefixConverter
from pitrio.messages.events import (
    AgentSessionEvent,
    CompactionEnd,
    EntryAppended,
    EntryRecorded,
    ExtensionUiRequest,
    MessageEnd,
    MessageStart,
    QueueUpdate,
)
from pitrio.messages.model import Model

if TYPE_CHECKING:
    from pitrio.actors.model_router import ModelRouterHandle
    from pitrio.actors.session.extensions.asks import ModelScope, ShutdownRequest
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle
    from pitrio.actors.session.extensions.runner import ExtensionRunner
    from pitrio.actors.session_store.actor import SessionStoreHandle


class SessionActor(Actor[SessionCommand]):
    """Owns one session: its agent loop, log, queues, runs and subscribers."""

    # Its fields in slots, like the base's: with more than 30 of them an instance dict no
    # longer shares its keys with the class's other instances (a 1.6 KB dict per session;
    # slots are 8 bytes a field; a weak reference as before). A daemon holds one per idle
    # session (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_agent_dir", "_cwd", "_driver", "_driver_settings", "_emit",
        "_extension_mode", "_extensions", "_extra_models", "_funnel", "_host", "_intake",
        "_log", "_loop", "_maintenance", "_mcp_servers", "_model_scope", "_named_models",
        "_notices", "_outlet", "_project_trusted", "_pump", "_queues", "_resources",
        "_restore_tools", "_resumed", "_router", "_save_model_defaults", "_scoped_models",
        "_settings", "_shell", "_shutdown_request", "_start_reason", "_store", "_stream",
        "_ui_clients", "operations", "queries", "supervisor", "warming",
    )
    # fmt: on

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
        resumed: ResumedPrefix | None = None,
        capacity: int = 256,
    ) -> None:
        super().__init__(name="session", capacity=capacity)
        self._resumed = resumed  # the stored part's conversion asked of the launcher's child
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
        self._notices = StoreNotices(
            store, emit=self._emit, read_only=self._read_only, nursery=lambda: self._nursery
        )
        self._driver_settings = DriverSettings(
            resources, tools, self._notices.catch_up, before_prompt=before_prompt
        )
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
        resumed = self._resumed
        converter = PrefixConverter(
            block_images=self._settings.block_images,
            prepared=None if resumed is None else resumed.view,
        )

        async def convert(messages: Sequence[AgentMessage]) -> Sequence[LlmMessage]:
            if resumed is not None:
                await resumed.settle()  # the child's items for the first request (once)
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
            feed=await self._loop.subscribe_batched(capacity=LOOP_EVENTS),
            loop=self._loop,
            store=self._store,
            log=self._log,
            supervisor=self.supervisor,
            host=self._host,
            queues=self._queues,
            emit=self._emit,
            emit_all=self._outlet.emit_all,
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
        self.queries = SessionQueries(
            store=self._store,
            loop=self._loop,
            supervisor=self.supervisor,
            driver=self._driver,
            queues=self._queues,
            mcp_servers=self._mcp_servers,
            warming=self.warming,
            warming_mode=self._settings.cache_warming,
        )
        self._intake = PromptIntake(
            driver=self._driver,
            loop=self._loop,
            pump=self._pump,
            queues=self._queues,
            auto_resize_images=self._settings.auto_resize_images,
            resources=lambda: self._resources,
            seq=lambda: self._seq,
        )
        if self._host is not None:
            self._funnel = PromptFunnel(
                self._host,
                self._intake.prompt,
                self._intake.queue_command,
                lambda: self._seq,
                self.nursery,
            )
        self._maintenance = MaintenanceGate(
            self.nursery,
            driver=self._driver,
            parts=TreeParts(
                self._store,
                self._loop,
                self._emit,
                self.supervisor,
                self._stream,
                self._restore_tools,
                self._host,
            ),
        )
        self.nursery.start_soon(self._pump.run)
        await self._notices.start()
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
            extended = await discover_resources(
                host, self._resources, self._start_reason, self._emit
            )
            if extended is not None:
                self._resources = extended
                self._driver.use_resources(extended)
        finally:
            if ready is not None:
                ready.set()

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
                if self._maintenance.busy:
                    command.accepted.fail(PitrioError(PROMPT_DURING_COMPACTION))
                    command.settled.fail(PitrioError(PROMPT_DURING_COMPACTION))
                    return
                if self._funnel is not None and self._funnel.needs(command):
                    self._funnel.enter(command)  # extension handlers run outside the inbox
                    return
                await self._intake.prompt(command)
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
            case Navigate():
                self._maintenance.navigate(command)
            case Compact():
                self._maintenance.compact(command)
            case Queue(text=text, reply=reply):
                extension_command = None if self._host is None else self._host.command_name(text)
                if extension_command is not None:
                    from pitrio.actors.session.extensions.host_handle import queued_command_error

                    reply.fail(PitrioError(queued_command_error(extension_command)))
                    return
                if not command.filtered and self._funnel is not None and self._funnel.needs_queue():
                    self._funnel.enter(command)  # input handlers first (pi 1.6.0)
                    return
                await self._intake.queue_command(command)
            case ClearQueue(reply=reply):
                removed = self._queues.clear()
                await self._loop.clear_queues()
                self._emit(QueueUpdate(steering=(), follow_up=()))
                reply.set(removed)
            case Abort(reply=reply, detach=detach):
                # A manual compaction or a navigation's summary stops too, and the abort is
                # answered once it has (pi: when the session is idle); a run it is still
                # waiting for is aborted with it.
                if self._maintenance.abort(reply):
                    self._driver.abort(Reply(), detach=detach)
                else:
                    self._driver.abort(reply, detach=detach)
            case WaitForIdle(reply=reply):
                self._driver.wait_for_idle(reply)  # woken by the run's settle
            case GetState(reply=reply):
                reply.set(await self.queries.state())
            case Subscribe(capacity=capacity, reply=reply):
                reply.set(self._subscribe(capacity))
            case SubscribeInto(capacity=capacity, send=send, reply=reply, runs=runs):
                self._add_subscriber(capacity, send, runs)
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

    async def commands(self) -> list[dict[str, Any]]:
        """``get_commands``: prompt templates and skills (extension commands come first)."""
        await trio.lowlevel.checkpoint()
        listed = [] if self._host is None else self._host.commands()
        return listed + (commands(self._resources) if self._resources is not None else [])

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

    async def abort_bash(self) -> None:
        """Cancel the running user command, if any."""
        await trio.lowlevel.checkpoint()
        self._shell.abort()

    def stopped(self) -> None:
        # Sinks are told delivery ended as a feeder's channel closes when the actor stops.
        self._outlet.close()
        if self._resumed is not None:
            self._resumed.close()  # a child asked and never waited for: reaped now

    def _subscribe(self, capacity: int) -> trio.MemoryReceiveChannel[Sequenced]:
        return self._outlet.subscribe(capacity, self.nursery)

    def _add_subscriber(
        self, capacity: int, send: trio.MemorySendChannel[Sequenced], runs: bool = False
    ) -> None:
        self._outlet.add(capacity, send, self.nursery, runs=runs)

    @property
    def _seq(self) -> int:
        """The ``seq`` of the last event emitted (0 before any)."""
        return self._outlet.seq
