"""Where a traced session is tapped: the pieces the session bootstrap wires in.

A :class:`SessionTap` gives the bootstrap a wrapped stream function (every model request of
the session, summaries included, goes through it), a tool-executor handle whose ``execute``
is wrapped (every tool body), and :meth:`SessionTap.attach`, which traces the session's actors'
inboxes (:meth:`~pitrio.actors._actor.Handle.trace`), subscribes to the session's events and
writes the ``header``. :class:`RecordingTap` records outputs; the replay's tap (in
:mod:`pitrio.actors.trace.replay`) substitutes recorded ones.

Sessions are tapped through ``SessionOptions.trace`` (a :data:`TapFactory`) or, for the
command line's print/json modes and the daemon, whose session options are built elsewhere,
through :func:`tracing_sessions`, a context variable the bootstrap reads when the option is
unset (trio tasks inherit it from ``trio.run``'s caller).
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import attrs
import trio

from pitrio.actors._actor import Address, current_actor
from pitrio.actors.agent_loop.run import StreamCall
from pitrio.actors.session.actor import SessionActor
from pitrio.actors.session.commands import (
    Abort,
    Bash,
    ClearQueue,
    Compact,
    Invoke,
    Navigate,
    Prompt,
    Queue,
    Stamped,
)
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.tool_executor import AgentTool, ToolExecutorHandle
from pitrio.actors.tool_executor.actor import ToolExecutorCommand
from pitrio.actors.tool_executor.tool import UpdateFn
from pitrio.actors.trace.recorder import Tracer
from pitrio.actors.trace.records import FORMAT_VERSION, Record, encode_stream_events, request_key
from pitrio.errors import unwrap_group
from pitrio.messages.agent import AgentToolResult
from pitrio.messages.codec import camel, to_json
from pitrio.messages.events import AgentSessionEvent, MessageUpdate
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, EventSender, StreamDone, StreamError

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session_store import SessionStoreHandle

EVENT_CAPACITY = 8192
"""The trace's event subscription: events it may lag behind before the session coalesces
deltas for it (a ``gap`` record says so)."""

REPLAYABLE_INVOKES = frozenset(
    {
        "set_model",
        "cycle_model",
        "set_thinking_level",
        "cycle_thinking_level",
        "set_queue_mode",
        "set_auto_compaction",
        "set_auto_retry",
        "abort_retry",
        "set_session_name",
        "abort_bash",
    }
)
"""The session handle's operations (sent as ``Invoke``) that change what a session does."""


@attrs.frozen(kw_only=True)
class TapStart:
    """What :meth:`SessionTap.attach` needs of a freshly started session."""

    actor: SessionActor
    session: SessionHandle
    loop: AgentLoopHandle
    store: SessionStoreHandle
    tools: ToolExecutorHandle
    cwd: str
    model: Model
    thinking_level: str
    settings: Mapping[str, Any]


class SessionTap(Protocol):
    """The bootstrap's view of a tap (recording or replaying)."""

    tracer: Tracer

    def stream(self, inner: StreamCall) -> StreamCall:
        """The stream function the session uses instead of ``inner``."""
        ...

    def tool_handle(self, address: Address[ToolExecutorCommand]) -> ToolExecutorHandle:
        """The handle the agent loop runs tool bodies through."""
        ...

    async def attach(self, nursery: trio.Nursery, start: TapStart) -> None:
        """Trace the started session's actors and events (tasks go into ``nursery``)."""
        ...


TapFactory = Callable[[str], SessionTap]
"""A session id -> the tap of that session."""

_AMBIENT: contextvars.ContextVar[TapFactory | None] = contextvars.ContextVar(
    "pitrio_trace", default=None
)


@contextmanager
def tracing_sessions(factory: TapFactory | None) -> Iterator[None]:
    """Tap every session started in this context (and in ``trio.run`` called inside it) whose
    options name no tap of their own."""
    token = _AMBIENT.set(factory)
    try:
        yield
    finally:
        _AMBIENT.reset(token)


def ambient_factory() -> TapFactory | None:
    """The factory of :func:`tracing_sessions`, if one is active."""
    return _AMBIENT.get()


def record_to_file(path: Path, *, payloads: bool = False) -> TapFactory:
    """Record every session into ``path`` (a later session appends a new segment)."""
    return lambda _session_id: RecordingTap(path, payloads=payloads)


def record_to_directory(directory: Path, *, payloads: bool = False) -> TapFactory:
    """Record each session into ``<directory>/<session id>.jsonl``."""
    return lambda session_id: RecordingTap(directory / f"{session_id}.jsonl", payloads=payloads)


# -- inputs ------------------------------------------------------------------------------------


def classify_input(command: object) -> tuple[str, dict[str, Any]] | None:
    """A session command from outside as ``(op, args)`` for replay; ``None`` for queries."""
    match command:
        case Prompt(text=text, images=images, streaming_behavior=behavior):
            return "prompt", {
                "text": text,
                "images": [to_json(image) for image in images],
                "streamingBehavior": behavior,
            }
        case Queue(text=text, images=images, kind=kind):
            op = "follow_up" if kind == "followUp" else "steer"
            return op, {"text": text, "images": [to_json(image) for image in images]}
        case ClearQueue():
            return "clear_queue", {}
        case Abort():
            return "abort", {}
        case Compact(custom_instructions=instructions):
            return "compact", {"customInstructions": instructions}
        case Bash(command=text, exclude_from_context=exclude):
            return "bash", {"command": text, "excludeFromContext": exclude}
        case Navigate(target_id=target, summarize=summarize):
            return "navigate", {"targetId": target, "summarize": summarize}
        case Invoke(operation=operation):
            return _invoked(operation)
        case Stamped(command=inner):  # applied for a client command id: the same input
            return classify_input(inner)
    return None


def _invoked(operation: Callable[..., Any]) -> tuple[str, dict[str, Any]] | None:
    """The handle method behind an ``Invoke`` and its arguments.

    The session handle builds each ``Invoke`` from a lambda inside the method it implements,
    so the lambda's qualified name names the method (``SessionHandle.set_model.<locals>.
    <lambda>``) and its closure holds the method's arguments by their parameter names.
    """
    parts = getattr(operation, "__qualname__", "").split(".")
    if len(parts) < 3 or parts[-2] != "<locals>" or parts[-3] not in REPLAYABLE_INVOKES:
        return None
    code = getattr(operation, "__code__", None)
    cells = getattr(operation, "__closure__", None) or ()
    names = code.co_freevars if code is not None else ()
    args: dict[str, Any] = {}
    for name, cell in zip(names, cells, strict=False):
        value = cell.cell_contents
        if isinstance(value, str | int | float | bool) or value is None:
            args[name] = value
    return parts[-3], args


# -- model and tool outputs ----------------------------------------------------------------------


class _RecordingSender:
    """Stands in for the stream's send channel: notes each event the provider sends."""

    def __init__(self, inner: EventSender, tracer: Tracer):
        self.inner = inner
        self.tracer = tracer
        self.events: list[tuple[AssistantMessageEvent, int]] = []
        self.finished = False

    def _note(self, event: AssistantMessageEvent, tick: int) -> None:
        self.events.append((event, tick))
        if isinstance(event, StreamDone | StreamError):
            self.finished = True

    # The tick is taken before the event is handed over: the loop may take it before the
    # provider's task runs again, and an input that reaches the loop after it saw the event
    # must come after it in the tick order (a replay waits for both).
    async def send(self, event: AssistantMessageEvent) -> None:
        tick = self.tracer.next_tick()
        await self.inner.send(event)
        self._note(event, tick)

    def send_nowait(self, event: AssistantMessageEvent) -> None:
        tick = self.tracer.next_tick()
        self.inner.send_nowait(event)
        self._note(event, tick)


def recording_stream(inner: StreamCall, tracer: Tracer) -> StreamCall:
    """``inner`` with each request's events recorded as one ``model`` record when it ends."""
    calls = itertools.count(1)

    async def stream(
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        send: EventSender,
    ) -> None:
        call = next(calls)
        caller = current_actor()  # the actor whose task makes the request
        key = request_key([to_json(message) for message in context.messages])
        sender = _RecordingSender(send, tracer)
        error: str | None = None
        try:
            await inner(model, context, options, sender)
        except Exception as exc:
            leaf = unwrap_group(exc)
            error = str(leaf) or repr(leaf)
            raise
        finally:
            # Serialised once, at the end: the request's task pays for it, not each event.
            events_json = [to_json(event) for event, _ in sender.events]
            items = encode_stream_events(events_json)
            for item, (_, tick) in zip(items, sender.events, strict=True):
                item["tick"] = tick
            end = "done" if sender.finished else ("raised" if error is not None else "cancelled")
            record: Record = {
                "k": "model",
                "call": call,
                "key": key,
                "model": f"{model.provider}/{model.id}",
                "events": items,
                "end": end,
            }
            if caller is not None:
                record["from"] = caller
            if error is not None:
                record["error"] = error
            tracer.record(record)

    return stream


class RecordingToolHandle(ToolExecutorHandle):
    """A tool-executor handle that records each tool body's updates and outcome."""

    def __init__(self, address: Address[ToolExecutorCommand], tracer: Tracer) -> None:
        super().__init__(address)
        self._tracer = tracer

    async def execute(
        self, tool: AgentTool, tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        """Run the body as usual; record ``tool`` when it returns, raises or is cancelled."""
        tracer = self._tracer
        updates: list[dict[str, Any]] = []

        async def update(partial: AgentToolResult) -> None:
            updates.append({"r": to_json(partial), "tick": tracer.next_tick()})
            await on_update(partial)

        record: Record = {"k": "tool", "id": tool_call_id, "name": tool.name, "updates": updates}
        caller = current_actor()  # the actor whose task runs the body
        if caller is not None:
            record["from"] = caller
        try:
            result = await super().execute(tool, tool_call_id, args, update)
        except Exception as exc:
            leaf = unwrap_group(exc)
            record["error"] = str(leaf) or repr(leaf)
            raise
        except BaseException:
            record["cancelled"] = True
            raise
        else:
            record["result"] = to_json(result)
            return result
        finally:
            record["tick"] = tracer.next_tick()
            tracer.record(record)


# -- attaching -----------------------------------------------------------------------------------


class _NotingEvents:
    """Stands in for the trace's event channel: tells the tracer of each event in the task
    that hands it over. The session hands an event over in the task that emits it (a backlog
    goes through its feeder task instead, and is then nobody's own: see
    :meth:`~pitrio.actors.trace.recorder.Tracer.on_emitted`)."""

    def __init__(self, inner: trio.MemorySendChannel[Sequenced], tracer: Tracer) -> None:
        self.inner = inner
        self.tracer = tracer

    def send_nowait(self, item: Sequenced) -> None:
        """Hand ``item`` over now and tell the tracer (in the emitting task)."""
        self.inner.send_nowait(item)
        self.tracer.on_emitted(item.seq)

    async def send(self, item: Sequenced) -> None:
        """Hand ``item`` over (the feeder's path) and tell the tracer."""
        await self.inner.send(item)
        self.tracer.on_emitted(item.seq)

    def close(self) -> None:
        """Close the channel: the trace's event task ends."""
        self.inner.close()

    async def aclose(self) -> None:
        """Close the channel (as :meth:`close`)."""
        await self.inner.aclose()

    async def __aenter__(self) -> _NotingEvents:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self.inner.close()


def event_json(event: AgentSessionEvent) -> dict[str, Any]:
    """An event's JSON as traces keep it: a ``message_update`` in the delta form, built
    without serialising its snapshots (they would cost the square of the reply's length)."""
    if isinstance(event, MessageUpdate):
        inner = event.assistant_message_event
        fields = {
            camel(field.name): to_json(getattr(inner, field.name))
            for field in attrs.fields(type(inner))
            if field.name != "partial"
        }
        return {"type": event.type, "assistantMessageEvent": fields}
    value = to_json(event)
    return value if isinstance(value, dict) else {"type": event.type}


def _tool_spec(tool: AgentTool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "executionMode": tool.execution_mode,
    }


class TapBase:
    """What recording and replaying taps share: tracing the actors, the events, the header."""

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer
        self._last_seq = 0

    async def attach(self, nursery: trio.Nursery, start: TapStart) -> None:
        """Write the header, trace the session's actors, record its events."""
        tracer = self.tracer
        actor = start.actor
        # The session's own counters, read in its tasks when a record is made: how many
        # events it has emitted (an input's position) and which run is the latest; and how
        # far its agent loop has got (the pump may lag behind it, waiting for the store).
        tracer.probe = lambda: (actor._seq, actor._runs)
        tracer.loop_probe = actor.pump.loop_events
        tracer.inputs = classify_input
        tools = await start.tools.active_tools()
        tracer.record(
            {
                "k": "header",
                "v": FORMAT_VERSION,
                "session": start.store.header.id,
                "cwd": start.cwd,
                "model": f"{start.model.provider}/{start.model.id}",
                "modelSpec": to_json(start.model),
                "thinking": start.thinking_level,
                "settings": dict(start.settings),
                "tools": [tool.name for tool in tools],
                "toolSpecs": [_tool_spec(tool) for tool in tools],
                "payloads": tracer.payloads,
            }
        )
        for handle in (start.session, start.loop, start.store, start.tools, actor.supervisor):
            handle.trace(tracer)
        # Our own buffered channel: the session hands each event straight into it when it
        # emits (nothing waits on this task), so events emitted before a cancellation are
        # still there to record.
        send, receive = trio.open_memory_channel[Sequenced](EVENT_CAPACITY)
        noting = cast(trio.MemorySendChannel[Sequenced], _NotingEvents(send, tracer))
        await start.session.subscribe_into(noting, EVENT_CAPACITY)
        nursery.start_soon(self._record_events, receive)

    async def _record_events(self, events: trio.MemoryReceiveChannel[Sequenced]) -> None:
        try:
            async for item in events:
                self._event(item)
        finally:
            while True:  # cancelled with the session: record what was delivered already
                try:
                    item = events.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                    break
                self._event(item)
            events.close()
            self.tracer.close()  # the session has stopped: the writer finishes the file

    def _event(self, item: Sequenced) -> None:
        tracer = self.tracer
        if item.seq != self._last_seq + 1:
            missing = item.seq - self._last_seq - 1
            tracer.record({"k": "gap", "seq": item.seq, "missing": missing})
        self._last_seq = item.seq
        tracer.record(
            {
                "k": "event",
                "seq": item.seq,
                "type": item.event.type,
                "event": event_json(item.event),
            }
        )


class RecordingTap(TapBase):
    """Records a session into ``path`` (appending a segment to an existing file)."""

    def __init__(self, path: Path, *, payloads: bool = False) -> None:
        super().__init__(Tracer(payloads=payloads))
        self.path = path

    def stream(self, inner: StreamCall) -> StreamCall:
        """``inner``, recording each request's output."""
        return recording_stream(inner, self.tracer)

    def tool_handle(self, address: Address[ToolExecutorCommand]) -> ToolExecutorHandle:
        """A handle recording each tool body's output."""
        return RecordingToolHandle(address, self.tracer)

    async def attach(self, nursery: trio.Nursery, start: TapStart) -> None:
        """Start the writer, then trace the session (a failed start closes the tracer, so
        the writer ends with what it has)."""
        nursery.start_soon(self.tracer.write_to, self.path)
        try:
            await super().attach(nursery, start)
        except BaseException:
            self.tracer.close()
            raise
