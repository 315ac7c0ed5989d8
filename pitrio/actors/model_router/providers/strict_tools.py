"""Strict tool declarations (pi 1.6.0's constrained sampling of JSON-schema tools), pure.

A tool may ask a provider to constrain the model's arguments to its schema
(:attr:`~pitrio.messages.model.ToolSpec.constrained_sampling`): ``"prefer"`` when the
provider can, ``"require"`` or fail. The four file tools ask for ``"prefer"``. A provider
that supports strict tools then declares such a tool ``strict`` with its schema rewritten to
the subset strict mode accepts:

* every object lists all its properties in ``required`` and gets ``additionalProperties:
  false``;
* an optional property that does not already accept ``null`` becomes
  ``{"anyOf": [<schema>, {"type": "null"}]}`` (the model sends ``null`` for "absent", which
  argument validation drops again);
* a schema strict mode cannot express (``$ref``, ``oneOf``, a union of objects, a node
  without a type, an open ``additionalProperties``, ...) keeps the tool non-strict, or for
  ``"require"`` is an error.

The rewrite keeps the original key order and appends only what is new, so the declaration
reads the same as pi's in a request body.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from pitrio.errors import ProviderError
from pitrio.messages.model import Model, ToolSpec

UnsupportedKeyword = Callable[[str, Any], bool]
"""A provider's extra test: ``(key, value)`` of a schema node its strict mode rejects."""

_UNSUPPORTED_KEYS = (
    "$ref",
    "$defs",
    "definitions",
    "allOf",
    "oneOf",
    "patternProperties",
    "dependentSchemas",
    "dependencies",
    "unevaluatedProperties",
    "propertyNames",
    "contains",
    "prefixItems",
    "not",
    "if",
    "then",
    "else",
)


class UnsupportedStrictSchema(Exception):
    """A schema strict mode cannot express (internal: it turns into "not strict")."""


def _is_node(value: Any) -> bool:
    return isinstance(value, dict)


def _types(schema: Mapping[str, Any]) -> list[Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    return list(kind) if isinstance(kind, list) else []


def _structured(schema: Any) -> bool:
    if not _is_node(schema):
        return False
    kinds = _types(schema)
    return "object" in kinds or "array" in kinds or "properties" in schema or "items" in schema


def _allows_null(schema: Any) -> bool:
    if not _is_node(schema):
        return False
    if "null" in _types(schema):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    enum = schema.get("enum")
    if isinstance(enum, list) and None in enum:
        return True
    variants = schema.get("anyOf")
    return isinstance(variants, list) and any(_allows_null(v) for v in variants)


def _strict_node(schema: Any, unsupported: UnsupportedKeyword | None) -> None:
    """Rewrite ``schema`` (a private copy) in place, or raise :class:`UnsupportedStrictSchema`."""
    if not _is_node(schema):
        raise UnsupportedStrictSchema("boolean schemas are unsupported")
    for key in _UNSUPPORTED_KEYS:
        if schema.get(key) is not None:
            raise UnsupportedStrictSchema(f"{key} schemas are unsupported")
    if unsupported is not None:
        for key, value in schema.items():
            if unsupported(key, value):
                raise UnsupportedStrictSchema(f"{key} is unsupported")
    # A bare enum counts as typed; a bare const does not.
    if all(schema.get(key) is None for key in ("type", "anyOf", "enum")):
        raise UnsupportedStrictSchema("schemas without a type are unsupported")
    variants = schema.get("anyOf")
    if variants is not None:
        if not isinstance(variants, list) or not variants:
            raise UnsupportedStrictSchema("anyOf must contain at least one schema")
        for variant in variants:
            if _structured(variant):
                raise UnsupportedStrictSchema("object and array unions are unsupported")
            _strict_node(variant, unsupported)
    items = schema.get("items")
    if items is not None:
        if isinstance(items, list):
            raise UnsupportedStrictSchema("tuple schemas are unsupported")
        _strict_node(items, unsupported)
    is_object = schema.get("type") == "object"
    if schema.get("properties") is not None and not is_object:
        raise UnsupportedStrictSchema("properties require type object")
    if not is_object:
        return
    extra = schema.get("additionalProperties")
    if extra is not None and extra is not False:
        raise UnsupportedStrictSchema("open additionalProperties are unsupported")
    properties = schema.get("properties")
    if properties is None:
        properties = {}
    elif not _is_node(properties):
        raise UnsupportedStrictSchema("properties must be a schema map")
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(k, str) for k in required)
    ):
        raise UnsupportedStrictSchema("required must be a list of names")
    named = set(required or ())
    if any(name not in properties for name in named):
        raise UnsupportedStrictSchema("required names an unknown property")
    for key in list(properties):
        prop = properties[key]
        _strict_node(prop, unsupported)
        if key not in named and not _allows_null(prop):
            properties[key] = {"anyOf": [prop, {"type": "null"}]}
    schema["required"] = list(properties)
    schema["additionalProperties"] = False


def make_strict_schema(
    schema: Mapping[str, Any], unsupported: UnsupportedKeyword | None = None
) -> dict[str, Any]:
    """``schema`` rewritten for strict mode (a copy), or :class:`UnsupportedStrictSchema`."""
    if not _is_node(schema):
        raise UnsupportedStrictSchema("the root schema must be an object")
    copied = copy.deepcopy(dict(schema))
    _strict_node(copied, unsupported)
    if copied.get("type") != "object":
        raise UnsupportedStrictSchema("the root schema must be an object")
    return copied


def resolve_strict(
    tool: ToolSpec, supported: bool, unsupported: UnsupportedKeyword | None = None
) -> bool | None:
    """Whether ``tool`` goes out strict: ``True``, or ``None`` (no strict sampling).

    ``None`` for a tool that asks for none, or asks ``"prefer"`` where the provider (``supported``)
    or the schema cannot. Raises :class:`~pitrio.errors.ProviderError` for a ``"require"`` tool
    that cannot be strict (the request is not sent).
    """
    mode = tool.constrained_sampling
    if mode is None:
        return None
    if supported:
        try:
            if unsupported is None:
                strict_parameters(tool.parameters)
            else:
                make_strict_schema(tool.parameters, unsupported)
        except UnsupportedStrictSchema as exc:
            if mode != "require":
                return None
            raise ProviderError(
                f'Tool "{tool.name}" requires JSON-schema constrained sampling, but {exc}.'
            ) from None
        return True
    if mode == "require":
        raise ProviderError(
            f'Tool "{tool.name}" requires JSON-schema constrained sampling, but strict tools '
            "are unsupported."
        )
    return None


def tool_parameters(tool: ToolSpec, strict: bool | None) -> dict[str, Any]:
    """The schema to declare: the strict rewrite for a strict tool, else the tool's own."""
    if strict is True:
        return strict_parameters(tool.parameters)
    return tool.parameters


def compat_flag(model: Model, name: str, default: bool = True) -> bool:
    """One of the model's boolean ``compat`` flags, else ``default``."""
    compat = model.compat if isinstance(model.compat, Mapping) else {}
    value = compat.get(name)
    return value if isinstance(value, bool) else default


def supports_strict_mode(model: Model, default: bool) -> bool:
    """The model's ``compat.supportsStrictMode``, else the provider's ``default``."""
    compat = model.compat if isinstance(model.compat, Mapping) else {}
    value = compat.get("supportsStrictMode")
    return value if isinstance(value, bool) else default


def responses_tools(
    tools: tuple[ToolSpec, ...], supported: bool, default: Any = False
) -> list[dict[str, Any]]:
    """The Responses API's ``tools`` (OpenAI, Azure, Codex).

    ``strict`` is sent only where the server takes strict tools (``supported``): ``true`` for a
    strict tool, else ``default`` (``false``; Codex sends ``null``).
    """
    out: list[dict[str, Any]] = []
    for tool in tools:
        strict = resolve_strict(tool, supported)
        declared: dict[str, Any] = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": tool_parameters(tool, strict),
        }
        if supported:
            declared["strict"] = True if strict else default
        out.append(declared)
    return out


_strict_cache: dict[int, tuple[Mapping[str, Any], dict[str, Any]]] = {}
_CACHE_SIZE = 256


def strict_parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`make_strict_schema` of a long-lived schema, computed once per schema object.

    Tool schemas are constants sent with every request; the rewrite is cached by identity
    (the entry holds the schema, so its id stays unique). Callers must not modify the result.
    """
    cached = _strict_cache.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    strict = make_strict_schema(schema)
    if len(_strict_cache) >= _CACHE_SIZE:
        _strict_cache.pop(next(iter(_strict_cache)))
    _strict_cache[id(schema)] = (schema, strict)
    return strict


__all__ = [
    "UnsupportedKeyword",
    "UnsupportedStrictSchema",
    "compat_flag",
    "make_strict_schema",
    "resolve_strict",
    "responses_tools",
    "strict_parameters",
    "supports_strict_mode",
    "tool_parameters",
]
