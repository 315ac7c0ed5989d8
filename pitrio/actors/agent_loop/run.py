"""One run of the core loop (spec §2.7-§2.9): turns, provider streams, tool batches.

:class:`LoopRun` is owned by the :class:`~pitrio.actors.agent_loop.actor.AgentLoop` actor and
runs as one of its tasks. Everything that may block runs in a cancel scope from the run's
:class:`~pitrio.actors.agent_loop.abort.RunAbort`, so abort is cancellation, and the loop then
reports the aborted response and tools exactly as pi does.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from importlib import import_module

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.agent_loop.context import RunContext, replace_last
from pitrio.actors.agent_loop.decisions import (
    NO_CONTEXT,
    aborted_before_request,
    aborted_text,
    continue_from_role,
    empty_response,
    end_response,
)
from pitrio.actors.agent_loop.hooks import LoopHooks, ToolExecutionMode, TurnContext
from pitrio.actors.agent_loop.intake import (
    DELTAS,
    EmitUpdatesNow,
    StreamIntake,
    delta_intake,
    message_update,
)
from pitrio.actors.model_router.stream_builder import abort_block_ends
from pitrio.actors.tool_executor.tool import AgentTool, ExecuteCall
from pitrio.errors import ContinueError, unwrap_group
from pitrio.messages.agent import (
    AgentMessage,
    AssistantMessage,
    SystemMessage,
    ThinkingLevel,
    ToolResultMessage,
)
from pitrio.messages.convert import default_convert_to_llm
from pitrio.messages.delta_run import DeltaRun, StreamItem, UpdateItem, expand_updates
from pitrio.messages.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    TurnEnd,
    TurnStart,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions, ToolSpec
from pitrio.messages.snapshot import immutable
from pitrio.messages.stream import (
    AssistantMessageEvent,
    EventSender,
    StreamDone,
    StreamError,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
    ToolCallEnd,
    ToolCallStart,
)
from pitrio.messages.transcript import (
    SystemReplay,
    current_tools,
    declare_tool_changes,
    system_text,
)

__all__ = [
    "Emit",
    "EmitUpdates",
    "EmitUpdatesNow",
    "ExecuteCall",
    "LoopRun",
    "Poll",
    "RunConfig",
    "StreamCall",
]

Emit = Callable[[AgentEvent], Awaitable[None]]
EmitUpdates = Callable[[list[UpdateItem]], Awaitable[None]]
"""Emits streamed updates taken at one wake-up, in order, a run of deltas as one item (the
actor's: one hand-over per batch to the session's pump)."""
StreamCall = Callable[
    [Model, LlmContext, StreamOptions, EventSender],
    Awaitable[None],
]
Poll = Callable[[], list[AgentMessage]]

_BATCH_MODULE = "pitrio.actors.tool_executor.batch"

STREAM_BUFFER = 64
"""Events the provider may have queued for the loop; the provider blocks when the loop is
behind. The loop takes what is queued at each wake-up. A larger buffer would mean fewer rounds
of task switches through the loop, the pump and the forwarder, but larger bursts into a
client's subscriber buffer, which then merges more deltas for a client that keeps up
(DESIGN-NOTES, "streamed updates in batches": 256 measured, not taken)."""
UPDATE_BATCH = 32
"""Streamed updates the loop emits as one batch at most (:class:`UpdateBatch`'s bound: with
the pump's channel capacity it bounds what the pump may have queued). A run of deltas
(:class:`~pitrio.messages.delta_run.DeltaRun`) counts as one: it is at most what the provider
parsed of one read before handing it over (``http.HANDOVER``, 64 SSE events)."""


@attrs.frozen(kw_only=True)
class RunConfig:
    """Everything a run snapshots from the agent's state when it starts (spec §2.6 step 2)."""

    model: Model
    system_prompt: str
    thinking_level: ThinkingLevel
    tools: tuple[AgentTool, ...]
    tool_execution: ToolExecutionMode
    session_id: str | None
    api_key: str | None
    hooks: LoopHooks
    forced_system_prompt: str | None = None
    """Sent instead of the transcript's prompt (an extension's ``before_agent_start``)."""
    system_replay: SystemReplay = attrs.field(factory=SystemReplay)
    """The transcript's system messages replayed, kept between requests (and runs)."""
    current_tools: Callable[[], Awaitable[tuple[AgentTool, ...]]] | None = None
    """The active tools now: read again before each later request of the run, so a tool set
    changed during the run (``tool_search`` loading tools) counts from the next request, as
    pi 1.6.0 applies a changed tool set at the next turn."""
    callable_tools: Callable[[], Awaitable[tuple[AgentTool, ...]]] | None = None
    """What nested calls may reach now (the executor's): tools that scripts call without
    their being declared (``codemode`` exposure) live here."""


class LoopRun:
    """The state of one run: its context, the messages it added, its abort."""

    def __init__(
        self,
        config: RunConfig,
        context: RunContext,
        *,
        emit: Emit,
        stream: StreamCall,
        emit_updates: EmitUpdates | None = None,
        emit_updates_now: EmitUpdatesNow | None = None,
        execute: ExecuteCall,
        poll_steering: Poll,
        poll_follow_up: Poll,
        abort: RunAbort,
    ) -> None:
        self.config = config
        # Its base is the last snapshot handed out (or one from an earlier run): the next
        # request's snapshot is made from it, so the converter and the provider need not
        # compare, and nothing copies the whole transcript.
        self.context = context
        self.new_messages: list[AgentMessage] = []
        self._emit = emit
        self._emit_updates = emit_updates or self._emit_each
        self._emit_updates_now = emit_updates_now
        self._stream = stream
        self._execute = execute
        self._poll_steering = poll_steering
        self._poll_follow_up = poll_follow_up
        self.abort = abort
        self._replaced = False  # whether replace_message ran since the prompts' declaration

    async def run_prompts(self, prompts: Sequence[AgentMessage], *, skip_steering: bool) -> None:
        """Prompt mode: announce the prompts (tool changes declared first), then run the loop."""
        prompts = self._declare_tools(prompts)
        self._replaced = False  # declared from the transcript as it is now
        self.context.extend(prompts)
        self.new_messages.extend(prompts)
        await self._emit(AgentStart())
        await self._emit(TurnStart())
        for prompt in prompts:
            await self._emit(MessageStart(message=prompt))
            await self._emit(MessageEnd(message=prompt))
        await self._loop(skip_steering=skip_steering, declared=True)

    async def run_continuation(self) -> None:
        """Continuation mode: answer the context as it is (it must not end with a response)."""
        if not self.context:
            raise ContinueError(NO_CONTEXT)
        if isinstance(self.context.last(), AssistantMessage):
            raise ContinueError(continue_from_role("assistant"))
        await self._emit(AgentStart())
        await self._emit(TurnStart())
        await self._loop(skip_steering=False)

    async def _emit_each(self, updates: list[UpdateItem]) -> None:
        for update in expand_updates(updates):
            await self._emit(update)

    async def _end(self) -> None:
        await self._emit(AgentEnd(messages=tuple(self.new_messages)))

    async def _loop(self, *, skip_steering: bool, declared: bool = False) -> None:
        """The turns of a run. ``declared``: the tools were declared with the prompts just
        now (the first turn's request then declares them again only for steering messages)."""
        first_turn = True
        pending = [] if skip_steering else self._poll_steering()
        while True:
            more_tool_calls = True
            while more_tool_calls or pending:
                if first_turn:
                    first_turn = False
                else:
                    declared = False  # the tools are taken again: declared again
                    await self._emit(TurnStart())
                    await self._refresh_tools()
                # Before each request, tools the agent can run that the transcript does not
                # declare (or declares otherwise) are declared (pi's declareToolChanges).
                # Right after the prompts' declaration, with nothing pending, the same tools
                # and no message replaced since, there is nothing to declare: not worked out
                # again (issue 38).
                if pending or not declared or self._replaced:
                    for message in self._declare_tools(pending):
                        await self._emit(MessageStart(message=message))
                        await self._emit(MessageEnd(message=message))
                        self.context.append(message)
                        self.new_messages.append(message)
                pending = []
                response = await self._stream_response()
                self.new_messages.append(response)
                if response.stop_reason in ("error", "aborted"):
                    await self._emit(TurnEnd(message=response, tool_results=()))
                    await self._end()
                    return
                results: tuple[ToolResultMessage, ...] = ()
                more_tool_calls = False
                if response.tool_calls:
                    results, terminate = await self._run_tools(response)
                    more_tool_calls = not terminate
                    self.context.extend(results)
                    self.new_messages.extend(results)
                await self._emit(TurnEnd(message=response, tool_results=results))
                stop = self.config.hooks.should_stop_after_turn
                if stop is not None and await stop(
                    TurnContext(
                        message=response,
                        tool_results=results,
                        context=self.context.view(),
                        new_messages=tuple(self.new_messages),
                    )
                ):
                    await self._end()
                    return
                pending = self._poll_steering()
            follow_ups = self._poll_follow_up()
            if not follow_ups:
                break
            pending = follow_ups
        await self._end()

    async def _refresh_tools(self) -> None:
        """Take the active tools again (only a changed set makes a new config)."""
        current = self.config.current_tools
        if current is None:
            return
        tools = await current()
        if tools != self.config.tools:
            self.config = attrs.evolve(self.config, tools=tools)

    def _declare_tools(self, pending: Sequence[AgentMessage]) -> list[AgentMessage]:
        """``pending`` with the tool set's changes declared on a ``system`` message."""
        context = self.context  # not taken as a snapshot: requests' snapshots stay linked
        declared = current_tools(self.config.system_replay.current_then(context.base, context.tail))
        executable = [tool.declaration for tool in self.config.tools]
        return declare_tool_changes(declared, pending, executable)

    def _system(
        self, messages: Sequence[AgentMessage], *, owned: bool = False
    ) -> tuple[str, tuple[ToolSpec, ...]]:
        """The request's system prompt and tools: the replay of the transcript's system
        messages (pi 1.6.0 collapses them into the request's head); a forced prompt replaces
        the prompt's text; a transcript without any (a bare agent) sends the configured ones.
        ``owned``: ``messages`` are a hook's list made from a transcript with system messages;
        without one it carries no prompt and no tools."""
        config = self.config
        replayed = config.system_replay.current(messages)
        tools: tuple[ToolSpec, ...]
        if replayed is None and owned:
            prompt, tools = "", ()
        elif replayed is None:
            prompt, tools = config.system_prompt, tuple(tool.spec for tool in config.tools)
        else:
            tools = config.system_replay.tool_specs(replayed)
            prompt = system_text(replayed)
            if replayed.sections is None and not replayed.content:
                prompt = config.system_prompt  # tools declared, no prompt yet (a continuation)
        if config.forced_system_prompt is not None:
            prompt = config.forced_system_prompt
        return prompt, tools

    def replace_message(self, old: AgentMessage, new: AgentMessage) -> None:
        """Replace the last occurrence of ``old`` (by identity) in the context and in the
        run's new messages (the request being built sees it too)."""
        replace_last(self.new_messages, old, new)
        self.context.replace_last(old, new)
        self._replaced = True  # a replaced system message may declare other tools

    # -- the provider stream -------------------------------------------------------------

    async def _stream_response(self) -> AssistantMessage:
        """Stream one response, emitting message_start/update/end (spec §2.8)."""
        config = self.config
        partial: AssistantMessage | None = None
        final: AssistantMessage | None = None
        announced = False
        open_blocks: set[int] = set()  # started, not ended: some providers end them on abort
        requested_at = trio.current_time()
        sent = False  # whether the request went to the provider
        with self.abort.scope() as scope:
            # A snapshot made from the previous one (see ``RunContext``) unless a hook may
            # change the list: a converter that keeps the previous request's messages then
            # knows this one extends them without comparing (issue 10).
            transcript: Sequence[AgentMessage] = self.context.snapshot()
            messages = transcript
            system_prompt, tools = self._system(messages)
            wants = config.hooks.wants
            if config.hooks.transform_context is not None and (
                wants is None or wants("transform_context")
            ):
                # Copied for the hook (which may change the list) only when it has something
                # to do: a resumed session's stored part is then not decoded (issue 38).
                seen = list(messages)
                messages = await config.hooks.transform_context(seen)
                if messages is not seen:
                    # The hook may own the system messages (pi 1.6.0's context_with_system):
                    # the request's prompt and tools are those of the list it returned, none
                    # when it dropped every system message the transcript had.
                    owned = any(isinstance(m, SystemMessage) for m in seen)
                    system_prompt, tools = self._system(messages, owned=owned)
            if config.hooks.convert_to_llm is not None:
                llm_messages = await config.hooks.convert_to_llm(messages)
            else:
                llm_messages = default_convert_to_llm(messages)
            llm_context = LlmContext(
                system_prompt=system_prompt, messages=immutable(llm_messages), tools=tools
            )
            api_key = config.api_key
            if config.hooks.get_api_key is not None:
                api_key = await config.hooks.get_api_key(config.model.provider) or api_key
            options = StreamOptions(
                reasoning=None if config.thinking_level == "off" else config.thinking_level,
                session_id=config.session_id,
                api_key=api_key,
                hooks=config.hooks.provider,
            )
            # An aborted run sends no request: the provider would only burn a connection.
            await trio.lowlevel.checkpoint_if_cancelled()
            sent = True
            requested_at = trio.current_time()
            if config.hooks.on_request is not None:
                config.hooks.on_request(config.model, llm_context, options, transcript)
            send, receive = trio.open_memory_channel[StreamItem](STREAM_BUFFER)
            intake = StreamIntake(send)
            taken: list[AssistantMessage] = []  # partials of deltas taken in the provider's task
            take_now = None
            if self._emit_updates_now is not None:
                take_now = delta_intake(self._emit_updates_now, self.abort, self.context, taken)
            # Updates built from the events taken at this wake-up, not emitted yet: emitted
            # as one batch before the loop waits for the provider, before any other event
            # and at UPDATE_BATCH (issue 38). A batch is what was already queued: a lone
            # delta is emitted before the loop waits again, never held for company.
            updates: list[UpdateItem] = []
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_stream, llm_context, options, intake)
                async with receive:
                    while True:
                        # What is queued is taken without a task switch per event (issue 7):
                        # a long stream is handled in batches, down to fewer, larger writes to
                        # the client. The provider still blocks when the channel is full.
                        try:
                            event = receive.receive_nowait()
                        except trio.WouldBlock:
                            if updates:
                                await self._emit_updates(updates)
                                updates = []
                                # The emit may have waited for the subscriber while the
                                # provider queued more: the channel is looked at again first.
                                continue
                            # The channel is empty and ``receive`` parks at once (no step
                            # between): a delta may be taken in the provider's task meanwhile
                            # (see .intake), once the response is announced. Opened while
                            # events wait, ``receive`` would take one and yield, and the
                            # provider's next delta would go out ahead of the rest.
                            intake.take_now = take_now if announced else None
                            try:
                                event = await receive.receive()
                            except trio.EndOfChannel:
                                break
                            finally:
                                intake.take_now = None
                                if taken:
                                    partial = taken[-1]
                                    taken.clear()
                        except trio.EndOfChannel:
                            break
                        if isinstance(event, DeltaRun):
                            # A run of deltas read at once (issue 38): carried whole, its
                            # updates made by whoever needs them one by one. Only a provider
                            # that started the response makes one.
                            partial = event.last_partial
                            self.context.set_last(partial)
                            updates.append(event)
                            if len(updates) >= UPDATE_BATCH:
                                await self._emit_updates(updates)
                                updates = []
                            continue
                        if announced and type(event) in DELTAS:
                            # The usual event, without the match below: a delta opens and
                            # closes no block (what the last case does for it).
                            partial = event.partial  # type: ignore[union-attr]
                            self.context.set_last(partial)
                            updates.append(
                                message_update(assistant_message_event=event, message=partial)
                            )
                            if len(updates) >= UPDATE_BATCH:
                                await self._emit_updates(updates)
                                updates = []
                            continue
                        match event:
                            case StreamStart(partial=started):
                                if updates:
                                    await self._emit_updates(updates)
                                    updates = []
                                partial = started
                                self.context.append(started)
                                await self._emit(MessageStart(message=started))
                                announced = True
                            case StreamDone(message=done) | StreamError(error=done):
                                final = done
                                break
                            case _:
                                partial = event.partial
                                _track_blocks(open_blocks, event)
                                if announced:
                                    self.context.set_last(partial)
                                else:
                                    self.context.append(partial)
                                    await self._emit(MessageStart(message=partial))
                                    announced = True
                                updates.append(
                                    MessageUpdate(assistant_message_event=event, message=partial)
                                )
                                if len(updates) >= UPDATE_BATCH:
                                    await self._emit_updates(updates)
                                    updates = []
                    if updates:  # the stream ended (or failed) right after them
                        await self._emit_updates(updates)
                        updates = []
                nursery.cancel_scope.cancel()  # a provider still running past its end is cut off
        if final is None:
            base = partial or empty_response(config.model)
            if (scope.cancelled_caught or self.abort.aborted) and not sent:
                final = aborted_before_request(config.model)  # pi 1.6.0: its setup's abort
            elif scope.cancelled_caught or self.abort.aborted:
                if announced:  # pi's order: the blocks' ends, then the aborted message
                    for end in abort_block_ends(config.model.api, base, open_blocks):
                        await self._emit(MessageUpdate(assistant_message_event=end, message=base))
                text = aborted_text(config.model.api, responded=partial is not None)
                final = end_response(base, "aborted", text)
            else:
                final = end_response(base, "error", "The provider stream ended without a result")
        final = finished_response(final, requested_at, trio.current_time(), config.thinking_level)
        if announced:
            self.context.set_last(final)
        else:
            self.context.append(final)
            await self._emit(MessageStart(message=final))
        await self._emit(MessageEnd(message=final))
        return final

    async def _run_stream(
        self,
        context: LlmContext,
        options: StreamOptions,
        intake: StreamIntake,
    ) -> None:
        """Run the provider; a provider that raises still ends the stream with an error."""
        model = self.config.model
        send = intake.channel
        async with send:
            try:
                # The intake is an EventSender: the provider sends through it, as on a channel.
                await self._stream(model, context, options, intake)
            except Exception as exc:  # the stream contract says providers never raise
                leaf = unwrap_group(exc)
                failed = end_response(empty_response(model), "error", str(leaf) or repr(leaf))
                await send.send(StreamError(reason="error", error=failed))

    # -- tools ---------------------------------------------------------------------------

    async def _run_tools(
        self, response: AssistantMessage
    ) -> tuple[tuple[ToolResultMessage, ...], bool]:
        """Run the response's tool calls; return the results in source order and ``terminate``.

        The batch (preflight, hooks, concurrency, per-file order, abort results) is the tool
        executor's; it runs here, in the run's task, under the run's abort.
        """
        # The batch's modules (preflight, validation, the file queues) are imported by the first
        # tool call: a start, and a run without tools, never need them (cold start, issue 38).
        if _BATCH_MODULE not in sys.modules:  # once: caching() costs ~30 us a call
            with _attrs_cache.caching():  # their classes from the attrs method cache
                import_module(_BATCH_MODULE)
        from pitrio.actors.tool_executor.batch import ToolBatch, run_tool_batch

        hooks = self.config.hooks
        # The transcript goes to the tool-call hooks as a view: a resumed session's stored
        # part is decoded only if a hook reads it (issue 38).
        batch = ToolBatch(
            assistant_message=response,
            tools=self.config.tools,
            mode=self.config.tool_execution,
            context=self.context.view(),
            before_tool_call=hooks.before_tool_call,
            after_tool_call=hooks.after_tool_call,
            model=self.config.model,
            callable_tools=(
                None if self.config.callable_tools is None else await self.config.callable_tools()
            ),
        )
        result = await run_tool_batch(
            batch, emit=self._emit, abort=self.abort, execute=self._execute
        )
        return result.messages, result.terminate


def finished_response(
    message: AssistantMessage, started: float, now: float, level: ThinkingLevel
) -> AssistantMessage:
    """The final response as pi 1.6.0 records it: ``durationMs``, the time since the request
    began (``started`` and ``now`` in seconds of one monotonic clock), unless the provider
    set one, then the session's thinking level the request was made at."""
    duration = message.duration_ms
    if duration is None:
        duration = max(0, round((now - started) * 1000))
    return attrs.evolve(message, duration_ms=duration, thinking_level=level)


_BLOCK_STARTS = (TextStart, ThinkingStart, ToolCallStart)
_BLOCK_ENDS = (TextEnd, ThinkingEnd, ToolCallEnd)  # tuples made once (``A | B`` in the call
# built a union for every streamed event)


def _track_blocks(open_blocks: set[int], event: AssistantMessageEvent) -> None:
    """Keep ``open_blocks`` (content indexes started and not ended) up to date."""
    if type(event) in DELTAS:
        return  # the usual event, told apart without six isinstance checks
    if isinstance(event, _BLOCK_STARTS):
        open_blocks.add(event.content_index)
    elif isinstance(event, _BLOCK_ENDS):
        open_blocks.discard(event.content_index)
