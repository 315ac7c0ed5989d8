"""A vendor-side encoder of AWS event-stream frames, written from the documented format.

A frame: total length (u32), headers length (u32), CRC32 of those 8 bytes (u32), the headers,
the payload, CRC32 of everything before it (u32); big-endian. A header: name length (u8),
name, value type (u8; 7 = string), value length (u16), value. botocore only decodes, so
the mock vendor encodes its frames itself.
"""

from __future__ import annotations

import binascii
import struct
from typing import Any

import orjson

from tests.actors.providers.loopback import Reply

EVENT_STREAM = "application/vnd.amazon.eventstream"


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name)) + raw_name
        + struct.pack(">BH", 7, len(raw_value)) + raw_value
    )  # fmt: skip


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One encoded frame."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", binascii.crc32(message))


def event(kind: str, payload: dict[str, Any]) -> bytes:
    """An ``event`` frame of ``:event-type`` ``kind`` with a JSON payload."""
    headers = {":message-type": "event", ":event-type": kind, ":content-type": "application/json"}
    return frame(headers, orjson.dumps(payload))


def exception(kind: str, message: str) -> bytes:
    """An ``exception`` frame (``kind`` as the service names it, e.g. ``throttlingException``)."""
    headers = {
        ":message-type": "exception",
        ":exception-type": kind,
        ":content-type": "application/json",
    }
    return frame(headers, orjson.dumps({"message": message}))


def text_stream(*pieces: str, stop: str = "end_turn", usage: dict[str, int] | None = None) -> bytes:
    """A whole answer of text ``pieces`` ending with ``stop`` and a ``metadata`` usage."""
    out = event("messageStart", {"role": "assistant"})
    for piece in pieces:
        out += event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
    out += event("contentBlockStop", {"contentBlockIndex": 0})
    out += event("messageStop", {"stopReason": stop})
    counts = usage or {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    out += event("metadata", {"usage": counts, "metrics": {"latencyMs": 12}})
    return out


def stream_reply(body: bytes, **kwargs: Any) -> Reply:
    """A 200 event-stream reply."""
    return Reply(body=body, headers=[("content-type", EVENT_STREAM)], **kwargs)
