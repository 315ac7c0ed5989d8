"""The recorder: turns what the hooks report into trace records and writes them as JSONL.

:class:`Tracer` is called inline from the actors' tasks (inbox sends and receives, model
events, tool outputs, session events). It never blocks them: a record goes into a bounded
channel with ``send_nowait``.

Overflow policy: when the channel is full (the writer fell behind), the record is **dropped
and counted**; the writer writes a ``dropped`` record with the count as soon as it catches up,
and a replay refuses a trace with drops (its outputs may be incomplete) while the summary still
reads it. Records offered after the tracer was closed (the session is stopping) are counted in
:attr:`Tracer.late` and not written.

The writer task appends to the file (whole batches per ``write``, in a worker thread so a slow
disk never stalls the session). Cancelled with its session, it keeps writing until the tracer
is closed (the session's event task closes it as its last act, after recording what it had
been handed), shielded: the tail of an interrupted session is never cut by a timer on a busy
machine. :data:`CLOSE_DEADLINE` bounds that wait only against a tracer nobody closes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import attrs
import orjson
import trio

from pitrio.actors._actor import current_actor
from pitrio.actors.trace.records import Record, encode_line
from pitrio.messages.codec import to_json

DEFAULT_CAPACITY = 8192
"""Records the writer may fall behind by before records are dropped."""
SESSION_ACTOR = "session"
LOOP_ACTOR = "agent-loop"
CLOSE_DEADLINE = 30.0
"""Seconds a cancelled writer waits for :meth:`Tracer.close` before it gives up on the rest
(a safety net: the taps always close their tracer when their session stops)."""
PAYLOAD_LIMIT = 300  # characters of a field's text in a ``msg`` payload

InputClassifier = Callable[[object], tuple[str, dict[str, Any]] | None]
"""A session command as a replayable input ``(op, args)``; ``None``: not an input."""
Observer = Callable[[Record], None]


def _zero_probe() -> tuple[int, int]:
    return 0, 0


def _no_loop() -> int:
    return 0


class Tracer:
    """Receives the hooks' reports for one session and queues them as records.

    ``probe`` returns the session's (events emitted, runs started) at the moment of a record;
    ``loop_probe`` how many events the agent loop has sent the session; ``inputs`` recognises
    the session commands that replay re-sends; ``observer`` (replay) sees every record
    synchronously; ``on_own`` (replay) is told of each event an input emitted itself; with
    ``queue=False`` nothing is queued for a writer.
    """

    def __init__(
        self,
        *,
        capacity: int = DEFAULT_CAPACITY,
        payloads: bool = False,
        observer: Observer | None = None,
        queue: bool = True,
    ) -> None:
        self._send, self._receive = trio.open_memory_channel[Record](capacity)
        self._queue = queue  # False: no file is written, records only reach the observer
        self.payloads = payloads
        self.observer = observer
        self.probe: Callable[[], tuple[int, int]] = _zero_probe
        self.loop_probe: Callable[[], int] = _no_loop
        self.inputs: InputClassifier | None = None
        self.on_own: Callable[[int], None] | None = None
        self.dropped = 0
        self.late = 0
        self.ticks = 0
        self._numbers = 0
        self._in_flight: dict[int, int] = {}  # id(command) -> its message number, until taken
        self._inputs: dict[int, Record] = {}  # id(command) -> its input record, until handled
        # The input the session actor is handling, and the task handling it: the events that
        # task emits meanwhile are the input's own (see on_emitted).
        self._handling: Record | None = None
        self._handling_task: trio.lowlevel.Task | None = None
        self._reached_loop = False  # whether the loop took a command while it was handled

    # -- records -----------------------------------------------------------------------------

    def record(self, record: Record) -> None:
        """Queue one record (``t`` and ``run`` are added here); never blocks."""
        record["t"] = trio.current_time()
        record.setdefault("run", self.probe()[1])
        if self.observer is not None:
            self.observer(record)
        if not self._queue:
            return
        try:
            self._send.send_nowait(record)
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self.late += 1

    def next_tick(self) -> int:
        """Number one more stimulus or output (see :mod:`~pitrio.actors.trace.records`)."""
        self.ticks += 1
        return self.ticks

    def close(self) -> None:
        """No more records: the writer writes what is queued and ends."""
        self._send.close()

    # -- the actor base's hook (pitrio.actors._actor.InboxTracer) ----------------------------

    def on_send(self, actor: str, command: object, depth: int) -> None:
        """A command offered to an inbox (recorded with a number its receive will carry)."""
        self._numbers += 1
        self._in_flight[id(command)] = self._numbers
        record: Record = {
            "k": "msg",
            "actor": actor,
            "dir": "send",
            "type": type(command).__name__,
            "depth": depth,
            "n": self._numbers,
        }
        sender = current_actor()
        if sender is not None:
            record["from"] = sender
        if self.payloads:
            record["payload"] = describe(command)
        self.record(record)

    def on_receive(self, actor: str, command: object, depth: int) -> None:
        """A command taken by an actor; a session command from outside is also an input."""
        record: Record = {
            "k": "msg",
            "actor": actor,
            "dir": "recv",
            "type": type(command).__name__,
            "depth": depth,
            "n": self._in_flight.pop(id(command), None),
        }
        self.record(record)
        handling = self._handling
        if actor == LOOP_ACTOR and handling is not None and not self._reached_loop:
            # The input (or something else while it is handled) reached the loop: what the
            # loop had done by now is the input's place in the loop's progress.
            self._reached_loop = True
            handling["loop"] = self.loop_probe()
        if actor == SESSION_ACTOR and self.inputs is not None:
            found = self.inputs(command)
            if found is not None:
                op, args = found
                seq, _ = self.probe()
                input_record: Record = {
                    "k": "input",
                    "op": op,
                    "args": args,
                    "seq": seq,
                    "loop": self.loop_probe(),
                    "own": [],
                }
                self._inputs[id(command)] = input_record
                self._handling = input_record
                self._handling_task = trio.lowlevel.current_task()
                self._reached_loop = False

    def on_handled(self, actor: str, command: object) -> None:
        """An input has taken effect: it is recorded now, with the place it arrived at.

        Its tick is taken here, not at receipt: what an input does may need more messages
        (a steer reaches the agent loop's queue through one), and an output recorded after
        the receipt but before that is not ordered after the input's effect.
        """
        record = self._inputs.pop(id(command), None)
        if record is not None:
            if record is self._handling:
                self._handling = self._handling_task = None
            record["tick"] = self.next_tick()
            self.record(record)

    def on_emitted(self, seq: int) -> None:
        """The session emitted event ``seq`` (told in the emitting task): an event the task
        handling an input emits is that input's own, kept in its ``own`` list."""
        handling = self._handling
        if handling is not None and trio.lowlevel.current_task() is self._handling_task:
            handling["own"].append(seq)
            if self.on_own is not None:
                self.on_own(seq)

    # -- the writer --------------------------------------------------------------------------

    async def write_to(self, path: Path) -> None:
        """Append the records to ``path`` until :meth:`close` (run it as a task)."""
        handle = await trio.to_thread.run_sync(_open_append, path)
        written_drops = 0
        # A batch taken from the channel but not written yet: a cancellation that arrives
        # as its write starts (``to_thread`` checks for one before it starts the thread)
        # must not lose it (a trace lost its last two events that way, under load).
        unwritten = b""
        try:
            async for first in self._receive:
                batch = [first]
                while True:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                unwritten = b"".join(encode_line(record) for record in batch)
                if self.dropped != written_drops:
                    unwritten += self._drop_line(self.dropped - written_drops)
                    written_drops = self.dropped
                await trio.to_thread.run_sync(_write, handle, unwritten)
                unwritten = b""
        finally:
            with trio.CancelScope(shield=True):
                rest: list[Record] = []
                # Cancelled with the session: the event task, cancelled too, records what
                # had been delivered and then closes the tracer. No grace period: under load
                # that task may run well after this one (a failure seen on CI cut the final
                # ``agent_settled`` off a one-second grace).
                with trio.move_on_after(CLOSE_DEADLINE):
                    async for record in self._receive:
                        rest.append(record)
                self._receive.close()
                data = unwritten + b"".join(encode_line(record) for record in rest)
                if self.dropped != written_drops:
                    data += self._drop_line(self.dropped - written_drops)
                await trio.to_thread.run_sync(_finish, handle, data)

    def _drop_line(self, count: int) -> bytes:
        return encode_line({"k": "dropped", "t": trio.current_time(), "count": count})


def _open_append(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("ab")


def _write(handle: BinaryIO, data: bytes) -> None:
    handle.write(data)
    handle.flush()


def _finish(handle: BinaryIO, data: bytes) -> None:
    try:
        if data:
            handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    finally:
        handle.close()


def describe(command: object) -> dict[str, Any]:
    """A command's fields as JSON for a ``msg`` payload: data as the codec writes it, other
    values (replies, channels, functions) as a short text."""
    cls = type(command)
    if not attrs.has(cls):
        return {"repr": _short(repr(command))}
    out: dict[str, Any] = {}
    for field in attrs.fields(cls):
        value = getattr(command, field.name)
        if isinstance(value, str | int | float | bool) or value is None:
            out[field.name] = _short(value) if isinstance(value, str) else value
            continue
        try:
            # cattrs passes unknown objects through unchanged: only what orjson can write is
            # data; the rest (a reply, a channel, a callable) is named by its class.
            text = orjson.dumps(to_json(value))
        except Exception:
            out[field.name] = type(value).__name__
        else:
            out[field.name] = orjson.loads(text) if len(text) <= 4 * PAYLOAD_LIMIT else "..."
    return out


def _short(text: str) -> str:
    return text if len(text) <= PAYLOAD_LIMIT else text[:PAYLOAD_LIMIT] + "..."
