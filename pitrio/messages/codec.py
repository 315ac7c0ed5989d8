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
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar, get_args, get_origin, overload

import attrs
import cattrs
import orjson
from cattrs.gen import make_dict_structure_fn, override
from cattrs.preconf.orjson import make_converter
from cattrs.v import format_exception

from pitrio.errors import DecodeError

T = TypeVar("T")

_TAG = "pitrio_tag"
_EXTRA = "pitrio_extra"
_OPAQUE = "pitrio_opaque"
_MEMBER = "pitrio_union_member"  # set on a validation error: the union member that failed
_JS_SAFE_INT = 2**53


def tag(value: str) -> Any:
    """Declare the discriminator field of a wire class (``type`` or ``role``) with ``value``."""
    return attrs.field(default=value, init=False, metadata={_TAG: True})


def extra_field() -> Any:
    """Declare the field that keeps unknown JSON keys of a wire class, verbatim."""
    return attrs.field(default=None, metadata={_EXTRA: True}, eq=False, repr=False)


def opaque_field() -> Any:
    """Declare the field that holds a wrapper class's whole JSON object (see the module doc)."""
    return attrs.field(metadata={_OPAQUE: True}, eq=False, repr=False)


def _opaque_name(cls: type) -> str | None:
    for field in attrs.fields(cls):
        if field.metadata.get(_OPAQUE):
            return str(field.name)
    return None


class Extra(dict[str, Any]):
    """The unknown keys of a decoded object, which remembers the order of all its keys, so
    the object is written back with its keys where they were (``order``)."""

    __slots__ = ("order",)

    def __init__(self, values: dict[str, Any], order: tuple[str, ...]) -> None:
        super().__init__(values)
        self.order = order


def _in_order(out: dict[str, Any], extra: Extra) -> dict[str, Any]:
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
        if field.metadata.get(_TAG):
            return camel(field.name), field.default
    return None


converter = make_converter()


def _unstructure_float(value: float) -> float | int:
    # A float field may hold an int (the defaults of Cost and ModelCost are ``0``), and
    # ``int.is_integer`` only exists from Python 3.12.
    if isinstance(value, float) and value.is_integer() and -_JS_SAFE_INT < value < _JS_SAFE_INT:
        return int(value)
    return value


converter.register_unstructure_hook(float, _unstructure_float)


def _json_type(value: Any) -> str:
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


def _show(value: Any) -> str:
    """A decoded value for an error message: scalars as JSON text, containers by kind."""
    if value is None or isinstance(value, bool | int | float | str):
        text = dumps(value).decode()
        return text if len(text) <= 40 else text[:37] + "..."
    return f"an {_json_type(value)}" if isinstance(value, list | tuple) else "an object"


def _structure_str(value: Any, _type: Any) -> str:
    if isinstance(value, str):
        return value
    raise DecodeError(f"expected a string, got {_show(value)}")


def _structure_int(value: Any, _type: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DecodeError(f"expected an integer, got {_show(value)}")


_ZERO = 0.0


def _structure_float(value: Any, _type: Any) -> float:
    if value.__class__ is int and value == 0:
        # Zero is most of a long session's costs and cache counts: one shared object, not
        # 24 bytes each (issue 7: memory of a resumed session).
        return _ZERO
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise DecodeError(f"expected a number, got {_show(value)}")


def _structure_bool(value: Any, _type: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise DecodeError(f"expected a boolean, got {_show(value)}")


converter.register_structure_hook(str, _structure_str)
converter.register_structure_hook(int, _structure_int)
converter.register_structure_hook(float, _structure_float)
converter.register_structure_hook(bool, _structure_bool)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is typing.Literal


def _make_literal_structure(tp: Any) -> Callable[[Any, Any], Any]:
    allowed = get_args(tp)
    shown = ", ".join(repr(a) for a in allowed)

    def structure(value: Any, _type: Any) -> Any:
        for candidate in allowed:
            if value == candidate and type(value) is type(candidate):
                return candidate
        raise DecodeError(f"expected one of {shown}, got {_show(value)}")

    return structure


converter.register_structure_hook_factory(_is_literal, _make_literal_structure)


def _is_homogeneous_sequence(tp: Any) -> bool:
    args = get_args(tp)
    origin = get_origin(tp)
    if origin is tuple:
        return len(args) == 2 and args[1] is Ellipsis
    return origin in (list, collections.abc.Sequence) and len(args) == 1


def _make_sequence_structure(tp: Any) -> Callable[[Any, Any], Any]:
    # cattrs would iterate any iterable (a string decodes as a tuple of characters); a JSON
    # array is required here. Errors keep cattrs' per-index notes so paths read ``$.x[2]``.
    elem = get_args(tp)[0]
    # A ``Sequence`` field holds an immutable sequence: decoded, a tuple.
    make = list if get_origin(tp) is list else tuple
    hooks: list[Callable[[Any, Any], Any]] = []

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, list | tuple):
            raise DecodeError(f"expected an array, got {_json_type(value)}")
        if not hooks:
            hooks.append(converter.get_structure_hook(elem))
        hook = hooks[0]
        out: list[Any] = []
        errors: list[Exception] = []
        for index, item in enumerate(value):
            try:
                out.append(hook(item, elem))
            except Exception as exc:
                exc.__notes__ = [
                    *getattr(exc, "__notes__", []),
                    cattrs.errors.IterableValidationNote(
                        f"Structuring {_type_name(tp)} @ index {index}", index, elem
                    ),
                ]
                errors.append(exc)
        if errors:
            raise cattrs.IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return make(out)

    return structure


converter.register_structure_hook_factory(_is_homogeneous_sequence, _make_sequence_structure)


def _is_wire_class(cls: Any) -> bool:
    return isinstance(cls, type) and attrs.has(cls)


def _unstructure_value(value: Any) -> Any:
    """Unstructure by the value's runtime class: unions and ``Any`` fields need no type."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:
        return value
    if cls is float:
        return _unstructure_float(value)
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
    opaque = _opaque_name(cls)
    if opaque is not None:
        namespace_: dict[str, Any] = {}
        exec(f"def unstructure(obj):\n    return obj.{opaque}", namespace_)
        plain_hook: Callable[[Any], dict[str, Any]] = namespace_["unstructure"]
        _WIRE_HOOKS[cls] = plain_hook
        return plain_hook
    lines = ["def unstructure(obj):", "    out = {}"]
    extra_name: str | None = None
    for field in attrs.fields(cls):
        if field.metadata.get(_EXTRA):
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
    namespace: dict[str, Any] = {"hook": _unstructure_value, "Extra": Extra, "in_order": _in_order}
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


def _make_opaque_structure(cls: type, opaque: str) -> Callable[[Any, Any], Any]:
    attrs.resolve_types(cls)
    fields = [
        (field.name, camel(field.name), field.type, field.default is attrs.NOTHING)
        for field in attrs.fields(cls)
        if field.name != opaque
    ]
    name = cls.__name__

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, dict):
            raise DecodeError(f"{name}: expected a JSON object, got {_json_type(value)}")
        kwargs: dict[str, Any] = {opaque: value}
        for attribute, key, tp, required in fields:
            if key in value:
                kwargs[attribute] = converter.structure(value[key], tp)
            elif required:
                raise DecodeError(f"{name}: required field {key!r} missing")
        return cls(**kwargs)

    return structure


def _make_structure(cls: type) -> Callable[[Any, Any], Any]:
    opaque = _opaque_name(cls)
    if opaque is not None:
        return _make_opaque_structure(cls, opaque)
    overrides: dict[str, Any] = {}
    known: set[str] = set()
    extra_name: str | None = None
    tag_key: str | None = None
    tag_value: str | None = None
    for field in attrs.fields(cls):
        if field.metadata.get(_EXTRA):
            extra_name = field.name
            overrides[field.name] = override(omit=True)
            continue
        key = camel(field.name)
        known.add(key)
        overrides[field.name] = override(rename=key)
        if field.metadata.get(_TAG):
            tag_key, tag_value = key, field.default
    base: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, converter, **overrides)
    name = cls.__name__

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, dict):
            raise DecodeError(f"{name}: expected a JSON object, got {_json_type(value)}")
        if tag_key is not None and value.get(tag_key) != tag_value:
            raise DecodeError(
                f"{name}: field {tag_key!r} must be {tag_value!r}, got {value.get(tag_key)!r}"
            )
        unknown = [key for key in value if key not in known]
        if unknown and extra_name is None:
            raise DecodeError(f"{name}: unknown field {unknown[0]!r}")
        obj = base(value, cls)
        if unknown and extra_name is not None:
            # Frozen classes: set the collected extras the way attrs itself does.
            extra = Extra({key: value[key] for key in unknown}, tuple(value))
            object.__setattr__(obj, extra_name, extra)
        return obj

    return structure


converter.register_unstructure_hook_factory(_is_wire_class, _make_unstructure)
converter.register_structure_hook_factory(_is_wire_class, _make_structure)


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (typing.Union, types.UnionType)


def _make_union_structure(union: Any) -> Callable[[Any, Any], Any]:
    members = get_args(union)
    allows_none = type(None) in members
    allows_str = str in members
    allows_int = int in members
    allows_bool = bool in members
    allows_float = float in members
    literals = [v for m in members if _is_literal(m) for v in get_args(m)]
    sequence_types = [m for m in members if get_origin(m) in (tuple, list)]
    tagged: dict[tuple[str, str], type] = {}
    other_objects: list[Any] = []
    for member in members:
        if _is_wire_class(member):
            found = tag_of(member)
            if found is not None:
                # A subclass sharing its base's tag (events.EntryRecorded) is never what
                # decoding gives: the JSON cannot tell them apart, the base stands for both.
                if found not in tagged or issubclass(tagged[found], member):
                    tagged[found] = member
            else:
                other_objects.append(member)
        elif get_origin(member) is dict or member is dict:
            other_objects.append(member)
    tag_keys = sorted({key for key, _ in tagged})
    names = " | ".join(_type_name(m) for m in members)

    def structure(value: Any, _type: Any) -> Any:
        for candidate in literals:
            if value == candidate and type(value) is type(candidate):
                return candidate
        if value is None:
            if allows_none:
                return None
        elif isinstance(value, str):
            if allows_str:
                return value
        elif isinstance(value, bool):
            if allows_bool:
                return value
        elif isinstance(value, int):
            if allows_int:
                return value
            if allows_float:
                return float(value)
        elif isinstance(value, float):
            if allows_float:
                return value
            if allows_int and value.is_integer():
                return int(value)
        elif isinstance(value, list):
            if sequence_types:
                return converter.structure(value, sequence_types[0])
        elif isinstance(value, dict):
            for key in tag_keys:
                member = tagged.get((key, value.get(key)))  # type: ignore[arg-type]
                if member is not None:
                    try:
                        return converter.structure(value, member)
                    except cattrs.BaseValidationError as exc:
                        # Let it propagate so an enclosing class extends the JSON path
                        # (``$.message.content``); at the top, from_json names the member
                        # the tag selected rather than the whole union.
                        setattr(exc, _MEMBER, member)
                        raise
            if other_objects:
                return converter.structure(value, other_objects[0])
            found = [f"{key}={value.get(key)!r}" for key in tag_keys]
            raise DecodeError(f"{names}: no member matches {', '.join(found)}")
        raise DecodeError(f"{names}: unexpected JSON {_json_type(value)} {_show(value)}")

    return structure


converter.register_structure_hook_factory(_is_union, _make_union_structure)


def _type_name(tp: Any) -> str:
    if _is_union(tp):
        return " | ".join(_type_name(m) for m in get_args(tp))
    if _is_literal(tp):
        return " | ".join(repr(a) for a in get_args(tp))
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


_PATH_SEGMENT = re.compile(r"\.([a-z][a-z0-9]*(?:_[a-z0-9]+)+)")


def _format_leaf(exc: BaseException, tp: Any) -> str:
    if isinstance(exc, DecodeError):
        return str(exc)
    return format_exception(exc, tp)


def _describe(exc: BaseException, cls: Any) -> str:
    """One line naming the type, each bad field by its JSON path, and what was wrong."""
    if isinstance(exc, cattrs.BaseValidationError):
        problems = [
            _PATH_SEGMENT.sub(lambda m: "." + camel(m.group(1)), line)
            for line in cattrs.transform_error(exc, path="$", format_exception=_format_leaf)
        ]
        return f"{_type_name(getattr(exc, _MEMBER, cls))}: " + "; ".join(problems)
    return f"{_type_name(cls)}: {exc}"


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
        raise DecodeError(_describe(exc, cls)) from exc


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
        raise DecodeError(f"{_type_name(cls)}: malformed JSON: {exc}") from exc
    return from_json(value, cls)
