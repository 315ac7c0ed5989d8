"""What a trace segment holds, indexed for replay: the recorded events, inputs, model calls
and tool outcomes, and the ticks that order them.

Split from :mod:`~pitrio.actors.trace.replay`, which builds one :class:`Recording` per replay.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence
from typing import Any

import attrs

from pitrio.actors.trace.records import Record, decode_stream_events
from pitrio.actors.trace.tap import REPLAYABLE_INVOKES
from pitrio.errors import PitrioError

REPLAYED_OPS = (
    frozenset({"prompt", "steer", "follow_up", "clear_queue", "abort", "compact", "bash"})
    | REPLAYABLE_INVOKES
)


class ReplayError(PitrioError):
    """A trace that cannot be replayed (no header, dropped records), or a replayed output the
    trace does not hold."""


@attrs.define
class ModelCall:
    """One recorded model request: its stream events (with their ticks) and how it ended."""

    call: int
    key: str
    events: list[tuple[dict[str, Any], int]]
    end: str
    error: str | None
    used: bool = False


@attrs.frozen
class RecordedInput:
    """One recorded input (prompt, steer, abort, ...) and where it stood among the rest."""

    op: str
    args: dict[str, Any]
    seq: int
    tick: int
    loop: int = 0  # the loop's progress when the input reached it (0: not recorded)
    own: tuple[int, ...] = ()  # the seqs of the events the input emitted itself

    @property
    def at(self) -> int:
        """The session events to wait for before sending: those before its first own event
        (the session's pump may have emitted some while the input was on its way), else
        those emitted when the session took it."""
        return self.own[0] - 1 if self.own else self.seq


def recorded_input(record: Record) -> RecordedInput:
    """The input an ``input`` record holds."""
    return RecordedInput(
        record["op"],
        record.get("args") or {},
        record["seq"],
        record["tick"],
        int(record.get("loop") or 0),
        tuple(int(seq) for seq in record.get("own") or ()),
    )


class Recording:
    """One segment of a trace, indexed for replay."""

    def __init__(self, segment: Sequence[Record]) -> None:
        if not segment or segment[0]["k"] != "header":
            raise ReplayError("the trace has no header: nothing to replay")
        self.header = segment[0]
        cwd = self.header.get("cwd")
        # The recorded session's working directory: its system message names it.
        self.cwd = cwd if isinstance(cwd, str) else None
        self.events: list[dict[str, Any]] = []
        self.inputs: list[RecordedInput] = []
        self.calls: list[ModelCall] = []
        self.tools: dict[str, deque[Record]] = {}
        self.dropped = 0
        self.gaps = 0
        input_ticks: list[int] = []
        output_ticks: list[int] = []
        times = [float(r["t"]) for r in segment if isinstance(r.get("t"), int | float)]
        self.quiet = max((b - a for a, b in itertools.pairwise(times)), default=0.0)
        for record in segment[1:]:
            match record["k"]:
                case "event":
                    self.events.append(record["event"])
                case "input":
                    self.inputs.append(recorded_input(record))
                    input_ticks.append(record["tick"])
                case "model":
                    decoded = decode_stream_events(record["events"])
                    ticks = [int(item["tick"]) for item in record["events"]]
                    output_ticks += ticks
                    self.calls.append(
                        ModelCall(
                            call=record["call"],
                            key=record["key"],
                            events=list(zip(decoded, ticks, strict=True)),
                            end=record["end"],
                            error=record.get("error"),
                        )
                    )
                case "tool":
                    self.tools.setdefault(record["id"], deque()).append(record)
                    output_ticks += [int(u["tick"]) for u in record.get("updates", ())]
                    output_ticks.append(int(record["tick"]))
                case "dropped":
                    self.dropped += int(record.get("count") or 0)
                case "gap":
                    self.gaps += int(record.get("missing") or 0)
        self.input_ticks = sorted(input_ticks)
        self.output_ticks = sorted(output_ticks)

    def own_events(self) -> list[tuple[int, int]]:
        """The recorded seq of each event a replayed input emitted itself, with the input's
        index, in order (inputs that are not replayed emit none on replay)."""
        return [
            (seq, index)
            for index, item in enumerate(self.inputs)
            if item.op in REPLAYED_OPS
            for seq in item.own
        ]

    def take_call(self, key: str, notes: list[str]) -> ModelCall | None:
        """The recorded output for a request: same messages first, else the next unused."""
        for call in self.calls:
            if not call.used and call.key == key:
                call.used = True
                return call
        for call in self.calls:
            if not call.used:
                call.used = True
                notes.append(f"model request {call.call}: its messages differ from the recording's")
                return call
        return None

    def take_tool(self, call_id: str) -> Record | None:
        """The recorded outcome of a tool call (in recorded order per id)."""
        queue = self.tools.get(call_id)
        return queue.popleft() if queue else None
