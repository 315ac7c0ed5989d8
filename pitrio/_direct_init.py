"""Constructors of frozen slotted attrs classes that set each slot through its descriptor.

A frozen attrs class's ``__init__`` sets every field with ``object.__setattr__`` bound to the
instance (frozen classes forbid plain assignment): ~0.6 µs for a four-field event. Setting
the slots through their member descriptors gives the same instance in about half that. A
streamed delta builds three such objects (its ``TextDelta``, the ``MessageUpdate`` and the
``Sequenced`` around it), so a 20,000-delta reply spends ~20 ms less (issue 38).

Only for classes whose ``__init__`` does nothing else: no validators, converters, default
factories, aliased names (``_x`` taken as ``x``), ``__attrs_pre_init__`` /
``__attrs_post_init__``, and no slot besides the fields' (a cached hash would have one).
:func:`direct_init` refuses any other class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import attrs

T = TypeVar("T")


def direct_init(cls: type[T]) -> Callable[..., T]:
    """A function taking the arguments of ``cls``'s ``__init__`` (keywords for a
    ``kw_only`` class) and returning the instance that ``__init__`` would make."""
    fields = attrs.fields(cls)  # type: ignore[arg-type]
    # Every slot of the instance: a subclass's own and its bases' (a class in the chain
    # without ``__slots__`` gives the instance a ``__dict__``, which is refused).
    slots: set[str] = set()
    for klass in cls.__mro__[:-1]:  # ``object`` has none
        own = vars(klass).get("__slots__", ("__dict__",))
        slots.update((own,) if isinstance(own, str) else own)
    slots -= {"__weakref__"}
    plain = (
        attrs.has(cls)
        and slots == {field.name for field in fields}
        and not hasattr(cls, "__attrs_pre_init__")
        and not hasattr(cls, "__attrs_post_init__")
        and len({field.kw_only for field in fields if field.init}) <= 1
        and all(
            field.validator is None
            and field.converter is None
            and field.alias == field.name  # ``_x`` is ``x`` in attrs' __init__
            and not isinstance(field.default, attrs.Factory)  # type: ignore[arg-type]
            and (field.init or field.default is not attrs.NOTHING)
            for field in fields
        )
    )
    if not plain:
        raise TypeError(f"{cls.__name__} does more in __init__ than setting its fields")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params: list[str] = []
    body = ["    instance = _new(_cls)"]
    for number, field in enumerate(fields):
        namespace[f"_set{number}"] = getattr(cls, field.name).__set__
        value = field.name
        if field.default is not attrs.NOTHING:
            namespace[f"_default{number}"] = field.default
            value = f"_default{number}" if not field.init else field.name
        if field.init:
            default = "" if field.default is attrs.NOTHING else f"=_default{number}"
            params.append(f"{field.name}{default}")
        body.append(f"    _set{number}(instance, {value})")
    keywords = "*, " if any(field.kw_only for field in fields if field.init) else ""
    source = f"def init({keywords}{', '.join(params)}):\n" + "\n".join(body)
    source += "\n    return instance\n"
    exec(compile(source, f"<direct init of {cls.__qualname__}>", "exec"), namespace)
    init: Callable[..., T] = namespace["init"]
    init.__doc__ = f"A {cls.__name__}, as its ``__init__`` makes it (see :mod:`{__name__}`)."
    return init


__all__ = ["direct_init"]
