"""The one JSON codec: attrs classes <-> pi's JSON, through cattrs and orjson.

Rules, applied to every attrs class in :mod:`pitrio.messages` by hook factories:

* Python ``snake_case`` attribute names become pi's ``camelCase`` keys.
* A field whose default is ``None`` is *optional*: it is omitted from the JSON when ``None``
  (pi's ``undefined``). A field without a default is required and a ``None`` value is written
  as ``null`` (e.g. ``parentId`` of a root entry).
* A *tag* field (declared with :func:`tag`) carries the discriminator (``type`` or ``role``),
  is always written, is not an ``__init__`` argument and is checked when decoding.
* A field declared with :func:`extra_field` collects keys the class does not know, so unknown
  fields in pi's files and on the wire survive a rewrite (DESIGN.md §4: a newer pi adds
  fields; none is refused). Every class of :mod:`pitrio.messages` has one; a class without
  one would reject unknown keys with an error naming the key.
* A field declared with :func:`opaque_field` holds the whole JSON object: the class is a
  wrapper around a value this version does not model (a message of an unknown role), its
  other fields are read from that object, and it is written back exactly as it was.
* Unions are decoded by looking at the JSON value: strings, lists, ``null``, and objects
  dispatched on their tag.
* Floats holding whole numbers are written as integers, as JavaScript writes numbers.
* Decoding is strict: scalars are not coerced (``5`` is not a ``str``, ``true`` is not an
  ``int``; only a whole float is accepted as an ``int``), sequences must be JSON arrays and
  ``Literal`` fields must hold one of their values.
* A :class:`DecodeError` names the type decoded (for a union, the member its tag selected) and
  the JSON path of each bad field, e.g. ``MessageEntry: ... @ $.message.content[0].text``.

``encode``/``decode`` speak bytes; ``to_json``/``from_json`` speak plain JSON values.
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable
from typing import Any, TypeVar, overload

import attrs
import cattrs
import orjson

from pitrio.errors import DecodeError
from pitrio.messages.decoding import describe, type_name
from pitrio.messages.wire import (
    EXTRA,
    Extra,
    camel,
    compact,
    converter,
    dumps,
    extra_field,
    in_order,
    is_wire_class,
    loads,
    opaque_field,
    opaque_name,
    tag,
    tag_of,
    unstructure_float,
)

__all__ = [  # the ground floor moved to .wire; imported from here by many modules
    "Extra",
    "camel",
    "compact",
    "converter",
    "decode",
    "dumps",
    "encode",
    "encode_reusing",
    "extra_field",
    "from_json",
    "loads",
    "opaque_field",
    "reuse_encodings",
    "tag",
    "tag_of",
    "to_json",
]

T = TypeVar("T")


def _unstructure_value(value: Any) -> Any:
    """Unstructure by the value's runtime class: unions and ``Any`` fields need no type."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:
        return value
    if cls is float:
        return unstructure_float(value)
    if cls is tuple or cls is list:
        return [_unstructure_value(item) for item in value]
    if cls is dict:
        return {key: _unstructure_value(item) for key, item in value.items()}
    hook = _WIRE_HOOKS.get(cls)
    if hook is not None:
        return hook(value)
    if isinstance(value, collections.abc.Sequence) and not isinstance(value, str | bytes):
        return [_unstructure_value(item) for item in value]  # e.g. a transcript snapshot
    return converter.unstructure(value)


_WIRE_HOOKS: dict[type, Callable[[Any], dict[str, Any]]] = {}
"""Each wire class's unstructure function, once made: nested values skip cattrs' dispatch
(about a tenth of an encoding; issue 7)."""


_PLAIN = (str, int, bool)


def _make_unstructure(cls: type) -> Callable[[Any], dict[str, Any]]:
    # Hand-built rather than cattrs-generated: pi's key order is the field order, including
    # optional fields, and cattrs moves omitted-if-default fields to the end. The function is
    # generated per class, one statement per field (as attrs and cattrs generate theirs): a
    # loop over a field plan cost about twice as much per object (issue 7: every event and
    # entry is encoded).
    opaque = opaque_name(cls)
    if opaque is not None:
        namespace_: dict[str, Any] = {}
        exec(f"def unstructure(obj):\n    return obj.{opaque}", namespace_)
        plain_hook: Callable[[Any], dict[str, Any]] = namespace_["unstructure"]
        _WIRE_HOOKS[cls] = plain_hook
        return plain_hook
    lines = ["def unstructure(obj):", "    out = {}"]
    extra_name: str | None = None
    for field in attrs.fields(cls):
        if field.metadata.get(EXTRA):
            extra_name = field.name
            continue
        plain = field.type in _PLAIN or field.type in ("str", "int", "bool")
        key = repr(camel(field.name))
        value = "value" if plain else "hook(value)"
        lines.append(f"    value = obj.{field.name}")
        if field.default is None:  # omitted when absent
            lines.append(f"    if value is not None: out[{key}] = {value}")
        elif plain:
            lines.append(f"    out[{key}] = value")
        else:
            lines.append(f"    out[{key}] = None if value is None else {value}")
    if extra_name is not None:
        lines += [
            f"    extra = obj.{extra_name}",
            # An Extra orders the keys even when it holds none of its own.
            "    if extra is not None:",
            "        if extra.__class__ is Extra:",
            "            return in_order(out, extra)",
            "        for key, value in extra.items():",
            "            out.setdefault(key, value)",
        ]
    lines.append("    return out")
    namespace: dict[str, Any] = {"hook": _unstructure_value, "Extra": Extra, "in_order": in_order}
    exec(compile("\n".join(lines), f"<unstructure {cls.__qualname__}>", "exec"), namespace)
    unstructure: Callable[[Any], dict[str, Any]] = namespace["unstructure"]
    if cls in _REUSABLE:
        unstructure = _reusing(unstructure)
    _WIRE_HOOKS[cls] = unstructure
    return unstructure


# -- reusing a message's JSON while encoding -----------------------------------------------------
# One message travels in several lines: a turn's answer in ``message_end``, its stored entry,
# ``entry_appended``, ``turn_end`` and ``agent_end``. Inside :func:`encode_reusing` (whose
# result goes straight to orjson, so no caller ever holds the shared value) the JSON value of
# a message met in one of the last few encodings is taken again instead of being rebuilt
# (issue 7). Messages are frozen; the value is keyed by the object itself, kept alive while
# cached so its id cannot be reused.

_REUSABLE: set[type] = set()
_REUSE_LIMIT = 32
_reused: dict[int, tuple[Any, dict[str, Any]]] = {}
_reusing_now = False


def reuse_encodings(*classes: type) -> None:
    """Let :func:`encode_reusing` reuse the JSON of instances of ``classes`` (frozen ones)."""
    _REUSABLE.update(classes)


def _reusing(unstructure: Callable[[Any], dict[str, Any]]) -> Callable[[Any], dict[str, Any]]:
    def reusing(obj: Any) -> dict[str, Any]:
        if not _reusing_now:
            return unstructure(obj)
        known = _reused.get(id(obj))
        if known is not None and known[0] is obj:
            return known[1]
        value = unstructure(obj)
        if len(_reused) >= _REUSE_LIMIT:
            del _reused[next(iter(_reused))]  # the oldest
        _reused[id(obj)] = (obj, value)
        return value

    return reusing


def encode_reusing(obj: Any) -> bytes:
    """:func:`encode`, reusing the JSON of messages encoded lately (see above)."""
    global _reusing_now
    _reusing_now = True
    try:
        value = to_json(obj)
    finally:
        _reusing_now = False
    try:
        return orjson.dumps(value)  # the usual case without the call through dumps (per event)
    except orjson.JSONEncodeError:
        return dumps(value)  # its lone-surrogate fallback, or its error


converter.register_unstructure_hook_factory(is_wire_class, _make_unstructure)


def to_json(obj: Any) -> Any:
    """Return the plain JSON value (dicts, lists, str, numbers) pi would write for ``obj``."""
    hook = _WIRE_HOOKS.get(obj.__class__)
    if hook is not None:
        return hook(obj)
    return converter.unstructure(obj)


@overload
def from_json(value: Any, cls: type[T]) -> T: ...
@overload
def from_json(value: Any, cls: Any) -> Any: ...  # a union such as FileLine: no type[T] for it


def from_json(value: Any, cls: Any) -> Any:
    """Decode a plain JSON value as ``cls``; raises :class:`DecodeError` naming type and field."""
    try:
        return converter.structure(value, cls)
    except DecodeError:
        raise
    except (cattrs.BaseValidationError, ValueError, TypeError, KeyError) as exc:
        raise DecodeError(describe(exc, cls)) from exc


def encode(obj: Any) -> bytes:
    """Serialise ``obj`` to compact JSON bytes, exactly as pi would."""
    return dumps(converter.unstructure(obj))


@overload
def decode(data: bytes | str, cls: type[T]) -> T: ...
@overload
def decode(data: bytes | str, cls: Any) -> Any: ...


def decode(data: bytes | str, cls: Any) -> Any:
    """Parse JSON text and decode it as ``cls``; malformed JSON also raises :class:`DecodeError`."""
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{type_name(cls)}: malformed JSON: {exc}") from exc
    return from_json(value, cls)
