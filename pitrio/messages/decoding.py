"""Decoding: the structure hooks the codec's converter uses, strict about JSON types, and the
one-line error messages that name a type and each bad field's JSON path.

Split from :mod:`pitrio.messages.codec` (whose module doc states the rules); importing this
module registers the hooks on :data:`pitrio.messages.wire.converter`.
"""

from __future__ import annotations

import collections.abc
import re
import types
import typing
from collections.abc import Callable
from typing import Any, get_args, get_origin

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override
from cattrs.v import format_exception

from pitrio.errors import DecodeError
from pitrio.messages.wire import (
    EXTRA,
    TAG,
    Extra,
    camel,
    converter,
    dumps,
    is_wire_class,
    json_type,
    opaque_name,
    tag_of,
)

_MEMBER = "pitrio_union_member"  # set on a validation error: the union member that failed


def _show(value: Any) -> str:
    """A decoded value for an error message: scalars as JSON text, containers by kind."""
    if value is None or isinstance(value, bool | int | float | str):
        text = dumps(value).decode()
        return text if len(text) <= 40 else text[:37] + "..."
    return f"an {json_type(value)}" if isinstance(value, list | tuple) else "an object"


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
            raise DecodeError(f"expected an array, got {json_type(value)}")
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
                        f"Structuring {type_name(tp)} @ index {index}", index, elem
                    ),
                ]
                errors.append(exc)
        if errors:
            raise cattrs.IterableValidationError(f"While structuring {tp!r}", errors, tp)
        return make(out)

    return structure


converter.register_structure_hook_factory(_is_homogeneous_sequence, _make_sequence_structure)


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
            raise DecodeError(f"{name}: expected a JSON object, got {json_type(value)}")
        kwargs: dict[str, Any] = {opaque: value}
        for attribute, key, tp, required in fields:
            if key in value:
                kwargs[attribute] = converter.structure(value[key], tp)
            elif required:
                raise DecodeError(f"{name}: required field {key!r} missing")
        return cls(**kwargs)

    return structure


def _make_structure(cls: type) -> Callable[[Any, Any], Any]:
    opaque = opaque_name(cls)
    if opaque is not None:
        return _make_opaque_structure(cls, opaque)
    overrides: dict[str, Any] = {}
    known: set[str] = set()
    extra_name: str | None = None
    tag_key: str | None = None
    tag_value: str | None = None
    for field in attrs.fields(cls):
        if field.metadata.get(EXTRA):
            extra_name = field.name
            overrides[field.name] = override(omit=True)
            continue
        key = camel(field.name)
        known.add(key)
        overrides[field.name] = override(rename=key)
        if field.metadata.get(TAG):
            tag_key, tag_value = key, field.default
    base: Callable[[Any, Any], Any] = make_dict_structure_fn(cls, converter, **overrides)
    name = cls.__name__

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, dict):
            raise DecodeError(f"{name}: expected a JSON object, got {json_type(value)}")
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


converter.register_structure_hook_factory(is_wire_class, _make_structure)


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
        if is_wire_class(member):
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
    names = " | ".join(type_name(m) for m in members)

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
        raise DecodeError(f"{names}: unexpected JSON {json_type(value)} {_show(value)}")

    return structure


converter.register_structure_hook_factory(_is_union, _make_union_structure)


def type_name(tp: Any) -> str:
    """A type as error messages name it (a union's members joined by ``|``)."""
    if _is_union(tp):
        return " | ".join(type_name(m) for m in get_args(tp))
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


def describe(exc: BaseException, cls: Any) -> str:
    """One line naming the type, each bad field by its JSON path, and what was wrong."""
    if isinstance(exc, cattrs.BaseValidationError):
        problems = [
            _PATH_SEGMENT.sub(lambda m: "." + camel(m.group(1)), line)
            for line in cattrs.transform_error(exc, path="$", format_exception=_format_leaf)
        ]
        return f"{type_name(getattr(exc, _MEMBER, cls))}: " + "; ".join(problems)
    return f"{type_name(cls)}: {exc}"
