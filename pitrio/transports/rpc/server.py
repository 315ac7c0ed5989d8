"""The RPC server: ``pitrio --mode rpc``, a drop-in for ``pi --mode rpc`` (pi-rpc.md).

Tasks of one server (:meth:`RpcServer.serve`):

* the **reader** splits stdin into records (:mod:`.framing`), answers unparsable ones at once
  and starts a **handler** task per command, so a slow ``bash`` never holds up ``get_state``;
  every command gets exactly one response, correlated by its ``id``;
* the **forwarder** turns the session runtime's event stream (which spans session
  replacements) into lines;
* the **writer** (:class:`.output.RpcOutput`) is the only task writing stdout: it takes whole
  lines from one bounded channel, so lines never interleave and a client that stops reading
  slows the producers down instead of growing memory.

Ordering as pi writes it (pi-rpc.md §6.2): pi emits events synchronously, so a command's
events precede its response. Here events travel through a few tasks, so before writing the
response of a command that emits events (``EVENTFUL_COMMANDS``) its handler waits until the
forwarder has written every event the session had emitted by then (a *barrier* on the
session's event sequence number). A ``prompt`` is answered before its run's ``agent_start``:
while a prompt's response is pending, the forwarder holds ``agent_start`` back (the *gate*).

Process behaviour (:func:`.process.run_rpc`): protocol lines go to the real stdout, everything else
printed (``print``, C libraries, child processes) goes to stderr; stdin EOF aborts the run,
answers the commands already read, flushes the session and exits 0; SIGTERM / SIGHUP do the
same without waiting for commands and exit 143 / 129; SIGINT too, then the process dies of it
(as pi); start-up errors go to stderr with exit code 1 before any JSON is written.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs
import trio

from pitrio.errors import PitrioError
from pitrio.messages.events import AgentStart
from pitrio.messages.model import Model
from pitrio.sdk.models import ModelRouterHandle
from pitrio.sdk.session import (
    CommandLedger,
    SequencedRun,
    SessionHandle,
    SessionOptions,
    SessionRuntime,
    ShutdownRequest,
    event_weight,
)
from pitrio.sdk.streams import receiver
from pitrio.transports.interrupt import INTERRUPTED
from pitrio.transports.rpc.commands import (
    EVENTFUL_COMMANDS,
    HANDLERS,
    ScopedModel,
    execute,
    unknown_command,
)
from pitrio.transports.rpc.events import (
    EntryFormat,
    UpdateFormat,
    announced,
    encode_event,
    encode_run,
)
from pitrio.transports.rpc.framing import DEFAULT_MAX_RECORD, Record, RecordSplitter
from pitrio.transports.rpc.once import apply_once
from pitrio.transports.rpc.output import WRITE_BATCH, RpcOutput
from pitrio.transports.rpc.protocol import (
    Request,
    dump_line,
    dump_output,
    parse_record,
)

T = TypeVar("T")

READ_SIZE = 1 << 16
FORWARD_BATCH = 256
"""Events the forwarder takes at once when they are waiting (fewer when they weigh more than
:data:`WRITE_BATCH` together: each holds its partial message)."""
MAX_IN_FLIGHT = 256
"""Commands read but not yet answered. At this many the reader stops reading stdin until one
is answered: a client that sends without reading its answers fills the pipe and waits, instead
of growing pitrio by a task and a response per line (issue 21: 100,000 ``get_state`` lines
grew the process to 542 MB). Answers to dialogs (``extension_ui_response``) need no slot."""
BARRIER_SECONDS = 10.0
"""A safety net: a response never waits longer than this for its events."""
EOF_GRACE_SECONDS = 5.0
"""How long commands read before stdin's EOF may take to answer once the run is aborted."""
SHUTDOWN_SECONDS = 15.0
HIDDEN_MODELS = frozenset({("faux", "echo")})
"""pitrio's offline default model: usable, but not listed (pi lists only configured models)."""
EXIT_SIGNALS = {signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGINT: INTERRUPTED}
"""SIGINT: as pi, the process dies of it (after the same clean shutdown; see interrupt.py)."""


def _nothing() -> None:
    """A ``bash_accepted`` for a request no abort waits on."""


def fresh_session_options(startup: SessionOptions, parent_session: str | None) -> SessionOptions:
    """The options of a ``new_session``: the process's start-up options, no session to open."""
    return attrs.evolve(
        startup,
        session=None,
        continue_recent=False,
        fork=None,
        path=None,
        seed=None,
        parent_session=parent_session,
    )


class RpcServer:
    """Serves pi's RPC protocol for one client over a pair of byte streams."""

    streams_replies = True
    """Long replies may be :class:`~pitrio.transports.rpc.protocol.StreamedPieces`: its
    writer makes them piece by piece as it writes them (an ``RpcBackend`` without this
    attribute, the daemon's, gets them encoded beforehand)."""

    def __init__(
        self,
        runtime: SessionRuntime,
        router: ModelRouterHandle,
        output: trio.abc.SendStream,
        *,
        scoped_models: Sequence[ScopedModel] = (),
        max_record: int = DEFAULT_MAX_RECORD,
        shutdown: ShutdownRequest | None = None,
    ) -> None:
        self._runtime = runtime
        self._startup = runtime.options
        self._router = router
        self._scoped = tuple(scoped_models)
        self._max_record = max_record
        self._updates: UpdateFormat = "full"
        self._entries: EntryFormat = "pi"
        self._out = RpcOutput(output)
        self._send = self._out.send  # bound once: it runs for every line
        self._replacing: trio.Event | None = None
        # ``bash`` commands read but not yet in the session's inbox, by request; an
        # ``abort_bash`` read after them waits for these (handlers run in any order).
        self._bash_unaccepted: dict[int, trio.Event] = {}
        self._abort_waits: dict[int, list[trio.Event]] = {}
        self._closing = False
        # Where the forwarder is: the session whose events it is writing, and the sequence
        # number of the last event it handed to the writer.
        self._owner: SessionHandle | None = None
        self._written_seq = 0
        self._moved = trio.Event()
        # The prompt gate.
        self._open_prompts = 0
        # A command's response barrier its handler learnt (by the request's id): see
        # ``events_before_response``.
        self._barriers: dict[int, tuple[SessionHandle, int]] = {}
        self._prompts_answered = trio.Event()
        self._at_gate = False
        self._in_flight = trio.CapacityLimiter(MAX_IN_FLIGHT)
        self._ledger = CommandLedger()  # the ids this client's commands carried (exactly once)
        # Extensions' ctx.shutdown(): served as the end of input once nothing needs the
        # process (pi 1.6.0's RPC mode); ``_answered`` is replaced after each answer.
        self._shutdown = shutdown
        self._answered = trio.Event()

    # -- RpcBackend ----------------------------------------------------------------------

    async def session(self) -> SessionHandle:
        """The current session, once a replacement in progress is done."""
        while self._replacing is not None:
            await self._replacing.wait()
        return self._runtime.current.session

    def events_before_response(self, request: Request, session: SessionHandle, seq: int) -> None:
        """Remember ``request``'s barrier (its handler learnt it with the command's answer)."""
        self._barriers[id(request)] = (session, seq)

    async def _replace(self, action: Callable[[], Awaitable[T]]) -> T:
        while self._replacing is not None:
            await self._replacing.wait()
        done = self._replacing = trio.Event()
        try:
            return await action()
        finally:
            self._replacing = None
            done.set()

    async def new_session(self, parent_session: str | None) -> None:
        """``new_session``: a fresh session made like the first one (pi builds it with the
        same factory, so the start-up ``--model`` and ``--thinking`` apply again)."""
        options = attrs.evolve(
            fresh_session_options(self._startup, parent_session), start_reason="new"
        )

        async def replace() -> None:
            from pitrio.sdk.session import SessionBeforeSwitchEvent

            await self._runtime.gate(
                "session_before_switch", SessionBeforeSwitchEvent(reason="new")
            )
            await self._runtime.start(options)

        await self._replace(replace)

    def bash_accepted(self, request: Request) -> Callable[[], None]:
        """Release the ``abort_bash`` commands read after ``request`` (a ``bash``)."""
        event = self._bash_unaccepted.pop(id(request), None)
        return event.set if event is not None else _nothing

    async def earlier_bash_accepted(self, request: Request) -> None:
        """Wait until every ``bash`` read before ``request`` is in the session's inbox."""
        for event in self._abort_waits.pop(id(request), ()):
            await event.wait()

    async def switch_session(self, path: str) -> None:
        """``switch_session``."""
        await self._replace(lambda: self._runtime.switch_session(path))

    async def fork(self, entry_id: str) -> str | None:
        """``fork``."""
        return await self._replace(lambda: self._runtime.fork(entry_id))

    async def clone(self) -> None:
        """``clone``."""
        await self._replace(self._runtime.clone)

    async def available_models(self) -> tuple[Model, ...]:
        """The session's usable models (the router's, then the virtual models its extensions
        registered), pitrio's offline echo model left out."""
        models = await (await self.session()).models("available")
        return tuple(m for m in models if (m.provider, m.id) not in HIDDEN_MODELS)

    def scoped_models(self) -> tuple[ScopedModel, ...]:
        """The ``--models`` scope."""
        return self._scoped

    async def command_list(self) -> list[dict[str, Any]]:
        """Extension commands, prompt templates and skills of the current session."""
        return await (await self.session()).commands()

    def set_update_format(self, updates: UpdateFormat) -> None:
        """``set_event_format``: every event the forwarder encodes from now on."""
        self._updates = updates

    def set_entry_format(self, entries: EntryFormat) -> None:
        """``set_event_format {"entries"}``: which entries are announced from now on."""
        self._entries = entries

    # -- serving -------------------------------------------------------------------------

    async def serve(self, stdin: trio.abc.ReceiveStream) -> None:
        """Serve until ``stdin`` ends (or stdout breaks); returns after the last response."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._out.run)
            nursery.start_soon(self._forward_events)
            async with trio.open_nursery() as handlers:
                with trio.CancelScope() as reading:
                    nursery.start_soon(self._stop_reading_when_broken, reading)
                    nursery.start_soon(self._stop_reading_when_shut_down, reading)
                    await self._read_loop(stdin, handlers)
                # End of input: stop the run so the commands already read can answer, then
                # give them a moment (leaving this block waits for them, up to the deadline).
                self._closing = True
                self._wake()
                handlers.cancel_scope.deadline = trio.current_time() + EOF_GRACE_SECONDS
                await self._abort_activity()
            await self._out.close()  # the writer ends once it wrote what is queued
            with trio.move_on_after(EOF_GRACE_SECONDS):
                await self._out.done.wait()
            nursery.cancel_scope.cancel()

    async def _stop_reading_when_broken(self, reading: trio.CancelScope) -> None:
        await self._out.broken.wait()
        reading.cancel()

    async def _stop_reading_when_shut_down(self, reading: trio.CancelScope) -> None:
        """After ``ctx.shutdown()``: stop reading (as at the end of input) once the session is
        idle and every command read has its answer; each answer looks again."""
        if self._shutdown is None:
            return
        await self._shutdown.requested.wait()
        while True:
            answered = self._answered
            with contextlib.suppress(PitrioError):
                await (await self.session()).wait_for_idle()
            if self._in_flight.borrowed_tokens == 0:
                reading.cancel()
                return
            await answered.wait()

    async def _abort_activity(self) -> None:
        """At EOF: stop the run and a user command, so pending commands can answer."""
        try:
            session = await self.session()
            await session.abort_bash()
            await session.abort()
        except PitrioError:
            pass

    async def _read_loop(self, stdin: trio.abc.ReceiveStream, handlers: trio.Nursery) -> None:
        splitter = RecordSplitter(self._max_record)
        # A pipe is read directly: trio's FdStream yields before every read, a task step per
        # command (issue 7); see pitrio.actors.direct_io.
        receive = receiver(stdin, READ_SIZE)
        while True:
            try:
                data = await receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            if not data:
                for record in splitter.finish():
                    await self._dispatch(record, handlers)
                return
            for record in splitter.feed(bytes(data)):
                await self._dispatch(record, handlers)

    async def _dispatch(self, record: Record, handlers: trio.Nursery) -> None:
        parsed = parse_record(record)
        if not isinstance(parsed, Request):
            await self._send(dump_line(parsed))
            return
        if parsed.type == "extension_ui_response":
            # Routed to the dialog with its id before any command (pi); never answered.
            handlers.start_soon(self._answer_dialog, parsed)
            return
        if parsed.type not in HANDLERS:
            # Answered in input order, like the parse errors around it.
            await self._send(dump_line(unknown_command(parsed)))
            return
        # Back-pressure on stdin: no more reading while MAX_IN_FLIGHT commands are unanswered.
        try:
            self._in_flight.acquire_on_behalf_of_nowait(id(parsed))  # no task switch (issue 7)
        except trio.WouldBlock:
            await self._in_flight.acquire_on_behalf_of(id(parsed))
        if parsed.type == "prompt":
            # Counted now, before anything of its run can reach the forwarder.
            self._open_prompts += 1
        elif parsed.type == "bash":
            self._bash_unaccepted[id(parsed)] = trio.Event()
        elif parsed.type == "abort_bash":
            self._abort_waits[id(parsed)] = list(self._bash_unaccepted.values())
        handlers.start_soon(self._handle, parsed)

    async def _answer_dialog(self, request: Request) -> None:
        try:
            session = await self.session()
        except PitrioError:
            return  # no session, so no dialog to answer: ignored, as an unknown id is
        from pitrio.sdk.session import UiResponse  # the first dialog answer imports it

        await session.respond_ui(UiResponse.from_json(request.fields))

    async def _handle(self, request: Request) -> None:
        try:
            # One client per process (pi's RpcClient numbers its ids from req_1 in each), so
            # its ids are kept for the process only and not written to the file.
            response = await apply_once(
                self._ledger, request, lambda: execute(self, request), durable=False
            )
            known = self._barriers.pop(id(request), None)
            if request.type in EVENTFUL_COMMANDS:
                await self._events_written(gate_ok=request.type == "prompt", known=known)
            await self._send(dump_output(response))
        finally:
            self._in_flight.release_on_behalf_of(id(request))
            self._barriers.pop(id(request), None)
            self.bash_accepted(request)()  # answered (maybe refused): no abort waits on it
            self._abort_waits.pop(id(request), None)
            if request.type == "prompt":
                self._open_prompts -= 1
                if self._open_prompts == 0:
                    self._prompts_answered.set()
                    self._prompts_answered = trio.Event()
            self._answered.set()
            self._answered = trio.Event()

    # -- events --------------------------------------------------------------------------

    def _current_session(self) -> SessionHandle | None:
        try:
            return self._runtime.current.session
        except PitrioError:
            return None

    def _wake(self) -> None:
        self._moved.set()
        self._moved = trio.Event()

    async def _events_written(
        self, *, gate_ok: bool, known: tuple[SessionHandle, int] | None = None
    ) -> None:
        """Wait until every event the current session emitted so far has been queued for
        writing (or, for a prompt, until the forwarder holds its run's ``agent_start``).

        ``known``: the session and ``seq`` the command's own answer carried (a prompt's
        acceptance), which saves asking the session (issue 7: a round trip per prompt).
        """
        session = self._current_session()
        if session is None or self._replacing is not None:
            return
        if known is not None and known[0] is session:
            target = known[1]
        else:
            try:
                target = await session.emitted_seq()
            except PitrioError:
                return
        if target == 0:
            return  # nothing emitted yet (a fresh session the forwarder may not know)

        def reached() -> bool:
            return (
                self._closing
                or (self._owner is session and self._written_seq >= target)
                or (gate_ok and self._at_gate)
                or self._current_session() is not session
            )

        if reached():
            return  # the usual case: no cancel scope to open (issue 7)
        with trio.move_on_after(BARRIER_SECONDS):
            while not reached():
                await self._moved.wait()

    async def _forward_events(self) -> None:
        self._owner = self._current_session()
        events = self._runtime.events
        async for first in events:
            # Take what else is waiting: one channel hand-over for many lines.
            batch = [first]
            weight = event_weight(first.event)
            while len(batch) < FORWARD_BATCH and weight < WRITE_BATCH:
                try:
                    batch.append(events.receive_nowait())
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                weight += event_weight(batch[-1].event)
            lines: list[bytes] = []
            pending = 0  # bytes in ``lines``
            seen = self._written_seq
            for item in batch:
                if item.seq <= seen or seen == 0:
                    # Sequence numbers are per session: a restart means a replaced session.
                    await self._flush(lines, seen)
                    pending = 0
                    self._owner = self._current_session()
                if isinstance(item.event, AgentStart) and self._open_prompts > 0:
                    await self._flush(lines, seen)
                    pending = 0
                    self._at_gate = True
                    self._wake()
                    while self._open_prompts > 0:
                        await self._prompts_answered.wait()
                    self._at_gate = False
                if not self._closing and announced(item.event, self._entries):
                    # After EOF pi writes nothing more: the abandoned run's end is not reported.
                    # A run of deltas is written as the line of each (issue 38).
                    if type(item) is SequencedRun:
                        line = encode_run(item.run, self._updates)
                    else:
                        line = encode_event(item.event, self._updates)
                    lines.append(line)
                    pending += len(line)
                seen = item.seq
                if pending >= WRITE_BATCH:
                    # Hand over about a write's worth at a time: the queue to the writer is
                    # bounded in bytes, not only in items (see output.OUTPUT_LINES).
                    await self._flush(lines, seen)
                    pending = 0
            await self._flush(lines, seen)

    async def _flush(self, lines: list[bytes], seq: int) -> None:
        """Queue ``lines`` for the writer; the forwarder is then at ``seq``."""
        if lines:
            await self._send(b"".join(lines))
            lines.clear()
        self._written_seq = seq
        self._wake()
