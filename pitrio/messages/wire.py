"""The codec's ground floor: the converter, the field markers (:func:`tag`,
:func:`extra_field`, :func:`opaque_field`), the JSON key rule (:func:`camel`), kept unknown
keys (:class:`Extra`) and the plain JSON text helpers (:func:`dumps`, :func:`loads`,
:func:`compact`).

Split from :mod:`pitrio.messages.codec`, which describes the rules and re-exports these;
:mod:`pitrio.messages.decoding` registers the structure hooks on :data:`converter`, the codec
the unstructure ones.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import orjson
from cattrs.preconf.orjson import make_converter

TAG = "pitrio_tag"
EXTRA = "pitrio_extra"
OPAQUE = "pitrio_opaque"
_JS_SAFE_INT = 2**53


def tag(value: str) -> Any:
    """Declare the discriminator field of a wire class (``type`` or ``role``) with ``value``."""
    return attrs.field(default=value, init=False, metadata={TAG: True})


def extra_field() -> Any:
    """Declare the field that keeps unknown JSON keys of a wire class, verbatim."""
    return attrs.field(default=None, metadata={EXTRA: True}, eq=False, repr=False)


def opaque_field() -> Any:
    """Declare the field that holds a wrapper class's whole JSON object (see the module doc)."""
    return attrs.field(metadata={OPAQUE: True}, eq=False, repr=False)


def opaque_name(cls: type) -> str | None:
    """The name of a wrapper class's :func:`opaque_field`, or ``None`` if it has none."""
    for field in attrs.fields(cls):
        if field.metadata.get(OPAQUE):
            return str(field.name)
    return None


class Extra(dict[str, Any]):
    """The unknown keys of a decoded object, which remembers the order of all its keys, so
    the object is written back with its keys where they were (``order``)."""

    __slots__ = ("order",)

    def __init__(self, values: dict[str, Any], order: tuple[str, ...]) -> None:
        super().__init__(values)
        self.order = order


def in_order(out: dict[str, Any], extra: Extra) -> dict[str, Any]:
    """``out`` (the known fields' JSON) with ``extra``'s keys, in the decoded object's order;
    keys that were not in it (a field set since) follow."""
    result: dict[str, Any] = {}
    for key in extra.order:
        if key in out:
            result[key] = out.pop(key)
        elif key in extra:
            result[key] = extra[key]
    result.update(out)
    for key, value in extra.items():
        result.setdefault(key, value)
    return result


def camel(name: str) -> str:
    """Turn a Python attribute name into pi's JSON key (``tool_call_id`` -> ``toolCallId``)."""
    head, *rest = name.rstrip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def tag_of(cls: type) -> tuple[str, str] | None:
    """Return ``(json key, value)`` of a wire class's tag field, or ``None`` if it has none."""
    for field in attrs.fields(cls):
        if field.metadata.get(TAG):
            return camel(field.name), field.default
    return None


converter = make_converter()


def unstructure_float(value: float) -> float | int:
    """A whole float as an int, as JavaScript writes numbers."""
    # A float field may hold an int (the defaults of Cost and ModelCost are ``0``), and
    # ``int.is_integer`` only exists from Python 3.12.
    if isinstance(value, float) and value.is_integer() and -_JS_SAFE_INT < value < _JS_SAFE_INT:
        return int(value)
    return value


converter.register_unstructure_hook(float, unstructure_float)


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def dumps(value: Any) -> bytes:
    """Compact JSON of a plain value (orjson's). A string holding a lone surrogate, which orjson
    refuses, is written with it escaped (``\\ud800``), as JavaScript's ``JSON.stringify`` does:
    pi takes such strings from its clients and writes them back unchanged (issue 21)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        if "surrogates" not in str(exc):
            raise
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8", errors="backslashreplace")


def compact(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size, for JSON that is kept (a stored entry's line).

    orjson returns its output in the buffer it wrote it into (3.13: at least 4 KB, grown by
    doubling; ``sys.getsizeof`` shows the length, the allocator the buffer), so a held
    200-byte line costs 4 KB and a 3 KB one 8 KB. One copy when it is stored is cheaper than
    the slack kept with it for the session's life.
    """
    return bytes(memoryview(data))


def loads(data: bytes | str) -> Any:
    """orjson's parse; a text orjson refuses for a lone surrogate escape (``"\\ud800"``, which
    :func:`dumps` and JavaScript write) is parsed by the standard library, which keeps it.
    Raises ``orjson.JSONDecodeError`` like orjson for anything else."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "surrogate" not in str(exc):
            raise
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            raise exc from None


def is_wire_class(cls: Any) -> bool:
    """Whether ``cls`` is an attrs class (what the codec's hook factories handle)."""
    return isinstance(cls, type) and attrs.has(cls)
