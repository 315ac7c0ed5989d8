"""Websocket frames: session events with their ``seq``, and plain JSON objects.

An event frame is the RPC line of the event (``pitrio.transports.rpc.events``) without its
newline and with ``"seq":n`` added as the last key. Websocket clients get the ``delta`` form of
``message_update`` unless they ask for ``full`` (``set_event_format``). The replay buffer keeps
the ``delta`` frames; for every other event both forms are the same bytes.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from pitrio.messages.events import AgentSessionEvent, MessageUpdate
from pitrio.messages.stream import TextDelta, ThinkingDelta, ToolCallDelta
from pitrio.transports.rpc.events import UpdateFormat, encode_event
from pitrio.transports.rpc.protocol import dump_line


def with_seq(line: bytes, seq: int) -> bytes:
    """``{...}\\n`` → ``{...,"seq":n}``."""
    body = line.rstrip(b"\n")
    return body[:-1] + b',"seq":' + str(seq).encode("ascii") + b"}"


def event_frame(seq: int, event: AgentSessionEvent, updates: UpdateFormat = "delta") -> bytes:
    """The frame of one session event."""
    return with_seq(encode_event(event, updates), seq)


_DELTA_FRAMES: dict[type, bytes] = {
    cls: b'{"type":"message_update","assistantMessageEvent":{"type":"'
    + attrs.fields(cls).type.default.encode()
    + b'","contentIndex":%d,"delta":%b},"seq":%d}'
    for cls in (TextDelta, ThinkingDelta, ToolCallDelta)
}
"""A streamed delta's frame in the ``delta`` form, around its index, text and ``seq``: the
bytes :func:`event_frame` writes for it (the same keys in the same order, compact)."""


def delta_frame(seq: int, event: AgentSessionEvent) -> bytes:
    """The replay buffer's encoder (a ``HostConfig.encode_frame``).

    A ``message_update`` of a delta (most frames of a run) is written straight into its
    frame: the dict, the line's newline and the cut for ``seq`` cost a few microseconds per
    delta per session (issue 38, the daemon target). Anything else, and a delta orjson
    refuses (a lone surrogate, escaped by the general path), goes through
    :func:`event_frame`."""
    if type(event) is MessageUpdate:
        update = event.assistant_message_event
        template = _DELTA_FRAMES.get(type(update))
        if template is not None and type(update.content_index) is int:
            try:
                delta = orjson.dumps(update.delta)  # type: ignore[union-attr]
            except TypeError:
                pass
            else:
                frame: bytes = template % (update.content_index, delta, seq)
                return frame
    return event_frame(seq, event, "delta")


def json_frame(value: Any) -> bytes:
    """Any JSON value as one frame (compact, non-ASCII raw)."""
    return dump_line(value).rstrip(b"\n")


def problem_of(error: BaseException) -> str:
    """What an error while reading or writing a frame says to the client."""
    if isinstance(error, RecursionError):
        return "the value is nested too deeply"
    return str(error) or type(error).__name__


def safe_json_frame(value: dict[str, Any]) -> bytes:
    """:func:`json_frame` of ``value``; when it cannot be encoded (nested too deeply for the
    encoder, a value JSON cannot hold), the error response saying so in its place, keeping
    the ``id`` and ``command`` that can be written. Never raises: one bad frame must not end
    the connection (issue 21)."""
    try:
        return json_frame(value)
    except (TypeError, ValueError, RecursionError) as exc:
        problem = problem_of(exc)
    kind = value.get("type")
    response: dict[str, Any] = {}
    for key in ("id", "command"):
        if key in value and _encodable(value[key]):
            response[key] = value[key]
    if kind == "response":
        error = f"Failed to encode the response: {problem}"
    else:
        error = f"Failed to encode a {kind if isinstance(kind, str) else 'JSON'} frame: {problem}"
    return json_frame(
        {
            **({"id": response["id"]} if "id" in response else {}),
            "type": "response",
            "command": response.get("command", "encode"),
            "success": False,
            "error": error,
        }
    )


def _encodable(value: Any) -> bool:
    try:
        json_frame(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True
