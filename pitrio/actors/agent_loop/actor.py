"""The core agent (pi-agent-core's ``Agent``) as an actor: state, queues, runs, events.

The actor owns the transcript, model, thinking level, queues and the active run. A run is a task
in the actor's nursery (:class:`~pitrio.actors.agent_loop.run.LoopRun`), so the inbox keeps
being served while it runs: steering, follow-ups, abort and state queries are answered mid-run.

Events go to subscribers over bounded channels; a full subscriber blocks the loop (the
session actor is the one consumer and applies its own fan-out policy to clients).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast, overload

import attrs
import trio

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.agent_loop.decisions import (
    RunContinuation,
    RunPrompts,
    check_prompt,
    failure_message,
    plan_continue,
)
from pitrio.actors.agent_loop.hooks import LoopHooks, LoopOptions
from pitrio.actors.agent_loop.queues import MessageQueue
from pitrio.actors.agent_loop.run import (
    ExecuteCall,
    LoopRun,
    RunConfig,
    RunContext,
    StreamCall,
    replace_last,
)
from pitrio.actors.latest import Latest, LatestReader
from pitrio.actors.session_store.storage import gc_paused
from pitrio.actors.tool_executor.actor import ToolExecutorHandle
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn
from pitrio.errors import PitrioError, unwrap_group
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    ThinkingLevel,
    user_message,
)
from pitrio.messages.content import ImageContent
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


@attrs.frozen(kw_only=True)
class AgentState:
    """A snapshot of the agent's state (spec §2.1)."""

    system_prompt: str
    model: Model
    thinking_level: ThinkingLevel
    tools: tuple[str, ...]
    _messages: Sequence[AgentMessage] = attrs.field(
        alias="messages", eq=attrs.cmp_using(eq=lambda a, b: tuple(a) == tuple(b))
    )
    """The transcript; a resumed session's is a lazy view until :attr:`messages` is read."""
    is_streaming: bool
    streaming_message: AgentMessage | None
    pending_tool_calls: frozenset[str]
    error_message: str | None
    steering: tuple[AgentMessage, ...]
    follow_up: tuple[AgentMessage, ...]
    options: LoopOptions
    runs: int = 0
    """How many runs this agent has started (the number of the latest one)."""

    @property
    def messages(self) -> tuple[AgentMessage, ...]:
        """The transcript. Read from a resumed session's file, it is decoded here, on first
        access: opening a long session and answering ``get_state`` need not decode 48,000
        messages (issue 7, resume)."""
        messages = self._messages
        if not isinstance(messages, tuple):
            with gc_paused():  # tens of thousands of acyclic objects: see gc_paused
                messages = tuple(messages)
            object.__setattr__(self, "_messages", messages)  # a cache of the same value
        return messages

    @property
    def message_count(self) -> int:
        """``len(messages)`` without decoding anything."""
        return len(self._messages)

    async def load_messages(self, slice_size: int = 2000) -> tuple[AgentMessage, ...]:
        """:attr:`messages`, decoding a lazy transcript in slices with a checkpoint between
        them, so other tasks (a ``get_state`` sent with a ``get_messages``) are not held up
        for the whole decode."""
        messages = self._messages
        if isinstance(messages, tuple):
            return messages
        decoded: list[AgentMessage] = []
        total = len(messages)
        for start in range(0, total, slice_size):
            with gc_paused():
                decoded.extend(messages[i] for i in range(start, min(start + slice_size, total)))
            await trio.lowlevel.checkpoint()
        result = tuple(decoded)
        object.__setattr__(self, "_messages", result)
        return result


class _Transcript(Sequence[AgentMessage]):
    """A lazily decoded transcript followed by messages added since (an immutable view)."""

    __slots__ = ("_base", "_tail")

    def __init__(self, base: Sequence[AgentMessage], tail: tuple[AgentMessage, ...]) -> None:
        self._base = base
        self._tail = tail

    def __len__(self) -> int:
        return len(self._base) + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> AgentMessage: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[AgentMessage, ...]: ...

    def __getitem__(self, index: int | slice) -> AgentMessage | tuple[AgentMessage, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError("message index out of range")
        base = len(self._base)
        return self._base[index] if index < base else self._tail[index - base]

    def __iter__(self) -> Iterator[AgentMessage]:
        yield from self._base
        yield from self._tail


# -- commands ------------------------------------------------------------------------------


@attrs.frozen
class RunResult:
    """How a run ended: its number (1, 2, ... per agent) and the messages it added."""

    run: int
    messages: tuple[AgentMessage, ...]


@attrs.frozen
class Prompt:
    """Start a run with these prompts; answered with its :class:`RunResult` when it ends."""

    messages: tuple[AgentMessage, ...]
    reply: Reply[RunResult]


@attrs.frozen
class Continue:
    """Continue from the transcript (spec §2.5); answered when the run ends."""

    reply: Reply[RunResult]


@attrs.frozen
class Steer:
    """Queue a steering message."""

    message: AgentMessage
    reply: Reply[None]


@attrs.frozen
class FollowUp:
    """Queue a follow-up message."""

    message: AgentMessage
    reply: Reply[None]


@attrs.frozen
class ClearQueues:
    """Empty the steering and/or follow-up queue; answered with what was removed."""

    steering: bool
    follow_up: bool
    reply: Reply[tuple[AgentMessage, ...]]


@attrs.frozen
class Abort:
    """Abort the active run (no-op when idle); answered once the agent is idle."""

    reply: Reply[None]


@attrs.frozen
class WaitForIdle:
    """Answered once no run is active."""

    reply: Reply[None]


@attrs.frozen
class GetState:
    """Ask for an :class:`AgentState` snapshot."""

    reply: Reply[AgentState]


@attrs.frozen
class RunFacts:
    """What the supervisor's checks read from the agent around a run, without the copy of
    the transcript an :class:`AgentState` makes (twice a turn: per-turn cost stays flat)."""

    model: Model
    last_assistant: AssistantMessage | None
    """The transcript's last assistant message."""
    has_queued: bool
    """Whether a steering or follow-up message waits."""


@attrs.frozen
class LoopFacts:
    """What the loop publishes for its handles (see ``pitrio.actors.latest``): the model and
    the transcript's last assistant message, which the check before every prompt reads."""

    model: Model
    last_assistant: AssistantMessage | None


@attrs.frozen
class GetRunFacts:
    """Ask for the :class:`RunFacts`."""

    reply: Reply[RunFacts]


@attrs.frozen
class RunEndFacts:
    """Sent to a subscriber that asked for it right before each ``agent_end``: the
    :class:`RunFacts` as the low-level run ended. The session decides what follows a run from
    them without asking (a round trip before every ``agent_end``, issue 7)."""

    facts: RunFacts


@attrs.frozen(kw_only=True)
class Configure:
    """Change settings; ``None`` leaves a setting as it is. Takes effect at the next run."""

    system_prompt: str | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None
    options: LoopOptions | None = None
    hooks: LoopHooks | None = None
    reply: Reply[None]


@attrs.frozen
class SetMessages:
    """Replace the transcript (``append``: add to it instead)."""

    messages: tuple[AgentMessage, ...]
    append: bool
    reply: Reply[None]


@attrs.frozen
class ReplaceMessage:
    """Put ``new`` where ``old`` (the same object) is in the transcript (an extension's
    ``message_end`` replacement); answered with whether it was found."""

    old: AgentMessage
    new: AgentMessage
    reply: Reply[bool]


@attrs.frozen
class Reset:
    """Clear transcript, streaming state, error and both queues."""

    reply: Reply[None]


@attrs.frozen
class Subscribe:
    """Open an event channel of ``capacity`` for a new subscriber (``run_facts``: with a
    :class:`RunEndFacts` before each ``agent_end``)."""

    capacity: int
    reply: Reply[trio.MemoryReceiveChannel[Any]]
    run_facts: bool = False


AgentCommand = (
    Prompt
    | Continue
    | Steer
    | FollowUp
    | ClearQueues
    | Abort
    | WaitForIdle
    | GetState
    | GetRunFacts
    | Configure
    | SetMessages
    | Reset
    | ReplaceMessage
    | Subscribe
)


class AgentLoop(Actor[AgentCommand]):
    """Owns one agent's transcript, settings, queues and its active run."""

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
        self._thinking_level: ThinkingLevel = thinking_level
        # A list or tuple is copied; any other sequence (a resumed session's context view) is
        # an immutable snapshot decoded on first use: ``_messages`` then holds what came after.
        self._base: Sequence[AgentMessage] | None = None
        if isinstance(messages, list | tuple):
            self._messages: list[AgentMessage] = list(messages)
        else:
            self._base, self._messages = messages, []
        self._options = options or LoopOptions()
        self._facts = Latest(LoopFacts(self._model, self._last_assistant()))
        # The last run's last context snapshot while it still starts the transcript: the next
        # run's context starts from it (see ``RunContext``). Any change other than appending
        # forgets it (and bumps the generation, for a run in progress).
        self._shared: Snapshot[AgentMessage] | None = None
        self._shared_generation = 0
        self.address.published = self._facts.reader()
        self._hooks = hooks or LoopHooks()
        self._steering = MessageQueue(self._options.steering_mode)
        self._follow_up = MessageQueue(self._options.follow_up_mode)
        # Each subscriber's channel, and whether it gets a RunEndFacts before each agent_end.
        self._subscribers: list[tuple[trio.MemorySendChannel[Any], bool]] = []
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

    def _run_context(self) -> RunContext:
        """A new run's context: the shared snapshot and what the transcript has after it, or,
        after a change other than appending, a snapshot of the whole transcript."""
        transcript = self._transcript()
        shared = self._shared
        if shared is not None and len(transcript) >= len(shared):
            return RunContext(shared, transcript[len(shared) :])
        return RunContext(Snapshot(transcript))

    def _forget_shared(self) -> None:
        self._shared = None
        self._shared_generation += 1

    def _publish_facts(self) -> None:
        # After every command and every assistant message: whatever changed the model or the
        # transcript's end is visible to the next read. Unchanged facts publish nothing.
        published = self._facts.get()
        last = self._last_assistant()
        if published.model is not self._model or published.last_assistant is not last:
            self._facts.publish(LoopFacts(self._model, last))

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
            case Subscribe(capacity=capacity, reply=reply, run_facts=run_facts):
                send, receive = trio.open_memory_channel[Any](capacity)
                self._subscribers.append((send, run_facts))
                reply.set(receive)

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
            with gc_paused():
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

    def _snapshot(self) -> AgentState:
        messages: Sequence[AgentMessage] = tuple(self._messages)
        if self._base is not None:
            messages = _Transcript(self._base, tuple(self._messages))
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
                api_key=self._options.api_key,
                hooks=self._hooks,
            )
            run = LoopRun(
                config,
                self._run_context(),
                emit=self._emit,
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
                    self._facts.publish(LoopFacts(self._model, message))
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
            subscriber, wants_facts = subscription
            try:
                if wants_facts and isinstance(event, AgentEnd):
                    facts = facts or RunEndFacts(self._run_facts())
                    await _deliver(subscriber, facts)
                await _deliver(subscriber, event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._subscribers.remove(subscription)

    async def stopping(self) -> None:
        for subscriber, _ in self._subscribers:
            await subscriber.aclose()


async def _deliver(subscriber: trio.MemorySendChannel[Any], item: AgentEvent | RunEndFacts) -> None:
    # No task switch per event while the subscriber's channel has room (issue 7: per-event
    # cost); a full channel still blocks the loop (back-pressure).
    try:
        subscriber.send_nowait(item)
    except trio.WouldBlock:
        await subscriber.send(item)


class AgentLoopHandle(Handle[AgentCommand]):
    """Typed access to an :class:`AgentLoop`."""

    async def prompt(
        self,
        prompt: str | AgentMessage | Sequence[AgentMessage],
        images: Sequence[ImageContent] = (),
    ) -> tuple[AgentMessage, ...]:
        """Run the loop on a prompt; returns the run's new messages when it ends.

        Raises :class:`~pitrio.errors.AgentBusyError` while another run is active.
        """
        if isinstance(prompt, str):
            messages: tuple[AgentMessage, ...] = (user_message(prompt, tuple(images)),)
        elif isinstance(prompt, list | tuple):
            messages = tuple(cast("Sequence[AgentMessage]", prompt))
        else:
            messages = (cast("AgentMessage", prompt),)
        return (await self.run_prompt(messages)).messages

    async def run_prompt(self, messages: Sequence[AgentMessage]) -> RunResult:
        """Like :meth:`prompt`, returning the run's number as well as its new messages."""
        return await self.ask(lambda reply: Prompt(tuple(messages), reply))

    async def continue_(self) -> tuple[AgentMessage, ...]:
        """Continue from the current transcript (spec §2.5); returns the run's new messages."""
        return (await self.run_continue()).messages

    async def run_continue(self) -> RunResult:
        """Like :meth:`continue_`, returning the run's number as well as its new messages."""
        return await self.ask(Continue)

    async def steer(self, message: str | AgentMessage) -> None:
        """Queue a steering message (delivered after the current turn)."""
        msg = user_message(message) if isinstance(message, str) else message
        await self.ask(lambda reply: Steer(msg, reply))

    async def follow_up(self, message: str | AgentMessage) -> None:
        """Queue a follow-up message (delivered when the agent would stop)."""
        msg = user_message(message) if isinstance(message, str) else message
        await self.ask(lambda reply: FollowUp(msg, reply))

    async def clear_queues(
        self, *, steering: bool = True, follow_up: bool = True
    ) -> tuple[AgentMessage, ...]:
        """Empty the queues; returns the removed messages."""
        return await self.ask(lambda reply: ClearQueues(steering, follow_up, reply))

    async def abort(self) -> None:
        """Abort the active run, if any, and return once the agent is idle."""
        await self.ask(Abort)

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        await self.ask(WaitForIdle)

    async def state(self) -> AgentState:
        """A snapshot of the agent's state."""
        return await self.ask(GetState)

    async def run_facts(self) -> RunFacts:
        """The model, the last assistant message and whether messages are queued."""
        return await self.ask(GetRunFacts)

    def facts(self) -> LoopFacts:
        """The model and the last assistant message as the loop last published them: no
        round trip (a change made by a command the caller awaited is included)."""
        self._check_alive()
        reader: LatestReader[LoopFacts] = self._address.published
        return reader.get()

    async def configure(
        self,
        *,
        system_prompt: str | None = None,
        model: Model | None = None,
        thinking_level: ThinkingLevel | None = None,
        options: LoopOptions | None = None,
        hooks: LoopHooks | None = None,
    ) -> None:
        """Change settings; the next run uses them."""
        await self.ask(
            lambda reply: Configure(
                system_prompt=system_prompt,
                model=model,
                thinking_level=thinking_level,
                options=options,
                hooks=hooks,
                reply=reply,
            )
        )

    async def set_messages(self, messages: Sequence[AgentMessage]) -> None:
        """Replace the transcript with a copy of ``messages``."""
        await self.ask(lambda reply: SetMessages(tuple(messages), False, reply))

    async def replace_message(self, old: AgentMessage, new: AgentMessage) -> bool:
        """Replace ``old`` (by identity) with ``new`` in the transcript; whether it was there."""
        found: bool = await self.ask(lambda reply: ReplaceMessage(old, new, reply))
        return found

    async def append_message(self, message: AgentMessage) -> None:
        """Append one message to the transcript."""
        await self.ask(lambda reply: SetMessages((message,), True, reply))

    async def reset(self) -> None:
        """Clear transcript, error, streaming state and queues."""
        await self.ask(Reset)

    async def subscribe(self, capacity: int = 256) -> trio.MemoryReceiveChannel[AgentEvent]:
        """A channel receiving every event from now on; a full channel blocks the loop."""
        channel: trio.MemoryReceiveChannel[AgentEvent] = await self.ask(
            lambda reply: Subscribe(capacity, reply)
        )
        return channel

    async def subscribe_with_facts(
        self, capacity: int = 256
    ) -> trio.MemoryReceiveChannel[AgentEvent | RunEndFacts]:
        """Like :meth:`subscribe`, with a :class:`RunEndFacts` right before each ``agent_end``."""
        channel: trio.MemoryReceiveChannel[AgentEvent | RunEndFacts] = await self.ask(
            lambda reply: Subscribe(capacity, reply, run_facts=True)
        )
        return channel
