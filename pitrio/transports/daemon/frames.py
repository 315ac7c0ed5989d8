"""Websocket frames: session events with their ``seq``, and plain JSON objects.

An event frame is the RPC line of the event (``pitrio.transports.rpc.events``) without its
newline and with ``"seq":n`` added as the last key. Websocket clients get the ``delta`` form of
``message_update`` unless they ask for ``full`` (``set_event_format``). The replay buffer keeps
the ``delta`` frames; for every other event both forms are the same bytes.
"""

from __future__ import annotations

from typing import Any

from pitrio.messages.events import AgentSessionEvent
from pitrio.transports.rpc.events import UpdateFormat, encode_event
from pitrio.transports.rpc.protocol import dump_line


def with_seq(line: bytes, seq: int) -> bytes:
    """``{...}\\n`` → ``{...,"seq":n}``."""
    body = line.rstrip(b"\n")
    return body[:-1] + b',"seq":' + str(seq).encode("ascii") + b"}"


def event_frame(seq: int, event: AgentSessionEvent, updates: UpdateFormat = "delta") -> bytes:
    """The frame of one session event."""
    return with_seq(encode_event(event, updates), seq)


def delta_frame(seq: int, event: AgentSessionEvent) -> bytes:
    """The replay buffer's encoder (a ``HostConfig.encode_frame``)."""
    return event_frame(seq, event, "delta")


def json_frame(value: Any) -> bytes:
    """Any JSON value as one frame (compact, non-ASCII raw)."""
    return dump_line(value).rstrip(b"\n")
