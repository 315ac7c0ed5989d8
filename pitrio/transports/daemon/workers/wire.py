"""The byte formats between the acceptor and its workers (pure: no I/O).

Two Unix sockets join the acceptor to each worker:

* the **hand-off** socket (``SOCK_SEQPACKET``: one message per connection, its descriptor
  attached with ``SCM_RIGHTS``): a JSON line naming what was chosen (with the hand-off's
  ``id``), then the bytes the acceptor read from the client (the request head and anything
  after it); the worker answers each with an acknowledgement ``{"ack": id}`` once it holds
  the descriptor, before it reads a byte of the connection;
* the **control** socket (``SOCK_STREAM``): length-prefixed JSON messages, requests ``{"id",
  "op", ...}`` answered by ``{"re": id, "ok": data}`` or ``{"re": id, "error": text}``, and
  notices ``{"op", ...}`` (no id).
"""

from __future__ import annotations

import struct
from typing import Any

import orjson

from pitrio.errors import PitrioError

LENGTH = struct.Struct(">I")
MAX_CONTROL_MESSAGE = 64 << 20
"""Largest control message (a listing of every session of a worker fits many times)."""
MAX_HANDOFF = 64 * 1024
"""Largest hand-off message: the head (at most 16 KiB) and what came with it."""


class WireError(PitrioError):
    """A message between the acceptor and a worker that breaks the format."""


def encode_control(message: dict[str, Any]) -> bytes:
    """One control message as it goes on the stream."""
    try:
        body = orjson.dumps(message)
    except orjson.JSONEncodeError as exc:  # a lone surrogate a client sent, say
        raise WireError(f"cannot pass this to another worker: {exc}") from exc
    if len(body) > MAX_CONTROL_MESSAGE:
        raise WireError(f"control message of {len(body)} bytes is too large")
    return LENGTH.pack(len(body)) + body


class ControlDecoder:
    """Cuts the control stream into messages as bytes arrive."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The messages completed by ``data``."""
        self._buffer += data
        messages: list[dict[str, Any]] = []
        while len(self._buffer) >= LENGTH.size:
            (size,) = LENGTH.unpack_from(self._buffer)
            if size > MAX_CONTROL_MESSAGE:
                raise WireError(f"control message of {size} bytes announced")
            end = LENGTH.size + size
            if len(self._buffer) < end:
                break
            value = orjson.loads(bytes(self._buffer[LENGTH.size : end]))
            del self._buffer[:end]
            if not isinstance(value, dict):
                raise WireError("a control message must be a JSON object")
            messages.append(value)
        return messages


def encode_handoff(meta: dict[str, Any], data: bytes) -> bytes:
    """A hand-off message: ``meta`` as one JSON line, then the client's bytes."""
    message = orjson.dumps(meta) + b"\n" + data
    if len(message) > MAX_HANDOFF:
        raise WireError(f"hand-off of {len(message)} bytes is too large")
    return message


def decode_handoff(message: bytes) -> tuple[dict[str, Any], bytes]:
    """``meta`` and the client's bytes of a hand-off message."""
    line, sep, data = message.partition(b"\n")
    if not sep:
        raise WireError("hand-off without its meta line")
    meta = orjson.loads(line)
    if not isinstance(meta, dict):
        raise WireError("hand-off meta must be a JSON object")
    return meta, data


def encode_ack(handoff: int) -> bytes:
    """A worker's acknowledgement of hand-off ``handoff`` (it holds the connection now)."""
    return orjson.dumps({"ack": handoff})


def decode_ack(message: bytes) -> int:
    """The hand-off an acknowledgement names."""
    try:
        value = orjson.loads(message)
    except orjson.JSONDecodeError as exc:
        raise WireError(f"malformed acknowledgement: {exc}") from exc
    handoff = value.get("ack") if isinstance(value, dict) else None
    if not isinstance(handoff, int) or isinstance(handoff, bool):
        raise WireError("an acknowledgement names its hand-off by an integer")
    return handoff
