"""``pitrio trace replay``: re-run a recorded session and check its events come out the same.

The replay starts a real session (session actor, agent loop, session store in a temporary
directory, supervisor policies, the tool executor's batch logic) with the recorded model,
thinking level, settings and active tools. Only two things come from the trace: each model
request's stream events (matched by a digest of the request's messages, else by order) and
each tool body's updates and outcome (matched by tool call id). The recorded inputs (prompts,
steers, aborts, compactions, ...) are sent again.

Order between inputs and outputs is kept by *ticks* (see :mod:`~pitrio.actors.trace.records`):
an input is sent once every output recorded before it has been produced, the agent loop has
got as far as it had when the input reached it, and the session has emitted the events it
had emitted before the input's first own event (else when it took the input); an output is
released once every input recorded before it has been handled by the session actor. The
session's event pump lags behind the loop (it waits for the store at each ``message_end``),
so an input's own events (a steer's ``queue_update``) fall among the pump's at a place the
loop's progress does not fix: the pump waits before the recorded place of an input's own
event until the input has emitted it. What remains free is the scheduling inside the
session, which is what a replay tests: the events must come out identical after
normalisation (:mod:`~pitrio.actors.trace.compare`; the replay runs in a directory of its
own, so the working directory a system message names is compared as each session's own),
else the first divergence is reported.

A replay that makes no progress for ``stall_seconds`` (default: the longest quiet spell of
the recording plus 10 s) stops and reports where it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from pitrio.actors._actor import Address, Reply
from pitrio.actors.agent_loop.run import StreamCall
from pitrio.actors.model_router import RouterConfig, start_model_router
from pitrio.actors.session.bootstrap import SessionOptions, start_session
from pitrio.actors.session.commands import Accepted, Prompt
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.tool_executor import AgentTool, ToolExecutorHandle
from pitrio.actors.tool_executor.actor import ToolExecutorCommand
from pitrio.actors.tool_executor.tool import UpdateFn
from pitrio.actors.trace.compare import Divergence, Normaliser, first_divergence, normalise_all
from pitrio.actors.trace.recorder import Tracer
from pitrio.actors.trace.recording import (
    REPLAYED_OPS,
    RecordedInput,
    Recording,
    ReplayError,
)
from pitrio.actors.trace.records import (
    MESSAGE_FIELDS,
    Record,
    decode_lines,
    request_key,
    segments,
)
from pitrio.actors.trace.sequencer import Sequencer
from pitrio.actors.trace.tap import TapBase, TapStart
from pitrio.errors import PitrioError, UnknownModelError
from pitrio.messages.agent import AgentToolResult, now_ms
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import ImageContent
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, EventSender

BUILTIN_TOOLS = frozenset({"read", "bash", "edit", "write", "grep", "find", "ls"})
QUIET_MARGIN = 10.0
LOOP_WAKE_CAPACITY = 1024
"""The replay's own subscription to the loop's events (a full one would block the loop; its
task takes each event at once)."""
MIN_STALL_SECONDS = 5.0


@attrs.frozen(kw_only=True)
class ReplayResult:
    """The outcome of a replay."""

    recorded_events: int
    replayed_events: int
    divergence: Divergence | None
    stalled: bool
    notes: tuple[str, ...]

    @property
    def identical(self) -> bool:
        """Whether the replay produced the recorded events (after normalisation)."""
        return self.divergence is None and not self.stalled

    def describe(self) -> str:
        """The verdict for people."""
        lines = [
            f"recorded {self.recorded_events} events, replayed {self.replayed_events}",
        ]
        lines += [f"note: {note}" for note in self.notes]
        if self.stalled:
            lines.append("the replay stalled (no progress); compared the events so far")
        if self.divergence is None and not self.stalled:
            lines.append("identical: the replay produced the recorded event sequence")
        elif self.divergence is not None:
            lines.append(self.divergence.describe())
        return "\n".join(lines) + "\n"


def load_trace(path: Path) -> list[Record]:
    """Every record of a trace file."""
    with path.open("rb") as handle:
        return list(decode_lines(handle, source=str(path)))


# -- the tap -----------------------------------------------------------------------------------


class ReplayedToolError(PitrioError):
    """A tool failure as recorded (its text is the recorded error's)."""


class ReplayedStreamError(PitrioError):
    """A provider failure as recorded."""


def _never(*_args: Any) -> Awaitable[AgentToolResult]:
    raise ReplayError("a replayed tool's body ran: its output must come from the trace")


class ReplayToolHandle(ToolExecutorHandle):
    """Tool bodies answer with the recorded updates and outcome, in recorded order."""

    def __init__(
        self,
        address: Address[ToolExecutorCommand],
        recording: Recording,
        sequencer: Sequencer,
    ) -> None:
        super().__init__(address)
        self._recording = recording
        self._sequencer = sequencer

    async def execute(
        self, tool: AgentTool, tool_call_id: str, args: dict[str, Any], on_update: UpdateFn
    ) -> AgentToolResult:
        """The recorded outcome of ``tool_call_id``."""
        record = self._recording.take_tool(tool_call_id)
        if record is None:
            raise ReplayError(f"the trace holds no result for tool call {tool_call_id}")
        sequencer = self._sequencer
        for update in record.get("updates", ()):
            await sequencer.before_output(int(update["tick"]))
            await on_update(from_json(update["r"], AgentToolResult))
            sequencer.output_done(int(update["tick"]))
        tick = int(record["tick"])
        if record.get("cancelled"):
            try:
                await trio.sleep_forever()  # cancelled in the recording: wait for the abort
            finally:
                sequencer.output_done(tick)
        await sequencer.before_output(tick)
        sequencer.output_done(tick)
        if "error" in record:
            raise ReplayedToolError(str(record["error"]))
        return from_json(record["result"], AgentToolResult)


class ReplayTap(TapBase):
    """Substitutes the recording's outputs and watches the replayed session."""

    def __init__(self, recording: Recording, sequencer: Sequencer) -> None:
        super().__init__(Tracer(observer=self._observe, queue=False))
        self.tracer.on_own = sequencer.own_emitted
        self.recording = recording
        self.sequencer = sequencer
        self.events: list[dict[str, Any]] = []
        self.notes: list[str] = []
        self.session: SessionHandle | None = None
        self.diverged = False
        self.stop: Callable[[], None] = _nothing  # called once, at the first divergence
        self._expected = normalise_all(recording.events, recording.cwd)
        self.cwd: str | None = None  # the replayed session's, known once it started
        self._normaliser = Normaliser()

    def _observe(self, record: Record) -> None:
        kind = record["k"]
        if kind == "event":
            index = len(self.events)
            self.events.append(record["event"])
            self.sequencer.events = record["seq"]
            # Compared as they come: a replay that went another way stops at once instead
            # of waiting for outputs that will never be asked for.
            replayed = self._normaliser.event(record["event"])
            expected = self._expected[index] if index < len(self._expected) else None
            if replayed != expected and not self.diverged:
                self.diverged = True
                self.stop()
        elif kind == "input":
            self.sequencer.handled()
            return
        self.sequencer.changed()

    def stream(self, inner: StreamCall) -> StreamCall:
        """Ignores ``inner``: each request streams its recorded events."""
        recording, sequencer, notes = self.recording, self.sequencer, self.notes

        async def stream(
            model: Model,
            context: LlmContext,
            options: StreamOptions,
            send: EventSender,
        ) -> None:
            key = request_key([to_json(message) for message in context.messages])
            call = recording.take_call(key, notes)
            if call is None:
                raise ReplayError("the trace holds no output for this model request")
            # A provider stamps its message when the request starts; the recorded stamp is
            # from the recording's day. Stamped "now" again, it keeps its order with what the
            # replay stamps itself (compaction checks compare a reply's time with the latest
            # compaction's).
            shift = _timestamp_shift([event for event, _ in call.events])
            for event, tick in call.events:
                await sequencer.before_output(tick)
                await send.send(from_json(_restamp(event, shift), AssistantMessageEvent))
                sequencer.output_done(tick)
            if call.end == "raised":
                raise ReplayedStreamError(call.error or "the provider failed")
            if call.end == "cancelled":
                await trio.sleep_forever()  # cut short by an abort in the recording

        return stream

    def tool_handle(self, address: Address[ToolExecutorCommand]) -> ToolExecutorHandle:
        """Tool bodies come from the recording."""
        return ReplayToolHandle(address, self.recording, self.sequencer)

    async def attach(self, nursery: trio.Nursery, start: TapStart) -> None:
        """Watch the session like a recording does (records go to the observer only)."""
        self.session = start.session
        self.cwd = start.cwd
        self._normaliser = Normaliser(start.cwd)
        await super().attach(nursery, start)
        sequencer, actor = self.sequencer, start.actor
        sequencer.session_seq = lambda: actor._seq
        sequencer.loop_events = actor.pump.loop_events
        actor.pump.gate = sequencer.gate
        # The loop's progress moves without a record when the pump is held: a subscription
        # of our own wakes the inputs waiting for it.
        loop_events = await start.loop.subscribe(LOOP_WAKE_CAPACITY)
        nursery.start_soon(_wake_on_loop_events, loop_events, sequencer)


async def _wake_on_loop_events(
    events: trio.MemoryReceiveChannel[Any], sequencer: Sequencer
) -> None:
    """Wake the sequencer's waiters at each event of the loop (what it waits on is read from
    the pump: this subscription only says when to look again)."""
    async with events:
        async for _ in events:
            sequencer.changed()


def _timestamp_shift(events: Sequence[dict[str, Any]]) -> int:
    """Milliseconds to add to a recorded call's message stamps to make the first one now."""
    for event in events:
        for field in MESSAGE_FIELDS:
            message = event.get(field)
            if isinstance(message, dict) and isinstance(message.get("timestamp"), int):
                return now_ms() - int(message["timestamp"])
    return 0


def _restamp(event: dict[str, Any], shift: int) -> dict[str, Any]:
    out = dict(event)
    for field in MESSAGE_FIELDS:
        message = out.get(field)
        if isinstance(message, dict) and isinstance(message.get("timestamp"), int):
            out[field] = {**message, "timestamp": int(message["timestamp"]) + shift}
    return out


# -- the driver --------------------------------------------------------------------------------


def _nothing() -> None:
    pass


def _stub_tool(spec: dict[str, Any]) -> AgentTool:
    mode = spec.get("executionMode")
    return AgentTool(
        name=str(spec["name"]),
        description=str(spec.get("description") or ""),
        parameters=spec.get("parameters") or {"type": "object", "properties": {}},
        execute=_never,
        execution_mode=mode if mode in ("sequential", "parallel") else None,
    )


async def _send_input(session: SessionHandle, item: RecordedInput, notes: list[str]) -> None:
    """Send one recorded input the way its sender did; errors are part of the behaviour."""
    args = item.args
    images = tuple(from_json(image, ImageContent) for image in args.get("images") or ())
    try:
        match item.op:
            case "prompt":
                accepted: Reply[Accepted] = session.new_reply()
                settled: Reply[None] = session.new_reply()
                behavior = args.get("streamingBehavior")
                await session.tell(Prompt(str(args["text"]), images, behavior, accepted, settled))
                await settled.wait()
            case "steer":
                await session.steer(str(args["text"]), images)
            case "follow_up":
                await session.follow_up(str(args["text"]), images)
            case "clear_queue":
                await session.clear_queue()
            case "abort":
                await session.abort()
            case "compact":
                await session.compact(args.get("customInstructions"))
            case "bash":
                notes.append("a user bash command ran for real during the replay")
                await session.bash(
                    str(args["command"]),
                    exclude_from_context=bool(args.get("excludeFromContext")),
                )
            case _:
                method = getattr(session, item.op)
                await method(**args)
    except PitrioError:
        pass


async def replay_records(
    records: Sequence[Record],
    *,
    segment: int = 1,
    stall_seconds: float | None = None,
    workdir: Path | None = None,
) -> ReplayResult:
    """Replay one segment (1-based) of a trace's records; see the module docstring."""
    found = segments(records)
    if not 1 <= segment <= len(found):
        raise ReplayError(f"the trace has {len(found)} segment(s); there is no segment {segment}")
    recording = Recording(found[segment - 1])
    if recording.dropped:
        raise ReplayError(
            f"the trace lost {recording.dropped} record(s) (the writer fell behind): "
            "its outputs may be incomplete, so it cannot be replayed"
        )
    notes: list[str] = []
    if len(found) > 1:
        notes.append(f"replaying segment {segment} of {len(found)}")
    if recording.gaps:
        notes.append(f"{recording.gaps} recorded event(s) were coalesced: expect a divergence")
    unsupported = [i.op for i in recording.inputs if i.op not in REPLAYED_OPS]
    if unsupported:
        notes.append(f"inputs not replayed: {', '.join(sorted(set(unsupported)))}")
    if stall_seconds is None:
        stall_seconds = max(MIN_STALL_SECONDS, recording.quiet + QUIET_MARGIN)
    base = Path(tempfile.mkdtemp(prefix="pitrio-replay-", dir=workdir))
    try:
        return await _replay(recording, base, stall_seconds, notes)
    finally:
        await trio.to_thread.run_sync(lambda: shutil.rmtree(base, ignore_errors=True))


async def _replay(
    recording: Recording, base: Path, stall_seconds: float, notes: list[str]
) -> ReplayResult:
    header = recording.header
    agent, cwd, sessions = base / "agent", base / "cwd", base / "sessions"
    for directory in (agent, cwd, sessions):
        directory.mkdir()
    (agent / "settings.json").write_bytes(orjson.dumps(header.get("settings") or {}))
    sequencer = Sequencer(recording.input_ticks, recording.output_ticks, recording.own_events())
    tap = ReplayTap(recording, sequencer)
    stubs = [_stub_tool(s) for s in header.get("toolSpecs") or () if s["name"] not in BUILTIN_TOOLS]
    stalled = False
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, config=RouterConfig(agent_dir=None))
        pattern = str(header["model"])
        try:
            await router.resolve(pattern)
        except UnknownModelError:  # e.g. a models.json model: the trace has its definition
            await router.register(from_json(header["modelSpec"], Model))
        options = SessionOptions(
            cwd=str(cwd),
            model=pattern,
            thinking_level=header.get("thinking"),
            agent_dir=agent,
            session_dir=str(sessions),
            tools=stubs,
            active_tools=list(header.get("tools") or ()),
            trace=lambda _session_id: tap,
        )
        started = await start_session(nursery, router, options)
        session = started.session
        with trio.CancelScope() as watch:
            tap.stop = watch.cancel
            nursery.start_soon(_watchdog, sequencer, stall_seconds, watch)
            await _drive(session, recording, sequencer, notes)
        stalled = watch.cancelled_caught and not tap.diverged
        with trio.CancelScope(shield=True), trio.move_on_after(10):
            await session.abort()
            await started.store.flush()
        nursery.cancel_scope.cancel()
    divergence = first_divergence(
        recording.events, tap.events, recorded_cwd=recording.cwd, replayed_cwd=tap.cwd
    )
    return ReplayResult(
        recorded_events=len(recording.events),
        replayed_events=len(tap.events),
        divergence=divergence,
        stalled=stalled,
        notes=tuple(dict.fromkeys([*notes, *tap.notes])),
    )


async def _watchdog(sequencer: Sequencer, stall_seconds: float, scope: trio.CancelScope) -> None:
    """Cancel ``scope`` once nothing has happened for ``stall_seconds``."""
    while not scope.cancel_called:
        seen = sequencer.progress
        await trio.sleep(stall_seconds)
        if sequencer.progress == seen:
            scope.cancel()


async def _drive(
    session: SessionHandle, recording: Recording, sequencer: Sequencer, notes: list[str]
) -> None:
    """Send the inputs at their recorded places, then wait for the session to come to rest."""
    async with trio.open_nursery() as senders:
        for item in recording.inputs:
            await sequencer.before_input(item.tick, item.at, item.loop)
            if item.op not in REPLAYED_OPS:
                sequencer.handled()  # skipped: later outputs must not wait for it
                continue
            expected = sequencer.delivered + 1
            senders.start_soon(_send_input, session, item, notes)
            # The next input goes only after the session handled this one: the recorded order.
            await sequencer.wait_until(_delivered(sequencer, expected))
    await session.wait_for_idle()
    emitted = await session.emitted_seq()
    await sequencer.wait_until(lambda: sequencer.events >= emitted)


def _delivered(sequencer: Sequencer, count: int) -> Callable[[], bool]:
    return lambda: sequencer.delivered >= count
