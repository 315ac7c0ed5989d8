"""The trace format: one JSON object per line, pure data (no trio, no I/O).

Every line has ``k`` (its kind) and ``t`` (seconds on the trio clock of the traced process:
monotonic, comparable only within one trace segment). Kinds:

``header``
    one per traced session start (a *segment*): format version ``v``, ``session`` id, ``cwd``,
    ``model`` (``provider/id``) and ``modelSpec`` (the model's JSON), ``thinking``, the
    effective ``settings``, the active ``tools`` and the ``toolSpecs`` of custom tools,
    ``payloads`` (whether ``msg`` lines carry payloads).
``msg``
    a command crossing an actor's inbox: ``actor``, ``dir`` (``send``: offered to the inbox,
    ``recv``: taken by the actor), ``type`` (the command's class), ``depth`` (commands queued
    before it / still queued after it), ``n`` (pairs a send with its receive), ``run``,
    ``payload`` when payloads are on, and on a send ``from``: the actor whose task sent it
    (absent when no actor's did: a transport, a test).
``event``
    a session event as subscribers saw it: ``seq``, ``type``, ``run``, ``event`` (its JSON;
    a ``message_update`` without ``message`` and ``partial``, the delta form).
``input``
    a command from outside the session that replay re-sends: ``op`` and ``args``; ``seq`` is
    the number of events the session had emitted when it took the command; ``loop`` the
    number of items the agent loop had sent the session's pump when the command reached the
    loop (when the session took it, if it never did); ``own`` the seqs of the events the
    session emitted itself while handling it (the task that handled it emitted them);
    ``tick`` (taken, and the line written, once the session actor's ``handle`` returned for
    it). ``loop`` and ``own`` are optional: traces made before them replay by ``seq``.
``model``
    one model request's output: ``call`` (1, 2, ...), ``key`` (a digest of the request's
    messages with timestamps removed, to match requests on replay), ``events`` (each
    ``{"e": event without its message, "m": message as a :func:`diff` of the previous one,
    "tick": n}``), ``end``: ``done`` (a final event was sent), ``cancelled`` or ``raised``, and
    ``from``: the actor whose task made the request.
``tool``
    one tool body's output: ``id`` (tool call id), ``name``, ``updates`` (``{"r": partial
    result, "tick": n}``), then ``result`` or ``error`` (its text) or ``cancelled``; ``tick``;
    ``from``: the actor whose task ran the body.
``dropped``
    ``count`` records were lost because the writer fell behind (see the overflow policy in
    :mod:`pitrio.actors.trace.recorder`).
``gap``
    the trace's event subscription skipped ``missing`` events before ``seq`` (coalesced).

*Ticks* number the outside stimuli (inputs) and outputs (model events, tool updates and
results) in the order they happened; replay keeps that order between inputs and outputs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import orjson

from pitrio.errors import PitrioError

FORMAT_VERSION = 1

Record = dict[str, Any]
"""One trace line, decoded."""

KINDS = ("header", "msg", "event", "input", "model", "tool", "dropped", "gap")


class TraceFormatError(PitrioError):
    """A trace file that cannot be read: the message names the line and the problem."""


def encode_line(record: Mapping[str, Any]) -> bytes:
    """One record as a JSON line (with its newline)."""
    return orjson.dumps(record) + b"\n"


def decode_lines(lines: Iterable[bytes | str], *, source: str = "trace") -> Iterator[Record]:
    """The records of a trace's lines; an unterminated, unparsable last line is skipped (a
    trace cut short by a crash), any other bad line is a :class:`TraceFormatError`."""
    pending: tuple[int, bytes | str, BaseException] | None = None
    for number, line in enumerate(lines, start=1):
        if pending is not None:
            raise TraceFormatError(f"{source}:{pending[0]}: not JSON: {pending[2]}")
        if not line.strip():
            continue
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            pending = (number, line, exc)
            continue
        if not isinstance(value, dict) or not isinstance(value.get("k"), str):
            raise TraceFormatError(f"{source}:{number}: not a trace record")
        if value["k"] == "header" and value.get("v") != FORMAT_VERSION:
            raise TraceFormatError(
                f"{source}:{number}: trace format {value.get('v')!r} (this pitrio reads "
                f"{FORMAT_VERSION})"
            )
        yield value
    if pending is not None:
        text = pending[1]
        terminated = text.endswith(b"\n") if isinstance(text, bytes) else text.endswith("\n")
        if terminated:
            raise TraceFormatError(f"{source}:{pending[0]}: not JSON: {pending[2]}")


def segments(records: Iterable[Record]) -> list[list[Record]]:
    """The records split at each ``header`` (one segment per traced session start); records
    before the first header form no segment."""
    result: list[list[Record]] = []
    for record in records:
        if record["k"] == "header":
            result.append([record])
        elif result:
            result[-1].append(record)
    return result


# -- request keys ------------------------------------------------------------------------------


_FRESH = frozenset({"timestamp", "durationMs"})
"""Keys whose values are this run's: times and durations (pi 1.6.0's ``durationMs``)."""


def _strip_timestamps(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_timestamps(v) for k, v in value.items() if k not in _FRESH}
    if isinstance(value, list):
        return [_strip_timestamps(v) for v in value]
    return value


def request_key(messages_json: Sequence[Any]) -> str:
    """A digest of a request's messages, timestamps and durations removed (they are fresh on
    replay)."""
    canonical = orjson.dumps(_strip_timestamps(list(messages_json)), option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:16]


# -- successive values as differences ----------------------------------------------------------
#
# A model stream's events each carry the whole message so far: stored as they are, a long
# answer would cost the square of its length. Each message is stored as a difference from the
# previous one instead: only changed keys of objects, an unchanged list prefix, the appended
# tail of a string that grew.


def diff(previous: Any, current: Any) -> Any:
    """A compact description of ``current`` given ``previous`` (see :func:`patch`)."""
    if previous == current:
        return {"=": 1}
    if isinstance(previous, dict) and isinstance(current, dict):
        changed = {
            k: diff(previous.get(k), v)
            for k, v in current.items()
            if k not in previous or previous[k] != v
        }
        gone = [k for k in previous if k not in current]
        out: dict[str, Any] = {"o": changed}
        if gone:
            out["x"] = gone
        return out
    if isinstance(previous, list) and isinstance(current, list):
        same = 0
        for a, b in zip(previous, current, strict=False):
            if a != b:
                break
            same += 1
        tail = [
            diff(previous[i], current[i]) if i < len(previous) else {"v": current[i]}
            for i in range(same, len(current))
        ]
        return {"l": same, "t": tail}
    if isinstance(previous, str) and isinstance(current, str) and current.startswith(previous):
        return {"s": current[len(previous) :]}
    return {"v": current}


def patch(previous: Any, change: Any) -> Any:
    """``current`` from ``previous`` and ``diff(previous, current)``."""
    if not isinstance(change, dict):
        raise TraceFormatError(f"not a difference: {change!r}")
    if "=" in change:
        return previous
    if "v" in change:
        return change["v"]
    if "s" in change:
        return (previous if isinstance(previous, str) else "") + change["s"]
    if "o" in change:
        base = dict(previous) if isinstance(previous, dict) else {}
        for key in change.get("x", ()):
            base.pop(key, None)
        for key, sub in change["o"].items():
            base[key] = patch(base.get(key), sub)
        return base
    if "l" in change:
        old = previous if isinstance(previous, list) else []
        kept = list(old[: change["l"]])
        for offset, sub in enumerate(change["t"]):
            index = change["l"] + offset
            kept.append(patch(old[index] if index < len(old) else None, sub))
        return kept
    raise TraceFormatError(f"not a difference: {change!r}")


MESSAGE_FIELDS = ("partial", "message", "error")
"""Where an assistant stream event keeps its message."""


def split_stream_event(event_json: Mapping[str, Any]) -> tuple[dict[str, Any], str | None, Any]:
    """An assistant stream event's JSON as (the rest, the message field's name, the message)."""
    rest = dict(event_json)
    for field in MESSAGE_FIELDS:
        if field in rest:
            return rest, field, rest.pop(field)
    return rest, None, None


def encode_stream_events(events_json: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A model call's events with each message stored as a difference from the previous one."""
    out: list[dict[str, Any]] = []
    previous: Any = None
    for event in events_json:
        rest, field, message = split_stream_event(event)
        item: dict[str, Any] = {"e": rest}
        if field is not None:
            item["f"] = field
            item["m"] = diff(previous, message)
            previous = message
        out.append(item)
    return out


def decode_stream_events(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The events' JSON back from :func:`encode_stream_events` items."""
    out: list[dict[str, Any]] = []
    previous: Any = None
    for item in items:
        event = dict(item["e"])
        field = item.get("f")
        if isinstance(field, str):
            previous = patch(previous, item["m"])
            event[field] = previous
        out.append(event)
    return out
