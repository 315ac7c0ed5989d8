"""RPC records (pi-rpc.md §3-§4): parsing commands, building responses, writing lines.

Pure: a record (text) in, a :class:`Request` or a ready error response out; responses are
plain JSON values in pi's key order (``id, type, command, success, data|error``) and
:func:`dump_line` writes any JSON value as one compact line with non-ASCII characters raw.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
import orjson

from pitrio.messages.codec import to_json
from pitrio.transports.rpc.framing import Oversize, Record

MISSING: Any = object()
"""Marks an absent ``id`` (any JSON value, ``null`` included, is a present id)."""

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects a command may have. No command of pi's needs more
than a few levels; without a limit a value nested ~1,000 deep parses but cannot be written back
(orjson stops at 255 levels, the stdlib encoder meets Python's recursion limit: issue 21)."""


@attrs.frozen
class Request:
    """One command record: its ``id`` (or :data:`MISSING`), ``type`` and the whole object."""

    id: Any
    type: str
    fields: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        """A field of the command, or ``default``."""
        return self.fields.get(name, default)


def parse_error_text(record: str, error: Exception) -> str:
    """The text after ``Failed to parse command: `` for a record that is not JSON."""
    if not record.strip():
        return "Unexpected end of JSON input"  # pi's text for an empty record
    return str(error)


_NESTING = (dict, list)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests arrays and objects more than ``limit`` levels (no recursion:
    the value may be as deep as the parser allows)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, _NESTING))
    return False


def _loads(record: str) -> Any:
    """The JSON value of ``record``. orjson refuses a lone surrogate escape (``"\\ud800"``,
    which JavaScript's ``JSON.stringify`` writes for a broken pair) and a number too large for
    a double (``1e400``), where pi accepts both (JavaScript reads ``Infinity``): such a record
    is read by the standard library's parser instead, surrogates kept, ``inf`` for the number
    (written back as ``null``, as ``JSON.stringify`` writes ``Infinity``)."""
    try:
        return orjson.loads(record)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc) and "infinity" not in str(exc):
            raise
        try:
            return json.loads(record)
        except RecursionError:
            raise exc from None
        except ValueError:
            raise exc from None


def _parse_failure(error: str, command: str = "parse", request_id: Any = MISSING) -> dict[str, Any]:
    response: dict[str, Any] = {} if request_id is MISSING else {"id": request_id}
    response.update(type="response", command=command, success=False)
    response["error"] = f"Failed to parse command: {error}"
    return response


def parse_record(record: Record) -> Request | dict[str, Any]:
    """Parse one record: a :class:`Request`, or the error response to write for it."""
    if isinstance(record, Oversize):
        return _parse_failure(
            f"record of {record.size} bytes exceeds the limit of {record.limit} bytes"
        )
    try:
        value = _loads(record)
    except orjson.JSONDecodeError as exc:
        return _parse_failure(parse_error_text(record, exc))
    # Nesting past MAX_DEPTH takes more brackets than that in the text: counting them (in C)
    # spares the usual command the walk.
    if record.count("{") + record.count("[") > MAX_DEPTH and too_deep(value):
        # Answered with the id and type where they are shallow enough to write back.
        request_id, command = MISSING, "parse"
        if isinstance(value, dict):
            if "id" in value and not too_deep(value["id"], MAX_DEPTH - 1):
                request_id = value["id"]
            if isinstance(value.get("type"), str):
                command = value["type"]
        return _parse_failure(f"nested deeper than {MAX_DEPTH} levels", command, request_id)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        kind = value.get("type") if isinstance(value, dict) else None
        response: dict[str, Any] = {"type": "response"}
        if isinstance(value, dict) and "id" in value:
            response = {"id": value["id"], **response}
        if kind is not None:
            response["command"] = kind
        response["success"] = False
        response["error"] = f"Unknown command: {js_string(kind)}"
        return response
    return Request(id=value.get("id", MISSING), type=value["type"], fields=value)


def js_string(value: Any) -> str:
    """How JavaScript's template strings print a value (``undefined`` for absent; objects
    and arrays approximated by their JSON)."""
    if value is None:
        return "undefined"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _head(request: Request) -> dict[str, Any]:
    head: dict[str, Any] = {}
    if request.id is not MISSING:
        head["id"] = request.id
    head["type"] = "response"
    head["command"] = request.type
    return head


@attrs.frozen
class EncodedData:
    """A response's ``data`` already encoded: the pieces of one JSON value, in order.

    A resumed 20,000-turn session answers ``get_messages`` with a 17 MB line. Built as one
    value it went through a plain dict for every message and two more whole copies of the line
    (issue 7: peak memory of a resumed session); in pieces it is encoded a batch of messages at
    a time and written piece by piece (:func:`response_pieces`). ``pieces`` may be a
    :class:`StreamedPieces`: then each piece is made only when the writer is ready for it, so
    the line is never held whole (issue 38: peak memory of a resumed session).
    """

    pieces: tuple[bytes, ...] | StreamedPieces


class StreamedPieces:
    """Pieces of a line made one at a time as they are iterated, once: a long reply written
    as it is encoded (the RPC writer checkpoints between pieces, so other tasks go on)."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: Iterable[bytes]) -> None:
        self._pieces: Iterator[bytes] = iter(pieces)

    def __iter__(self) -> Iterator[bytes]:
        return self._pieces


OutputLine = bytes | tuple[bytes, ...] | StreamedPieces
"""One line to write: its bytes, or its pieces to write one after the other (made as they are
written when streamed)."""

ARRAY_BATCH = 256
"""Items of an array encoded together by :func:`array_pieces`."""


def array_pieces(
    values: Sequence[Any],
    batch: int = ARRAY_BATCH,
    encode: Callable[[Any], Any] | None = to_json,
) -> Iterator[bytes]:
    """The JSON array of ``values`` (attrs objects allowed), ``batch`` items a piece;
    ``encode=None`` for values that are plain JSON already, or ``bytes`` of a value's JSON
    text (written as they are)."""
    yield b"["
    for start in range(0, len(values), batch):
        if start:
            yield b","
        chunk = values[start : start + batch]
        if encode is None:
            yield _plain_items(chunk)
        else:
            yield dump_line([encode(value) for value in chunk])[1:-2]  # no brackets, newline
    yield b"]"


def _plain_items(values: Sequence[Any]) -> bytes:
    """The items of a JSON array of plain values (``bytes`` are JSON text), comma-separated,
    without the brackets. Stored messages (all ``bytes``) are joined as they are: what orjson
    writes for a list of fragments, without wrapping each (issue 38: ``get_messages``)."""
    try:
        # Only bytes among plain JSON values are bytes-like: any other value refuses the join.
        return b",".join(values)
    except TypeError:
        return _dump_plain(values)[1:-2]


def _dump_plain(values: Sequence[Any]) -> bytes:
    """:func:`dump_line` of a list of plain JSON values, where ``bytes`` are JSON text."""
    try:
        fragments = [orjson.Fragment(v) if type(v) is bytes else v for v in values]
        return orjson.dumps(fragments, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # a lone surrogate: the slow path, every text parsed (JSON's parser
        # keeps the surrogate; orjson's refuses it)
        return dump_line([json.loads(v) if type(v) is bytes else v for v in values])


def success(request: Request, data: Any = MISSING) -> dict[str, Any]:
    """A success response; ``data`` (attrs objects allowed, or :class:`EncodedData`) is
    omitted when not given."""
    response = _head(request)
    response["success"] = True
    if data is not MISSING:
        response["data"] = data if isinstance(data, EncodedData) else to_json(data)
    return response


def failure(request: Request, error: str) -> dict[str, Any]:
    """A failure response carrying ``error``."""
    response = _head(request)
    response["success"] = False
    response["error"] = error
    return response


def dump_line(value: Any) -> bytes:
    """One output line: compact JSON, non-ASCII raw, LF-terminated.

    Lone surrogates (which orjson refuses) are written as ``\\udXXX`` escapes, as JavaScript
    does. A response whose ``data`` is :class:`EncodedData` is joined into one line.
    """
    pieces = response_pieces(value)
    if pieces is not None:
        return b"".join(pieces)
    try:
        return orjson.dumps(value, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", errors="backslashreplace") + b"\n"


def dump_output(value: Any) -> OutputLine:
    """:func:`dump_line`, leaving a response with :class:`EncodedData` in its pieces."""
    pieces = response_pieces(value)
    return dump_line(value) if pieces is None else pieces


def response_pieces(value: Any) -> tuple[bytes, ...] | StreamedPieces | None:
    """The pieces of a response line whose ``data`` is :class:`EncodedData` (else ``None``).

    ``data`` is a response's last key, so the line is the rest of the response, then the
    encoded pieces, then the closing brace. Streamed data gives streamed pieces.
    """
    data = value.get("data") if isinstance(value, dict) else None
    if not isinstance(data, EncodedData):
        return None
    head = dump_line({key: item for key, item in value.items() if key != "data"})
    head = head[:-2] + b',"data":'
    if isinstance(data.pieces, StreamedPieces):
        return StreamedPieces(itertools.chain((head,), data.pieces, (b"}\n",)))
    return (head, *data.pieces, b"}\n")
