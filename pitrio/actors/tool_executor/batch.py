"""One assistant message's tool calls, run the way pi runs them (spec §2.9, §2.11, §3.15.2).

:func:`run_tool_batch` runs in the caller's task (the agent loop's run), so the run's cancel
scopes reach every tool body and abort is plain cancellation:

* **Preflight**, in source order: ``tool_execution_start``, look the tool up, prepare and
  convert the arguments, validate them against the schema, ask ``before_tool_call``. A call
  that fails any step ends at once with an error result (``tool_execution_end`` during
  preflight) and never reaches its tool.
* **Execution**: one nursery for the batch, so calls run concurrently and each emits
  ``tool_execution_end`` when done (completion order), after ``after_tool_call``. The batch is
  sequential when the session says so or any of its tools asks for it. Calls that change the
  same file (``AgentTool.mutates``) take a place in that file's queue in source order and run
  one after another.
* **Results**: tool-result messages are emitted in source order once all calls are done.
* **Abort**: each blocking step runs in a scope from the run's abort; a cancelled call ends as
  its tool's aborted result (``Operation aborted`` unless the tool says otherwise).
* **Nested calls**: a tool body may run another tool through
  :meth:`~pitrio.actors.tool_executor.context.ToolCallContext.execute_tool`, with the same
  preflight, hooks and file queue, against the batch's ``callable_tools``; its events carry
  ``parentToolCallId`` and the model-issued call's result message lists it (and the calls
  nested deeper) under ``nestedCalls``, as pi 1.6.0 records them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

import attrs
import trio

from pitrio.actors.tool_executor.context import (
    MAX_NESTING_DEPTH,
    NestedCall,
    ToolCallContext,
    enter_call,
    leave_call,
)
from pitrio.actors.tool_executor.hooks import (
    AfterToolCall,
    AfterToolCallContext,
    BeforeToolCall,
    BeforeToolCallContext,
    ToolExecutionMode,
)
from pitrio.actors.tool_executor.mutation import (
    FileMutationQueue,
    Ticket,
    file_mutation_queue,
    mutation_key,
)
from pitrio.actors.tool_executor.tool import AgentTool, ExecuteCall, UpdateFn, text_result
from pitrio.actors.tool_executor.validation import validate_tool_arguments
from pitrio.errors import unwrap_group
from pitrio.messages.agent import (
    AgentMessage,
    AgentToolResult,
    AssistantMessage,
    NestedToolCalls,
    ToolResultMessage,
    Usage,
    combine_usage,
    now_ms,
)
from pitrio.messages.content import TextContent, ToolCall
from pitrio.messages.events import (
    AgentEvent,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from pitrio.messages.model import Model

Emit = Callable[[AgentEvent], Awaitable[None]]


class AbortScopes(Protocol):
    """A run's abort as the batch needs it (the agent loop's ``RunAbort`` is one)."""

    aborted: bool

    def scope(self) -> AbstractContextManager[trio.CancelScope]:
        """A cancel scope the abort cancels (already cancelled once aborted)."""
        ...


class NoAbort:
    """Abort scopes that never cancel, for batches run outside an agent run."""

    aborted = False

    @contextmanager
    def scope(self) -> Iterator[trio.CancelScope]:
        """A plain cancel scope."""
        with trio.CancelScope() as scope:
            yield scope


async def execute_directly(
    tool: AgentTool, tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
) -> AgentToolResult:
    """The default :data:`ExecuteCall`: call the tool's body."""
    return await tool.execute(tool_call_id, args, on_update)


@attrs.frozen(kw_only=True)
class ToolBatch:
    """What a batch needs from the run: the response, the tools, the mode, hooks, context."""

    assistant_message: AssistantMessage
    tools: tuple[AgentTool, ...]
    mode: ToolExecutionMode = "parallel"
    context: Sequence[AgentMessage] = ()
    before_tool_call: BeforeToolCall | None = None
    after_tool_call: AfterToolCall | None = None
    model: Model | None = None
    callable_tools: tuple[AgentTool, ...] | None = None
    """What nested calls may run (pi 1.6.0: the active ``direct`` tools and every
    ``codemode`` or ``deferred`` one); ``None``: the batch's ``tools``."""


@attrs.frozen
class BatchResult:
    """The tool-result messages in source order, and whether every call asked to terminate."""

    messages: tuple[ToolResultMessage, ...]
    terminate: bool


@attrs.frozen
class _Prepared:
    """A call that passed preflight and will execute."""

    index: int
    call: ToolCall
    tool: AgentTool
    args: dict[str, Any]


@attrs.define
class _CallState:
    """What a running call has produced so far, kept where an abort can still read it."""

    context: ToolCallContext | None = None
    latest: AgentToolResult | None = None


@attrs.frozen
class _Finished:
    """A call's final result."""

    index: int
    call: ToolCall
    result: AgentToolResult
    is_error: bool
    duration_ms: int | None = None
    """How long the tool body ran (pi 1.6.0); ``None`` for a call refused before it ran."""
    nested: NestedToolCalls | None = None
    """The calls this model-issued call made through nested calls."""
    nested_usage: Usage | None = None
    """Their results' summed usage, added to the result message's (pi 1.6.0)."""


def error_result(message: str) -> AgentToolResult:
    """An error result as pi builds it: the message as text, empty details."""
    return text_result(message, details={})


def _message_of(exc: BaseException) -> str:
    leaf = unwrap_group(exc)
    return str(leaf) or repr(leaf)


async def run_tool_batch(
    batch: ToolBatch,
    *,
    emit: Emit,
    abort: AbortScopes | None = None,
    execute: ExecuteCall | None = None,
    mutations: FileMutationQueue | None = None,
) -> BatchResult:
    """Run ``batch`` in the calling task, emitting pi's events through ``emit``.

    ``execute`` runs each tool body (default: the tool's own ``execute``); ``mutations`` is
    the per-file queue (default: the one of this trio run).
    """
    runner = _BatchRunner(
        batch,
        emit=emit,
        abort=abort or NoAbort(),
        execute=execute or execute_directly,
        mutations=mutations or file_mutation_queue(),
    )
    return await runner.run()


class _BatchRunner:
    """The state of one batch; also the :class:`NestedRunner` of its calls."""

    def __init__(
        self,
        batch: ToolBatch,
        *,
        emit: Emit,
        abort: AbortScopes,
        execute: ExecuteCall,
        mutations: FileMutationQueue,
    ) -> None:
        self.batch = batch
        self.tools = {tool.name: tool for tool in batch.tools}
        reachable = batch.tools if batch.callable_tools is None else batch.callable_tools
        self.callable = tuple(tool for tool in reachable if tool.exposure != "model-only")
        self.nested_tools = {tool.name: tool for tool in self.callable}
        self._emit = emit
        self.abort = abort
        self._execute = execute
        self._mutations = mutations

    async def run(self) -> BatchResult:
        """Run every call of the response; results in source order."""
        calls = self.batch.assistant_message.tool_calls
        sequential = self.batch.mode == "sequential" or any(
            self.tools[call.name].execution_mode == "sequential"
            for call in calls
            if call.name in self.tools
        )
        if sequential:
            finished, messages = await self._sequential(calls)
        else:
            finished = await self._parallel(calls)
            messages = [self._result_message(done) for done in finished]
            for message in messages:
                await self._emit(MessageStart(message=message))
                await self._emit(MessageEnd(message=message))
        terminate = bool(finished) and all(done.result.terminate is True for done in finished)
        return BatchResult(messages=tuple(messages), terminate=terminate)

    async def _sequential(
        self, calls: tuple[ToolCall, ...]
    ) -> tuple[list[_Finished], list[ToolResultMessage]]:
        finished: list[_Finished] = []
        messages: list[ToolResultMessage] = []
        for index, call in enumerate(calls):
            await self._emit_start(call, None)
            prepared = await self._prepare(index, call)
            if isinstance(prepared, _Prepared):
                ticket = self._ticket(prepared, None)
                done = await self._execute_one(prepared, ticket, None)
            else:
                done = prepared
            finished.append(done)
            await self._emit_end(done, None)
            message = self._result_message(done)
            messages.append(message)
            await self._emit(MessageStart(message=message))
            await self._emit(MessageEnd(message=message))
        return finished, messages

    async def _parallel(self, calls: tuple[ToolCall, ...]) -> list[_Finished]:
        finished: list[_Finished] = []
        ready: list[_Prepared] = []
        for index, call in enumerate(calls):
            await self._emit_start(call, None)
            prepared = await self._prepare(index, call)
            if isinstance(prepared, _Finished):
                finished.append(prepared)
                await self._emit_end(prepared, None)
            else:
                ready.append(prepared)
        # Places in the file queues are taken here, in source order, before any call runs:
        # trio does not start sibling tasks in a fixed order.
        tickets = [self._ticket(item, None) for item in ready]

        async def run_one(item: _Prepared, ticket: Ticket | None) -> None:
            done = await self._execute_one(item, ticket, None)
            finished.append(done)
            await self._emit_end(done, None)

        try:
            async with trio.open_nursery() as nursery:
                for item, ticket in zip(ready, tickets, strict=True):
                    nursery.start_soon(run_one, item, ticket)
        finally:
            for ticket in tickets:  # a call that never started must not block the file
                if ticket is not None:
                    ticket.release()
        finished.sort(key=lambda done: done.index)
        return finished

    # -- the steps of one call ----------------------------------------------------------

    async def _prepare(
        self, index: int, call: ToolCall, parent: str | None = None
    ) -> _Prepared | _Finished:
        """Look the tool up, prepare and validate the arguments, ask ``before_tool_call``."""
        tool = (self.tools if parent is None else self.nested_tools).get(call.name)
        if tool is None:
            return _Finished(index, call, error_result(f"Tool {call.name} not found"), True)
        with self.abort.scope() as scope:
            try:
                args = dict(call.arguments)
                if tool.prepare_arguments is not None:
                    args = tool.prepare_arguments(args)
                args = validate_tool_arguments(call.name, tool.parameters, args)
                if tool.validate is not None:
                    args = tool.validate(args)
                before = self.batch.before_tool_call
                if before is not None:
                    verdict = await before(
                        BeforeToolCallContext(
                            assistant_message=self.batch.assistant_message,
                            tool_call=call,
                            args=args,
                            context=self.batch.context,
                            parent_tool_call_id=parent,
                        )
                    )
                    if verdict is not None and verdict.block:
                        reason = verdict.reason or "Tool execution was blocked"
                        return _Finished(index, call, error_result(reason), True)
                return _Prepared(index, call, tool, args)
            except Exception as exc:
                return _Finished(index, call, error_result(_message_of(exc)), True)
        assert scope.cancelled_caught
        return _Finished(index, call, tool.result_on_abort(None), True)

    def _ticket(self, item: _Prepared, parent: ToolCallContext | None) -> Ticket | None:
        """A place in the file queue for a call that changes a file; ``None`` otherwise."""
        if item.tool.mutates is None:
            return None
        try:
            path = item.tool.mutates(item.args)
        except Exception:  # a tool that cannot name its file just is not serialised
            return None
        if not path:
            return None
        # A nested call on a file its parent already holds would wait for itself.
        if parent is not None and mutation_key(path) in parent.held_files:
            return None
        return self._mutations.enqueue(path)

    async def _execute_one(
        self,
        item: _Prepared,
        ticket: Ticket | None,
        parent: ToolCallContext | None,
        state: _CallState | None = None,
    ) -> _Finished:
        """Run the tool body (after its file turn), then let ``after_tool_call`` amend it."""
        state = state if state is not None else _CallState()
        call = item.call
        parent_id = parent.tool_call_id if parent is not None else None
        held = parent.held_files if parent is not None else frozenset()
        context = ToolCallContext(
            tool_call_id=call.id,
            tool_name=call.name,
            model=self.batch.model,
            runner=self,
            depth=parent.depth + 1 if parent is not None else 0,
            held_files=held | {ticket.key} if ticket is not None else held,
            recorder=parent.recorder if parent is not None else None,
            callable_tools=self.callable,
        )
        state.context = context

        async def on_update(partial: AgentToolResult) -> None:
            state.latest = partial
            await self._emit(
                ToolExecutionUpdate(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    args=call.arguments,
                    partial_result=partial,
                    parent_tool_call_id=parent_id,
                )
            )

        result: Any = None
        is_error = False
        aborted = True
        token = enter_call(context)
        # pi times the tool's execute(), which waits its turn on a file inside: so does this
        started = trio.current_time()
        try:
            with self.abort.scope():
                try:
                    if ticket is not None:
                        await ticket.wait()
                    result = await self._execute(item.tool, call.id, item.args, on_update)
                    if not isinstance(result, AgentToolResult):
                        raise TypeError(f"Tool {call.name} returned {type(result).__name__}")
                    is_error = result.is_error is True
                except Exception as exc:
                    result = error_result(_message_of(exc))
                    is_error = True
                aborted = False
        finally:
            if ticket is not None:
                ticket.release()
            leave_call(token)
        duration_ms = max(0, round((trio.current_time() - started) * 1000))
        if aborted:
            result = context.aborted_result or item.tool.result_on_abort(state.latest)
            is_error = True
        done = await self._after(item, result, is_error, parent_id)
        if parent is not None:
            return attrs.evolve(done, duration_ms=duration_ms)
        recorder = context.recorder
        return attrs.evolve(
            done, duration_ms=duration_ms, nested=recorder.snapshot(), nested_usage=recorder.usage
        )

    async def _after(
        self,
        item: _Prepared,
        result: AgentToolResult,
        is_error: bool,
        parent: str | None = None,
    ) -> _Finished:
        after = self.batch.after_tool_call
        if after is None:
            return _Finished(item.index, item.call, result, is_error)
        change = None
        with self.abort.scope():
            try:
                change = await after(
                    AfterToolCallContext(
                        assistant_message=self.batch.assistant_message,
                        tool_call=item.call,
                        args=item.args,
                        result=result,
                        is_error=is_error,
                        context=self.batch.context,
                        parent_tool_call_id=parent,
                    )
                )
            except Exception as exc:
                return _Finished(item.index, item.call, error_result(_message_of(exc)), True)
        if change is not None:
            result = attrs.evolve(
                result,
                content=result.content if change.content is None else change.content,
                details=result.details if change.details is None else change.details,
                # structured output no longer matches content that was replaced (pi's rule)
                structured_content=(result.structured_content if change.content is None else None),
                terminate=result.terminate if change.terminate is None else change.terminate,
            )
            if change.is_error is not None:
                is_error = change.is_error
        return _Finished(item.index, item.call, result, is_error)

    # -- nested calls ---------------------------------------------------------------------

    async def run_nested(
        self, parent: ToolCallContext, name: str, args: dict[str, Any]
    ) -> NestedCall:
        """Run ``name(args)`` inside ``parent``'s call, through the whole pipeline."""
        call = ToolCall(id=parent.next_nested_id(), name=name, arguments=args)
        handle = parent.recorder.start(call.id, name, args)
        await self._emit_start(call, parent.tool_call_id)
        state = _CallState()
        try:
            if parent.depth + 1 >= MAX_NESTING_DEPTH:
                limited = f"Nested tool calls are limited to {MAX_NESTING_DEPTH} levels"
                done = _Finished(-1, call, error_result(limited), True)
            else:
                prepared = await self._prepare(-1, call, parent.tool_call_id)
                if isinstance(prepared, _Prepared):
                    ticket = self._ticket(prepared, parent)
                    done = await self._execute_one(prepared, ticket, parent, state)
                else:
                    done = prepared
        except trio.Cancelled:
            # The abort cancelled the parent's scope as well, and trio hands the cancellation
            # to the outermost cancelled scope: this call's own scope never sees it; or the
            # calling tool stopped waiting (a codemode script that ended). Either way the
            # nested call ends as aborted, and says so, before the cancellation goes on.
            done = _Finished(-1, call, self._nested_aborted(name, state), True)
            if not self.abort.aborted:  # the caller goes on: the record is final
                parent.recorder.finish(handle, True, _text_of(done.result))
                parent.recorder.add_usage(done.result.usage)
            with trio.CancelScope(shield=True):
                await self._emit_end(done, parent.tool_call_id)
            raise
        parent.recorder.finish(handle, done.is_error, _text_of(done.result))
        parent.recorder.add_usage(done.result.usage)
        await self._emit_end(done, parent.tool_call_id)
        return NestedCall(
            tool_call_id=call.id, tool_name=name, result=done.result, is_error=done.is_error
        )

    def reach(self, tools: Sequence[AgentTool]) -> tuple[AgentTool, ...]:
        """See :meth:`NestedRunner.reach`: the tools not known yet are added."""
        added = [
            tool
            for tool in tools
            if tool.exposure != "model-only" and tool.name not in self.nested_tools
        ]
        if added:
            self.callable = (*self.callable, *added)
            self.nested_tools.update((tool.name, tool) for tool in added)
        return self.callable

    def _nested_aborted(self, name: str, state: _CallState) -> AgentToolResult:
        tool = self.nested_tools.get(name)
        result = state.context.aborted_result if state.context is not None else None
        if result is None:
            result = (
                tool.result_on_abort(state.latest) if tool else error_result("Operation aborted")
            )
        return result

    # -- events -------------------------------------------------------------------------------

    async def _emit_start(self, call: ToolCall, parent_id: str | None) -> None:
        await self._emit(
            ToolExecutionStart(
                tool_call_id=call.id,
                tool_name=call.name,
                args=call.arguments,
                parent_tool_call_id=parent_id,
            )
        )

    async def _emit_end(self, done: _Finished, parent_id: str | None) -> None:
        await self._emit(
            ToolExecutionEnd(
                tool_call_id=done.call.id,
                tool_name=done.call.name,
                result=done.result,
                is_error=done.is_error,
                duration_ms=done.duration_ms,
                parent_tool_call_id=parent_id,
            )
        )

    def _result_message(self, done: _Finished) -> ToolResultMessage:
        return ToolResultMessage(
            tool_call_id=done.call.id,
            tool_name=done.call.name,
            content=done.result.content,
            details=done.result.details,
            usage=_with_nested(done.result.usage, done.nested_usage),
            is_error=done.is_error,
            duration_ms=done.duration_ms,
            timestamp=now_ms(),
            nested_calls=done.nested,
        )


def _with_nested(own: Usage | None, nested: Usage | None) -> Usage | None:
    """A result message's usage: the tool's own plus its nested calls' (either may be absent)."""
    if nested is None or own is None:
        return own if nested is None else nested
    return combine_usage(own, nested)


def _text_of(result: AgentToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))
