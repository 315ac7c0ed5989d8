"""``pitrio trace summary``: what a trace says about the actors, as a pure function of records.

Per actor: commands sent and received (by type), the inbox depth over time (the deepest queue
seen in each of :data:`BUCKETS` equal slices of the segment's time span) and its peak; the
longest waits (send to receive of one command); and the session's events, inputs, model
requests and tool calls. Numbers pairing a send with its receive restart in every segment.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from pitrio.actors.trace.records import Record

BUCKETS = 10
LONGEST = 10


@attrs.frozen(kw_only=True)
class ActorSummary:
    """One actor's inbox traffic."""

    name: str
    sent: int
    received: int
    by_type: tuple[tuple[str, int], ...]
    """Received commands by type (sent ones where the receive side is not traced), busiest
    first."""
    peak_depth: int
    depth_over_time: tuple[int, ...]
    """The deepest inbox seen in each time slice (``BUCKETS`` slices)."""


@attrs.frozen(kw_only=True)
class Wait:
    """One command's time in an inbox."""

    actor: str
    type: str
    sent_at: float
    seconds: float
    run: int


@attrs.frozen(kw_only=True)
class TraceSummary:
    """Everything ``pitrio trace summary`` prints."""

    segments: int
    records: int
    span: float
    actors: tuple[ActorSummary, ...]
    longest_waits: tuple[Wait, ...]
    events: tuple[tuple[str, int], ...]
    inputs: tuple[str, ...]
    model_calls: int
    tool_calls: int
    dropped: int
    gaps: int
    runs: int


def summarise(records: Iterable[Record]) -> TraceSummary:
    """The summary of a trace's records (all segments)."""
    records = list(records)
    times = [r["t"] for r in records if isinstance(r.get("t"), int | float)]
    start, end = (min(times), max(times)) if times else (0.0, 0.0)
    span = end - start
    sent: Counter[str] = Counter()
    received: Counter[str] = Counter()
    received_types: dict[str, Counter[str]] = {}
    sent_types: dict[str, Counter[str]] = {}
    depth: dict[str, list[int]] = {}
    waits: list[Wait] = []
    events: Counter[str] = Counter()
    inputs: list[str] = []
    segments = model_calls = tool_calls = dropped = gaps = runs = 0
    pending: dict[int, Record] = {}
    for record in records:
        kind = record["k"]
        if kind == "header":
            segments += 1
            pending.clear()  # message numbers restart with each tracer
        elif kind == "msg":
            actor = str(record.get("actor"))
            slots = depth.setdefault(actor, [0] * BUCKETS)
            slot = _slot(record.get("t", start), start, span)
            slots[slot] = max(slots[slot], int(record.get("depth") or 0))
            kind_type = str(record.get("type"))
            if record.get("dir") == "send":
                sent[actor] += 1
                sent_types.setdefault(actor, Counter())[kind_type] += 1
                if isinstance(record.get("n"), int):
                    pending[record["n"]] = record
            else:
                received[actor] += 1
                received_types.setdefault(actor, Counter())[kind_type] += 1
                origin = (
                    pending.pop(record["n"], None) if isinstance(record.get("n"), int) else None
                )
                if origin is not None:
                    waits.append(
                        Wait(
                            actor=actor,
                            type=kind_type,
                            sent_at=float(origin["t"]) - start,
                            seconds=max(0.0, float(record["t"]) - float(origin["t"])),
                            run=int(record.get("run") or 0),
                        )
                    )
        elif kind == "event":
            events[str(record.get("type"))] += 1
        elif kind == "input":
            inputs.append(_describe_input(record))
        elif kind == "model":
            model_calls += 1
        elif kind == "tool":
            tool_calls += 1
        elif kind == "dropped":
            dropped += int(record.get("count") or 0)
        elif kind == "gap":
            gaps += int(record.get("missing") or 0)
        if isinstance(record.get("run"), int):
            runs = max(runs, record["run"])
    actors = []
    for name in sorted(set(sent) | set(received)):
        types = received_types.get(name) or sent_types.get(name) or Counter()
        slots = depth.get(name, [0] * BUCKETS)
        actors.append(
            ActorSummary(
                name=name,
                sent=sent[name],
                received=received[name],
                by_type=tuple(types.most_common()),
                peak_depth=max(slots),
                depth_over_time=tuple(slots),
            )
        )
    longest = heapq.nlargest(LONGEST, waits, key=lambda wait: wait.seconds)
    return TraceSummary(
        segments=segments,
        records=len(records),
        span=span,
        actors=tuple(actors),
        longest_waits=tuple(longest),
        events=tuple(events.most_common()),
        inputs=tuple(inputs),
        model_calls=model_calls,
        tool_calls=tool_calls,
        dropped=dropped,
        gaps=gaps,
        runs=runs,
    )


def _slot(t: Any, start: float, span: float) -> int:
    if span <= 0 or not isinstance(t, int | float):
        return 0
    return min(BUCKETS - 1, int((t - start) / span * BUCKETS))


def _describe_input(record: Record) -> str:
    args = record.get("args") or {}
    shown = ", ".join(f"{k}={_short(v)}" for k, v in args.items() if v not in (None, [], ""))
    return f"{record.get('op')}({shown}) after event {record.get('seq')}"


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def render_summary(summary: TraceSummary) -> str:
    """The summary as the text ``pitrio trace summary`` prints."""
    lines = [
        f"{summary.records} records, {summary.segments} segment(s), {summary.span:.3f} s, "
        f"{summary.runs} run(s), {summary.model_calls} model request(s), "
        f"{summary.tool_calls} tool call(s)",
    ]
    if summary.dropped or summary.gaps:
        lines.append(
            f"INCOMPLETE: {summary.dropped} record(s) dropped by the writer, "
            f"{summary.gaps} event(s) coalesced away"
        )
    lines += ["", "actor            sent   recv  peak  depth over time (max per slice)"]
    for actor in summary.actors:
        lines.append(
            f"{actor.name:<15} {actor.sent:>5} {actor.received:>6} {actor.peak_depth:>5}  "
            + " ".join(str(d) for d in actor.depth_over_time)
        )
        lines.append("    " + ", ".join(f"{name} {count}" for name, count in actor.by_type))
    lines += ["", "longest waits in an inbox (send -> receive):"]
    if not summary.longest_waits:
        lines.append("    (none recorded)")
    for wait in summary.longest_waits:
        lines.append(
            f"    {wait.seconds * 1000:9.3f} ms  {wait.actor} {wait.type} "
            f"(sent at +{wait.sent_at:.3f} s, run {wait.run})"
        )
    lines += ["", "session events:"]
    lines.append("    " + ", ".join(f"{name} {count}" for name, count in summary.events))
    lines += ["", "inputs:"]
    lines += [f"    {text}" for text in summary.inputs] or ["    (none)"]
    return "\n".join(lines) + "\n"


def render_timeline(records: Iterable[Record]) -> str:
    """The trace one line per record, in order, times from each segment's start (``pitrio
    trace timeline``): what to read when following a race through the actors."""
    lines: list[str] = []
    start: float | None = None
    for record in records:
        kind = record["k"]
        t = record.get("t")
        if kind == "header" or start is None:
            start = float(t) if isinstance(t, int | float) else 0.0
        at = f"+{float(t) - start:8.4f}" if isinstance(t, int | float) else " " * 9
        if kind == "header":
            text = f"session {record.get('session')} ({record.get('model')})"
        elif kind == "msg":
            head = f"{record.get('dir')} {record.get('type')} #{record.get('n')}: "
            if record.get("dir") == "send":
                head += f"{record.get('from', 'outside')} -> {record.get('actor')}"
            else:
                head += f"taken by {record.get('actor')}"
            text = f"{head} (depth {record.get('depth')})"
        elif kind == "event":
            text = f"event {record.get('seq')} {record.get('type')}"
        elif kind == "input":
            text = f"input {_describe_input(record)}"
        elif kind == "model":
            text = f"model request {record.get('call')} by {record.get('from', '?')}: "
            text += str(record.get("end"))
        elif kind == "tool":
            outcome = next((k for k in ("result", "error", "cancelled") if k in record), "?")
            text = f"tool {record.get('name')} by {record.get('from', '?')}: {outcome}"
        else:
            text = f"{kind} {_short({k: v for k, v in record.items() if k not in ('k', 't')})}"
        lines.append(f"{at}  {text}")
    return "\n".join(lines) + "\n" if lines else ""


def summary_json(summary: TraceSummary) -> dict[str, Any]:
    """The summary as JSON (``pitrio trace summary --json``)."""
    value: dict[str, Any] = attrs.asdict(summary, recurse=True, retain_collection_types=False)
    return value


__all__: Sequence[str] = (
    "TraceSummary",
    "render_summary",
    "render_timeline",
    "summarise",
    "summary_json",
)
