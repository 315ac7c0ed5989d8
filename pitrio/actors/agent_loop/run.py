"""One run of the core loop (spec §2.7-§2.9): turns, provider streams, tool batches.

:class:`LoopRun` is owned by the :class:`~pitrio.actors.agent_loop.actor.AgentLoop` actor and
runs as one of its tasks. Everything that may block runs in a cancel scope from the run's
:class:`~pitrio.actors.agent_loop.abort.RunAbort`, so abort is cancellation, and the loop then
reports the aborted response and tools exactly as pi does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.agent_loop.decisions import (
    ABORTED_TEXT,
    NO_CONTEXT,
    continue_from_role,
    empty_response,
    end_response,
)
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallContext,
    BeforeToolCallContext,
    LoopHooks,
    ToolExecutionMode,
    TurnContext,
)
from pitrio.actors.tool_executor.tool import AgentTool, UpdateFn, text_result
from pitrio.errors import ContinueError, unwrap_group
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    ThinkingLevel,
    ToolResultMessage,
    now_ms,
)
from pitrio.messages.content import ToolCall
from pitrio.messages.convert import default_convert_to_llm
from pitrio.messages.events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, StreamDone, StreamError, StreamStart

Emit = Callable[[AgentEvent], Awaitable[None]]
StreamCall = Callable[
    [Model, LlmContext, StreamOptions, trio.MemorySendChannel[AssistantMessageEvent]],
    Awaitable[None],
]
ExecuteCall = Callable[[AgentTool, str, dict[str, Any], UpdateFn], Awaitable[AgentToolResult]]
Poll = Callable[[], list[AgentMessage]]

STREAM_BUFFER = 16  # provider -> loop; the provider blocks when the loop is behind


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


@attrs.frozen
class _Prepared:
    """A tool call that passed preflight and will execute."""

    index: int
    call: ToolCall
    tool: AgentTool
    args: dict[str, Any]


@attrs.frozen
class _Finished:
    """A tool call's final result."""

    index: int
    call: ToolCall
    result: AgentToolResult
    is_error: bool


def _error_result(message: str) -> AgentToolResult:
    return text_result(message, details={})


class LoopRun:
    """The state of one run: its context, the messages it added, its abort."""

    def __init__(
        self,
        config: RunConfig,
        context: list[AgentMessage],
        *,
        emit: Emit,
        stream: StreamCall,
        execute: ExecuteCall,
        poll_steering: Poll,
        poll_follow_up: Poll,
        abort: RunAbort,
    ) -> None:
        self.config = config
        self.context = context
        self.new_messages: list[AgentMessage] = []
        self._emit = emit
        self._stream = stream
        self._execute = execute
        self._poll_steering = poll_steering
        self._poll_follow_up = poll_follow_up
        self.abort = abort

    async def run_prompts(self, prompts: Sequence[AgentMessage], *, skip_steering: bool) -> None:
        """Prompt mode: announce the prompts, then run the loop."""
        self.context.extend(prompts)
        self.new_messages.extend(prompts)
        await self._emit(AgentStart())
        await self._emit(TurnStart())
        for prompt in prompts:
            await self._emit(MessageStart(message=prompt))
            await self._emit(MessageEnd(message=prompt))
        await self._loop(skip_steering=skip_steering)

    async def run_continuation(self) -> None:
        """Continuation mode: answer the context as it is (it must not end with a response)."""
        if not self.context:
            raise ContinueError(NO_CONTEXT)
        if isinstance(self.context[-1], AssistantMessage):
            raise ContinueError(continue_from_role("assistant"))
        await self._emit(AgentStart())
        await self._emit(TurnStart())
        await self._loop(skip_steering=False)

    async def _end(self) -> None:
        await self._emit(AgentEnd(messages=tuple(self.new_messages)))

    async def _loop(self, *, skip_steering: bool) -> None:
        first_turn = True
        pending = [] if skip_steering else self._poll_steering()
        while True:
            more_tool_calls = True
            while more_tool_calls or pending:
                if first_turn:
                    first_turn = False
                else:
                    await self._emit(TurnStart())
                for message in pending:
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
                        context=tuple(self.context),
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

    # -- the provider stream -------------------------------------------------------------

    async def _stream_response(self) -> AssistantMessage:
        """Stream one response, emitting message_start/update/end (spec §2.8)."""
        config = self.config
        partial: AssistantMessage | None = None
        final: AssistantMessage | None = None
        announced = False
        with self.abort.scope() as scope:
            messages = list(self.context)
            if config.hooks.transform_context is not None:
                messages = await config.hooks.transform_context(messages)
            if config.hooks.convert_to_llm is not None:
                llm_messages = await config.hooks.convert_to_llm(messages)
            else:
                llm_messages = default_convert_to_llm(messages)
            llm_context = LlmContext(
                system_prompt=config.system_prompt,
                messages=tuple(llm_messages),
                tools=tuple(tool.spec for tool in config.tools),
            )
            api_key = config.api_key
            if config.hooks.get_api_key is not None:
                api_key = await config.hooks.get_api_key(config.model.provider) or api_key
            options = StreamOptions(
                reasoning=None if config.thinking_level == "off" else config.thinking_level,
                session_id=config.session_id,
                api_key=api_key,
            )
            # An aborted run sends no request: the provider would only burn a connection.
            await trio.lowlevel.checkpoint_if_cancelled()
            send, receive = trio.open_memory_channel[AssistantMessageEvent](STREAM_BUFFER)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._run_stream, llm_context, options, send)
                async with receive:
                    async for event in receive:
                        match event:
                            case StreamStart(partial=started):
                                partial = started
                                self.context.append(started)
                                await self._emit(MessageStart(message=started))
                                announced = True
                            case StreamDone(message=done) | StreamError(error=done):
                                final = done
                                break
                            case _:
                                partial = event.partial
                                if announced:
                                    self.context[-1] = partial
                                else:
                                    self.context.append(partial)
                                    await self._emit(MessageStart(message=partial))
                                    announced = True
                                await self._emit(
                                    MessageUpdate(assistant_message_event=event, message=partial)
                                )
                nursery.cancel_scope.cancel()  # a provider still running past its end is cut off
        if final is None:
            base = partial or empty_response(config.model)
            if scope.cancelled_caught or self.abort.aborted:
                final = end_response(base, "aborted", ABORTED_TEXT)
            else:
                final = end_response(base, "error", "The provider stream ended without a result")
        if announced:
            self.context[-1] = final
        else:
            self.context.append(final)
            await self._emit(MessageStart(message=final))
        await self._emit(MessageEnd(message=final))
        return final

    async def _run_stream(
        self,
        context: LlmContext,
        options: StreamOptions,
        send: trio.MemorySendChannel[AssistantMessageEvent],
    ) -> None:
        """Run the provider; a provider that raises still ends the stream with an error."""
        model = self.config.model
        async with send:
            try:
                await self._stream(model, context, options, send)
            except Exception as exc:  # the stream contract says providers never raise
                leaf = unwrap_group(exc)
                failed = end_response(empty_response(model), "error", str(leaf) or repr(leaf))
                await send.send(StreamError(reason="error", error=failed))

    # -- tools ---------------------------------------------------------------------------

    async def _run_tools(
        self, response: AssistantMessage
    ) -> tuple[tuple[ToolResultMessage, ...], bool]:
        """Run the response's tool calls; return the results in source order and ``terminate``."""
        calls = response.tool_calls
        tools = {tool.name: tool for tool in self.config.tools}
        sequential = self.config.tool_execution == "sequential" or any(
            tools[call.name].execution_mode == "sequential" for call in calls if call.name in tools
        )
        finished: list[_Finished] = []
        messages: list[ToolResultMessage] = []
        if sequential:
            for index, call in enumerate(calls):
                await self._emit(
                    ToolExecutionStart(
                        tool_call_id=call.id, tool_name=call.name, args=call.arguments
                    )
                )
                prepared = await self._prepare(index, call, tools, response)
                done = (
                    prepared
                    if isinstance(prepared, _Finished)
                    else await self._execute_one(prepared, response)
                )
                finished.append(done)
                await self._emit_end(done)
                message = self._result_message(done)
                messages.append(message)
                await self._emit(MessageStart(message=message))
                await self._emit(MessageEnd(message=message))
        else:
            ready: list[_Prepared] = []
            for index, call in enumerate(calls):
                await self._emit(
                    ToolExecutionStart(
                        tool_call_id=call.id, tool_name=call.name, args=call.arguments
                    )
                )
                prepared = await self._prepare(index, call, tools, response)
                if isinstance(prepared, _Finished):
                    finished.append(prepared)
                    await self._emit_end(prepared)
                else:
                    ready.append(prepared)

            async def run_one(item: _Prepared) -> None:
                done = await self._execute_one(item, response)
                finished.append(done)
                await self._emit_end(done)

            async with trio.open_nursery() as nursery:
                for item in ready:
                    nursery.start_soon(run_one, item)
            finished.sort(key=lambda item: item.index)
            for done in finished:
                message = self._result_message(done)
                messages.append(message)
                await self._emit(MessageStart(message=message))
                await self._emit(MessageEnd(message=message))
        terminate = bool(finished) and all(item.result.terminate is True for item in finished)
        return tuple(messages), terminate

    async def _emit_end(self, done: _Finished) -> None:
        await self._emit(
            ToolExecutionEnd(
                tool_call_id=done.call.id,
                tool_name=done.call.name,
                result=done.result,
                is_error=done.is_error,
            )
        )

    def _result_message(self, done: _Finished) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=done.call.id,
            tool_name=done.call.name,
            content=done.result.content,
            details=done.result.details,
            is_error=done.is_error,
            timestamp=now_ms(),
        )

    async def _prepare(
        self,
        index: int,
        call: ToolCall,
        tools: dict[str, AgentTool],
        response: AssistantMessage,
    ) -> _Prepared | _Finished:
        """Look the tool up, prepare and validate its arguments, ask ``before_tool_call``."""
        tool = tools.get(call.name)
        if tool is None:
            return _Finished(index, call, _error_result(f"Tool {call.name} not found"), True)
        with self.abort.scope() as scope:
            try:
                args = dict(call.arguments)
                if tool.prepare_arguments is not None:
                    args = tool.prepare_arguments(args)
                if tool.validate is not None:
                    args = tool.validate(args)
                before = self.config.hooks.before_tool_call
                if before is not None:
                    verdict = await before(
                        BeforeToolCallContext(
                            assistant_message=response,
                            tool_call=call,
                            args=args,
                            context=tuple(self.context),
                        )
                    )
                    if verdict is not None and verdict.block:
                        reason = verdict.reason or "Tool execution was blocked"
                        return _Finished(index, call, _error_result(reason), True)
                return _Prepared(index, call, tool, args)
            except Exception as exc:
                return _Finished(index, call, _error_result(str(unwrap_group(exc))), True)
        assert scope.cancelled_caught
        return _Finished(index, call, tool.result_on_abort(None), True)

    async def _execute_one(self, item: _Prepared, response: AssistantMessage) -> _Finished:
        """Execute one prepared call, then let ``after_tool_call`` amend the result."""
        latest: AgentToolResult | None = None

        async def on_update(partial: AgentToolResult) -> None:
            nonlocal latest
            latest = partial
            await self._emit(
                ToolExecutionUpdate(
                    tool_call_id=item.call.id,
                    tool_name=item.call.name,
                    args=item.call.arguments,
                    partial_result=partial,
                )
            )

        result: AgentToolResult | None = None
        is_error = False
        with self.abort.scope():
            try:
                result = await self._execute(item.tool, item.call.id, item.args, on_update)
            except Exception as exc:
                result = _error_result(str(unwrap_group(exc)))
                is_error = True
        if result is None:  # cancelled by abort
            return _Finished(item.index, item.call, item.tool.result_on_abort(latest), True)
        after = self.config.hooks.after_tool_call
        if after is None:
            return _Finished(item.index, item.call, result, is_error)
        change = None
        with self.abort.scope():
            try:
                change = await after(
                    AfterToolCallContext(
                        assistant_message=response,
                        tool_call=item.call,
                        args=item.args,
                        result=result,
                        is_error=is_error,
                        context=tuple(self.context),
                    )
                )
            except Exception as exc:
                return _Finished(item.index, item.call, _error_result(str(unwrap_group(exc))), True)
            if change is not None:
                result = AgentToolResult(
                    content=result.content if change.content is None else change.content,
                    details=result.details if change.details is None else change.details,
                    terminate=result.terminate if change.terminate is None else change.terminate,
                )
                if change.is_error is not None:
                    is_error = change.is_error
        return _Finished(item.index, item.call, result, is_error)
