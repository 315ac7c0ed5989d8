"""JSON-RPC 2.0 as ACP frames it: one JSON object per line, no I/O here (sans-IO).

:class:`LineFramer` cuts the byte stream into lines (bounded: an over-long line is reported
once and skipped, never buffered whole); :func:`decode` turns one line into a typed incoming
message or the error the client must be told; :class:`Outbox` numbers the agent's own requests
and matches the client's responses to them; the ``encode_*`` functions write lines.

Ids: a request id may be a string, a number (integers and, as JSON-RPC allows, fractions) or
``null``; the response carries the same value back. An id of any other JSON type (``true``,
an object, an array) makes the message an invalid request, answered with ``id: null``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import orjson

from pitrio.errors import PitrioError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002
"""ACP's own code for an unknown session."""

MAX_LINE = 32 * 1024 * 1024
"""The longest line read (a prompt with images is large; beyond this the line is skipped)."""

RequestId = str | int | float | None


class RpcError(PitrioError):
    """An error to answer a request with: a JSON-RPC ``code``, a message, optional data."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def to_json(self) -> dict[str, Any]:
        """The ``error`` member of a response."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            body["data"] = self.data
        return body


def invalid_params(message: str) -> RpcError:
    """A ``-32602`` error."""
    return RpcError(INVALID_PARAMS, f"Invalid params: {message}")


@attrs.frozen(slots=True)
class Request:
    """A call that wants an answer."""

    id: RequestId
    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Notification:
    """A call without an id: never answered, not even with an error."""

    method: str
    params: Any = None


@attrs.frozen(slots=True)
class Response:
    """The client's answer to one of the agent's requests: ``result`` or ``error``."""

    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


@attrs.frozen(slots=True)
class Invalid:
    """A line that is no acceptable message: answer ``error`` with ``id``."""

    id: RequestId
    error: RpcError


Incoming = Request | Notification | Response | Invalid


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


def decode(line: bytes) -> Incoming:
    """One line as a message (the line has no newline)."""
    try:
        message = orjson.loads(line)
    except orjson.JSONDecodeError:
        return Invalid(None, RpcError(PARSE_ERROR, "Parse error"))
    if not isinstance(message, dict):
        # Batches (arrays) are JSON-RPC's, not ACP's: refused as one invalid request.
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: not an object"))
    has_id = "id" in message
    raw_id = message.get("id")
    if has_id and not _valid_id(raw_id):
        return Invalid(None, RpcError(INVALID_REQUEST, "Invalid Request: bad id"))
    if message.get("jsonrpc") != "2.0":
        return Invalid(raw_id, RpcError(INVALID_REQUEST, 'Invalid Request: jsonrpc must be "2.0"'))
    method = message.get("method")
    if method is None and has_id and ("result" in message or "error" in message):
        error = message.get("error")
        return Response(raw_id, message.get("result"), error if isinstance(error, dict) else None)
    if not isinstance(method, str):
        return Invalid(raw_id, RpcError(INVALID_REQUEST, "Invalid Request: method missing"))
    params = message.get("params")
    if "params" in message and not isinstance(params, dict | list):
        failure = RpcError(INVALID_REQUEST, "Invalid Request: params must be structured")
        return Invalid(raw_id, failure) if has_id else Notification(method, None)
    if has_id:
        return Request(raw_id, method, params)
    return Notification(method, params)


def _dump(message: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError:  # a lone surrogate, which orjson refuses: escaped instead
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def encode_result(request_id: RequestId, result: Any) -> bytes:
    """A success response line."""
    return _dump({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId, error: RpcError) -> bytes:
    """An error response line."""
    return _dump({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})


def encode_notification(method: str, params: Any) -> bytes:
    """A notification line."""
    return _dump({"jsonrpc": "2.0", "method": method, "params": params})


class LineFramer:
    """Newline-delimited framing of a byte stream, with a bound on a line's length."""

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buffer = bytearray()
        self._max = max_line
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes | None]:
        """The complete lines ``data`` finishes; ``None`` stands for a line too long (it is
        dropped, reported once)."""
        out: list[bytes | None] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            piece = data[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
                continue
            line = bytes(self._buffer) + piece
            self._buffer.clear()
            if len(line) > self._max:
                out.append(None)
            elif line.strip():
                out.append(line.rstrip(b"\r"))
        rest = data[start:]
        if not self._skipping:
            self._buffer += rest
            if len(self._buffer) > self._max:
                self._buffer.clear()
                self._skipping = True
                out.append(None)
        return out

    def end(self) -> bytes | None:
        """At the end of the stream: a last line without its newline, if any."""
        line, self._skipping = bytes(self._buffer), False
        self._buffer.clear()
        return line if line.strip() else None


class Outbox:
    """The agent's own requests to the client: ids it chose, matched with responses."""

    def __init__(self) -> None:
        self._next = 0
        self._pending: dict[int, str] = {}

    def request(self, method: str, params: Any) -> tuple[int, bytes]:
        """A new request's id and its line."""
        self._next += 1
        self._pending[self._next] = method
        line = _dump({"jsonrpc": "2.0", "id": self._next, "method": method, "params": params})
        return self._next, line

    def answered(self, response: Response) -> int | None:
        """The id of the pending request ``response`` answers (no longer pending), or
        ``None``: a response to nothing the agent asked (ignored)."""
        key = response.id
        if isinstance(key, int) and not isinstance(key, bool) and key in self._pending:
            del self._pending[key]
            return key
        return None

    def forget(self, request_id: int) -> None:
        """No answer is awaited any more (the asker gave up)."""
        self._pending.pop(request_id, None)

    @property
    def pending(self) -> int:
        """How many requests await an answer."""
        return len(self._pending)
