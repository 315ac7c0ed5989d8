"""The core agent (pi-agent-core's ``Agent``) as an actor: state, queues, runs, events.

The actor owns the transcript, model, thinking level, queues and the active run. A run is a task
in the actor's nursery (:class:`~pitrio.actors.agent_loop.run.LoopRun`), so the inbox keeps
being served while it runs: steering, follow-ups, abort and state queries are answered mid-run.

Events go to subscribers over bounded channels; a full subscriber blocks the loop (the
session actor is the one consumer and applies its own fan-out policy to clients).

The rest of the package: the inbox's commands and the facts the loop reports
(:mod:`.commands`), the state snapshot (:mod:`.state`), the handle (:mod:`.handle`), one run
(:mod:`.run`) and its pure decisions (:mod:`.decisions`). Their names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from pitrio._direct_init import direct_init
from pitrio.actors._actor import Actor, Reply, buffered
from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.agent_loop.commands import (
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
    LoopItem,
    Prompt,
    ReplaceMessage,
    Reset,
    RunEndFacts,
    RunFacts,
    RunResult,
    SentCount,
    SetMessages,
    Steer,
    Subscribe,
    UpdateBatch,
    WaitForIdle,
)
from pitrio.actors.agent_loop.context import RunContext, replace_last
from pitrio.actors.agent_loop.decisions import (
    RunContinuation,
    RunPrompts,
    check_prompt,
    failure_message,
    plan_continue,
)
from pitrio.actors.agent_loop.handle import AgentLoopHandle
from pitrio.actors.agent_loop.hooks import LoopHooks, LoopOptions
from pitrio.actors.agent_loop.queues import MessageQueue
from pitrio.actors.agent_loop.run import ExecuteCall, LoopRun, RunConfig, StreamCall
from pitrio.actors.agent_loop.state import AgentState, TranscriptView
from pitrio.actors.latest import Latest
from pitrio.actors.session_store.storage import gc_paused
from pitrio.actors.tool_executor.actor import ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import PitrioError, unwrap_group
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    SystemMessage,
    ThinkingLevel,
)
from pitrio.messages.delta_run import UpdateItem, expand_updates, last_message, update_count
from pitrio.messages.events import (
    AgentEnd,
    AgentEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
)
from pitrio.messages.model import Model, ModelCost
from pitrio.messages.snapshot import Snapshot
from pitrio.messages.transcript import SystemReplay

__all__ = [
    "PLACEHOLDER_MODEL",
    "AgentCommand",
    "AgentLoop",
    "AgentLoopHandle",
    "AgentState",
    "LoopFacts",
    "RunEndFacts",
    "RunFacts",
    "RunResult",
]

PLACEHOLDER_MODEL = Model(
    id="unknown",
    name="unknown",
    api="unknown",
    provider="unknown",
    base_url="",
    reasoning=False,
    input=("text",),
    cost=ModelCost(),
    context_window=0,
    max_tokens=0,
)


class AgentLoop(Actor[AgentCommand]):
    """Owns one agent's transcript, settings, queues and its active run."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_abort", "_base", "_error_message", "_facts", "_follow_up",
        "_forced_system_prompt", "_hooks", "_idle_waiters", "_last_tools", "_live_run",
        "_messages", "_model", "_options", "_pending_tool_calls", "_runs", "_shared",
        "_shared_generation", "_state_messages", "_steering", "_stream",
        "_streaming_message", "_subscribers", "_system_changes", "_system_prompt",
        "_system_replay", "_thinking_level", "_tools",
    )
    # fmt: on

    def __init__(
        self,
        *,
        stream: StreamCall,
        tools: ToolExecutorHandle | None = None,
        model: Model = PLACEHOLDER_MODEL,
        system_prompt: str = "",
        thinking_level: ThinkingLevel = "off",
        messages: Sequence[AgentMessage] = (),
        options: LoopOptions | None = None,
        hooks: LoopHooks | None = None,
        capacity: int = 64,
    ) -> None:
        super().__init__(name="agent-loop", capacity=capacity)
        self._stream = stream
        self._tools = tools
        self._model = model
        self._system_prompt = system_prompt
        self._forced_system_prompt: str | None = None
        self._system_replay = SystemReplay()  # the transcript's prompt and tools, replayed
        self._thinking_level: ThinkingLevel = thinking_level
        # A list or tuple is copied; any other sequence (a resumed session's context view) is
        # an immutable snapshot decoded on first use: ``_messages`` then holds what came after.
        self._base: Sequence[AgentMessage] | None = None
        if isinstance(messages, list | tuple):
            self._messages: list[AgentMessage] = list(messages)
        else:
            self._base, self._messages = messages, []
        self._options = options or LoopOptions()
        # Raised by every change that may change what the system messages declare (see
        # LoopFacts.system_changes); published with the facts.
        self._system_changes = 0
        self._facts = Latest(LoopFacts(self._model, self._last_assistant(), self._thinking_level))
        # The last run's last context snapshot while it still starts the transcript: the next
        # run's context starts from it (see ``RunContext``). Any change other than appending
        # forgets it (and bumps the generation, for a run in progress).
        self._shared: Snapshot[AgentMessage] | None = None
        self._shared_generation = 0
        # The last state's transcript, a snapshot the next state's extends with what was
        # appended since: a state copies its new messages only, and a reader that keeps the
        # previous state's transcript knows the next one starts with it (issue 38: at 10,000
        # turns a copy of the transcript was 0.3 ms a turn, comparing it more). Forgotten
        # with the shared snapshot, by any change other than appending.
        self._state_messages: Snapshot[AgentMessage] | None = None
        self.address.published = self._facts.reader()
        self._hooks = hooks or LoopHooks()
        self._steering = MessageQueue(self._options.steering_mode)
        self._follow_up = MessageQueue(self._options.follow_up_mode)
        # Each subscriber: its channel, whether it gets a RunEndFacts before each agent_end,
        # and for a batched one the count of events sent on it (None: one event per item).
        self._subscribers: list[tuple[trio.MemorySendChannel[Any], bool, SentCount | None]] = []
        self._streaming_message: AgentMessage | None = None
        self._pending_tool_calls: frozenset[str] = frozenset()
        self._error_message: str | None = None
        self._last_tools: tuple[str, ...] = ()
        self._abort: RunAbort | None = None  # set while a run is active
        self._live_run: LoopRun | None = None  # the run in progress (message replacement)
        self._runs = 0  # runs started; each ends with exactly one agent_end
        self._idle_waiters: list[Reply[None]] = []

    @property
    def _running(self) -> bool:
        return self._abort is not None

    async def handle(self, command: AgentCommand) -> None:
        try:
            await self._handle(command)
        finally:
            self._publish_facts()  # before the caller, woken by the reply, runs again

    def _api_key(self) -> str | None:
        """The configured key, when it is for the current model's provider."""
        wanted = self._options.api_key_provider
        if wanted is not None and wanted != self._model.provider:
            return None
        return self._options.api_key

    def _run_context(self) -> RunContext:
        """A new run's context: the shared snapshot and what the transcript has after it, or,
        after a change other than appending, a snapshot of the whole transcript."""
        shared = self._shared
        base = self._base
        if base is not None:
            # A resumed transcript stays undecoded: the snapshot's head is the stored view,
            # read only where a request reads it (issue 38: the first turn after a resume).
            messages = self._messages
            skip = len(base)
            if shared is not None and skip <= len(shared) <= skip + len(messages):
                return RunContext(shared, messages[len(shared) - skip :])
            return RunContext(Snapshot.over(base, messages))
        transcript = self._messages
        if shared is not None and len(transcript) >= len(shared):
            return RunContext(shared, transcript[len(shared) :])
        return RunContext(Snapshot(transcript))

    def _forget_shared(self) -> None:
        self._shared = None
        self._shared_generation += 1
        self._state_messages = None
        self._system_changes += 1  # a change other than appending: anything may differ

    def _publish_facts(self) -> None:
        # After every command and every assistant message: whatever changed the model or the
        # transcript's end is visible to the next read. Unchanged facts publish nothing.
        published = self._facts.get()
        last = self._last_assistant()
        if (
            published.model is not self._model
            or published.last_assistant is not last
            or published.thinking_level != self._thinking_level
            or published.system_changes != self._system_changes
        ):
            self._facts.publish(self._new_facts(last))

    def _new_facts(self, last: AssistantMessage | None) -> LoopFacts:
        return LoopFacts(self._model, last, self._thinking_level, self._system_changes)

    async def _handle(self, command: AgentCommand) -> None:
        match command:
            case Prompt(messages=messages, reply=reply):
                try:
                    check_prompt(self._running)
                except PitrioError as exc:
                    reply.fail(exc)
                    return
                self._start_run(RunPrompts(messages), reply)
            case Continue(reply=reply):
                try:
                    plan = plan_continue(
                        self._transcript(),
                        running=self._running,
                        steering=self._steering,
                        follow_up=self._follow_up,
                    )
                except PitrioError as exc:
                    reply.fail(exc)
                    return
                self._start_run(plan, reply)
            case Steer(message=message, reply=reply):
                self._steering.push(message)
                reply.set(None)
            case FollowUp(message=message, reply=reply):
                self._follow_up.push(message)
                reply.set(None)
            case ClearQueues(steering=steering, follow_up=follow_up, reply=reply):
                removed: list[AgentMessage] = []
                if steering:
                    removed.extend(self._steering.snapshot())
                    self._steering.clear()
                if follow_up:
                    removed.extend(self._follow_up.snapshot())
                    self._follow_up.clear()
                reply.set(tuple(removed))
            case Abort(reply=reply):
                if self._abort is None:
                    reply.set(None)
                else:
                    self._abort.abort()
                    self._idle_waiters.append(reply)
            case WaitForIdle(reply=reply):
                if self._running:
                    self._idle_waiters.append(reply)
                else:
                    reply.set(None)
            case GetState(reply=reply):
                reply.set(self._snapshot())
            case GetRunFacts(reply=reply):
                reply.set(self._run_facts())
            case Configure():
                self._configure(command)
                command.reply.set(None)
            case SetMessages(messages=messages, append=append, reply=reply):
                if append:
                    self._messages.extend(messages)
                    if any(isinstance(message, SystemMessage) for message in messages):
                        self._system_changes += 1
                    if self._live_run is not None:  # not in the run's context: they part
                        self._forget_shared()
                else:
                    self._base, self._messages = None, list(messages)
                    self._forget_shared()
                reply.set(None)
            case ReplaceMessage(old=old, new=new, reply=reply):
                if self._live_run is not None:  # the request being built sees it too
                    self._live_run.replace_message(old, new)
                index = replace_last(self._transcript(), old, new)
                if index >= 0:
                    self._forget_shared()
                reply.set(index >= 0)
            case Reset(reply=reply):
                self._base, self._messages = None, []
                self._forget_shared()
                self._streaming_message = None
                self._pending_tool_calls = frozenset()
                self._error_message = None
                self._steering.clear()
                self._follow_up.clear()
                reply.set(None)
            case Subscribe() as subscribe:
                send, receive = trio.open_memory_channel[Any](subscribe.capacity)
                sent = SentCount() if subscribe.batches else None
                self._subscribers.append((send, subscribe.run_facts, sent))
                subscribe.reply.set(LoopFeed(receive, sent) if sent is not None else receive)

    # -- helpers -------------------------------------------------------------------------

    def _run_facts(self) -> RunFacts:
        return RunFacts(
            model=self._model,
            last_assistant=self._last_assistant(),
            has_queued=bool(self._steering.snapshot() or self._follow_up.snapshot()),
        )

    def _configure(self, command: Configure) -> None:
        if command.system_prompt is not None:
            self._system_prompt = command.system_prompt
        if not isinstance(command.forced_system_prompt, Keep):
            self._forced_system_prompt = command.forced_system_prompt
        if command.model is not None:
            self._model = command.model
        if command.thinking_level is not None:
            self._thinking_level = command.thinking_level
        if command.options is not None:
            self._options = command.options
            self._steering.mode = command.options.steering_mode
            self._follow_up.mode = command.options.follow_up_mode
        if command.hooks is not None:
            self._hooks = command.hooks

    def _transcript(self) -> list[AgentMessage]:
        """Every message, decoding a resumed transcript now if that was not done yet."""
        if self._base is not None:
            with gc_paused(lasting=True):
                self._messages = [*self._base, *self._messages]
            self._base = None
        return self._messages

    def _last_assistant(self) -> AssistantMessage | None:
        # From the end: the last assistant message is almost always among the last two.
        for part in (self._messages, self._base or ()):
            for index in range(len(part) - 1, -1, -1):
                message = part[index]
                if isinstance(message, AssistantMessage):
                    return message
        return None

    def _state_transcript(self) -> Sequence[AgentMessage]:
        """The transcript as a state holds it: a snapshot extending the previous state's (see
        ``_state_messages``), behind a lazy view of a resumed transcript's stored part while
        that is not decoded (the snapshot then holds what came after it)."""
        kept = self._kept_messages()
        return kept if self._base is None else TranscriptView(self._base, kept)

    def _kept_messages(self) -> Snapshot[AgentMessage]:
        messages = self._messages
        kept = self._state_messages
        count = 0 if kept is None else len(kept)
        # The last kept message still in its place: a cheap guard for a change that did not
        # forget the kept snapshot (every such change forgets it; see _forget_shared).
        if kept is None or len(messages) < count or (count and messages[count - 1] is not kept[-1]):
            kept = Snapshot(messages)
        else:
            kept = kept.extended(messages[count:])
        self._state_messages = kept
        return kept

    def _snapshot(self) -> AgentState:
        messages = self._state_transcript()
        return AgentState(
            system_prompt=self._system_prompt,
            model=self._model,
            thinking_level=self._thinking_level,
            tools=self._last_tools,
            messages=messages,
            is_streaming=self._running,
            streaming_message=self._streaming_message,
            pending_tool_calls=self._pending_tool_calls,
            error_message=self._error_message,
            steering=self._steering.snapshot(),
            follow_up=self._follow_up.snapshot(),
            options=self._options,
            runs=self._runs,
        )

    def _start_run(self, plan: RunPrompts | RunContinuation, reply: Reply[RunResult]) -> None:
        # Mark the run active before yielding, so a second prompt in the inbox is refused.
        abort = RunAbort()
        self._abort = abort
        self._runs += 1
        self._streaming_message = None
        self._error_message = None
        self.nursery.start_soon(self._run, self._runs, plan, abort, reply)

    async def _run(
        self,
        number: int,
        plan: RunPrompts | RunContinuation,
        abort: RunAbort,
        reply: Reply[RunResult],
    ) -> None:
        run: LoopRun | None = None
        generation = self._shared_generation
        try:
            tools: tuple[AgentTool, ...] = ()
            if self._tools is not None:
                tools = await self._tools.active_tools()
            self._last_tools = tuple(tool.name for tool in tools)
            config = RunConfig(
                model=self._model,
                system_prompt=self._system_prompt,
                thinking_level=self._thinking_level,
                tools=tools,
                tool_execution=self._options.tool_execution,
                session_id=self._options.session_id,
                api_key=self._api_key(),
                hooks=self._hooks,
                forced_system_prompt=self._forced_system_prompt,
                system_replay=self._system_replay,
                current_tools=None if self._tools is None else self._tools.active_tools,
                callable_tools=None if self._tools is None else self._tools.callable_tools,
            )
            run = LoopRun(
                config,
                self._run_context(),
                emit=self._emit,
                emit_updates=self._emit_updates,
                emit_updates_now=self._emit_updates_now,
                stream=self._stream,
                execute=self._execute_call(),
                poll_steering=self._steering.drain,
                poll_follow_up=self._follow_up.drain,
                abort=abort,
            )
            self._live_run = run
            if isinstance(plan, RunPrompts):
                await run.run_prompts(plan.prompts, skip_steering=plan.skip_initial_steering)
            else:
                await run.run_continuation()
        except Exception as exc:
            await self._fail_run(unwrap_group(exc), abort)
        finally:
            if run is not None and generation == self._shared_generation:
                # The run's last snapshot starts the transcript: its messages went into
                # the transcript in the same order (message_end), nothing replaced them.
                self._shared = run.context.base
            self._live_run = None
            self._abort = None
            self._streaming_message = None
            self._pending_tool_calls = frozenset()
            reply.set(RunResult(number, tuple(run.new_messages) if run is not None else ()))
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                waiter.set(None)

    async def _fail_run(self, error: BaseException, abort: RunAbort) -> None:
        """A run that raised: record a failure message and end the run (spec §2.6 step 4)."""
        failure = failure_message(self._model, str(error) or repr(error), aborted=abort.aborted)
        self._messages.append(failure)
        self._publish_facts()
        self._error_message = failure.error_message
        await self._emit(AgentEnd(messages=(failure,)))

    def _execute_call(self) -> ExecuteCall:
        executor = self._tools

        async def execute(
            tool: AgentTool, call_id: str, args: dict[str, Any], on_update: UpdateFn
        ) -> AgentToolResult:
            if executor is not None:
                return await executor.execute(tool, call_id, args, on_update)
            return await tool.execute(call_id, args, on_update)

        return execute

    def _reduce(self, event: AgentEvent) -> None:
        """Apply an event to the agent's state before listeners see it (spec §2.10)."""
        match event:
            case MessageStart(message=message) | MessageUpdate(message=message):
                self._streaming_message = message
            case MessageEnd(message=message):
                self._streaming_message = None
                self._messages.append(message)
                if isinstance(message, AssistantMessage):
                    self._facts.publish(self._new_facts(message))
                elif isinstance(message, SystemMessage):
                    self._system_changes += 1
                    self._publish_facts()
            case ToolExecutionStart(tool_call_id=call_id):
                self._pending_tool_calls = self._pending_tool_calls | {call_id}
            case ToolExecutionEnd(tool_call_id=call_id):
                self._pending_tool_calls = self._pending_tool_calls - {call_id}
            case TurnEnd(message=message):
                if isinstance(message, AssistantMessage) and message.error_message:
                    self._error_message = message.error_message
            case AgentEnd():
                self._streaming_message = None

    async def _emit(self, event: AgentEvent) -> None:
        self._reduce(event)
        facts = None
        for subscription in list(self._subscribers):
            subscriber, wants_facts, sent = subscription
            try:
                if wants_facts and isinstance(event, AgentEnd):
                    facts = facts or RunEndFacts(self._run_facts())
                    await _deliver(subscriber, facts)
                    if sent is not None:
                        sent.value += 1
                try:  # _deliver written out: this runs for every streamed delta (issue 38)
                    subscriber.send_nowait(event)
                except trio.WouldBlock:
                    await subscriber.send(event)
                if sent is not None:
                    sent.value += 1
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(subscription)

    async def _emit_updates(self, updates: list[UpdateItem]) -> None:
        """Emit streamed updates taken at one wake-up: one :class:`UpdateBatch` item to a
        batched subscriber (a run of deltas in it whole), each update to the others (issue
        38: a hand-over per delta)."""
        # _reduce of each in turn leaves only the last one's message: no checkpoint between.
        self._streaming_message = last_message(updates[-1])
        batch: UpdateBatch | None = None
        count = 0
        expanded: list[MessageUpdate] | None = None
        for subscription in list(self._subscribers):
            subscriber, _, sent = subscription
            try:
                if sent is not None:
                    batch = batch or UpdateBatch(tuple(updates))
                    await _deliver(subscriber, batch)
                    count = count or update_count(updates)
                    sent.value += count
                    continue
                if expanded is None:
                    expanded = expand_updates(updates)
                for event in expanded:
                    try:
                        subscriber.send_nowait(event)
                    except trio.WouldBlock:
                        await subscriber.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(subscription)

    def _emit_updates_now(self, updates: tuple[UpdateItem, ...]) -> bool:
        """:meth:`_emit_updates` without a checkpoint, for a delta taken in the provider's
        task (see :mod:`.intake`; that task is one of this actor's, in the run's nursery):
        whether the updates went out (``False``: nothing was sent). Only to a lone batched
        subscriber whose channel is empty: with two, one taking and the next refusing could
        not be undone; a channel holding an item means the subscriber is behind, and what
        queues then goes through the loop's own wake-up, in batches."""
        subscribers = self._subscribers
        if len(subscribers) != 1:
            return False
        subscriber, _, sent = subscribers[0]
        if sent is None or buffered(subscriber):
            return False
        try:
            subscriber.send_nowait(_update_batch(updates))
        except (trio.WouldBlock, trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # a closed one is dropped by the next emit through the loop
        sent.value += update_count(updates)
        self._streaming_message = last_message(updates[-1])
        return True

    async def stopping(self) -> None:
        for subscriber, _, _ in self._subscribers:
            await subscriber.aclose()


_update_batch = direct_init(UpdateBatch)  # one per delta taken in the provider's task (issue 38)


async def _deliver(subscriber: trio.MemorySendChannel[Any], item: LoopItem) -> None:
    # No task switch per event while the subscriber's channel has room (issue 7: per-event
    # cost); a full channel still blocks the loop (back-pressure).
    try:
        subscriber.send_nowait(item)
    except trio.WouldBlock:
        await subscriber.send(item)
