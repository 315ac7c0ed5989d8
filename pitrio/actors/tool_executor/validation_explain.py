"""Why arguments fail their schema, in pi-schema's words (pi 1.6.0), pure.

:func:`explain` walks the schema over a value that failed it and reports each failing keyword
at the value it failed on, as ``(path, message)``: the path a list of property names and item
indexes (``[]`` for the arguments themselves), the message pi's (``missing``, ``expected
number, got string``, ``unknown field``, ...). Sub-schemas that pass are not entered, a value
of the wrong type reports only that, a union reports the branch the value was most likely
meant for.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Protocol

from pitrio.actors.tool_executor.jsvalues import js_number_to_string, json_stringify

Error = tuple[list[str], str]
"""One failure: the path to the value (property names and item indexes) and the message."""


class Checks(Protocol):
    """What the walk needs of a compiled schema."""

    def ok(self, node: Any, value: Any) -> bool:
        """Whether ``value`` passes the sub-schema ``node``."""
        ...

    def target(self, node: Mapping[str, Any]) -> Any:
        """The schema ``node``'s ``$ref`` names, or ``None``."""
        ...


_LISTED = 20


def _list_values(values: list[Any]) -> str:
    """The allowed values as JSON, at most 20 of them and then how many more there are."""
    if len(values) <= _LISTED:
        return json_stringify(values)
    listed = json_stringify(values[:_LISTED])
    return f"{listed[:-1]}, ... and {len(values) - _LISTED} more]"


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return "integer" if value.is_integer() else "number"
    return "object"


def _is_type(value: Any, kind: Any) -> bool:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    match kind:
        case "string":
            return isinstance(value, str)
        case "number":
            return number
        case "integer":
            return number and math.isfinite(value) and float(value).is_integer()
        case "boolean":
            return isinstance(value, bool)
        case "null":
            return value is None
        case "array":
            return isinstance(value, list)
        case "object":
            return isinstance(value, dict)
    return False


def _bound(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _num(value: Any) -> str:
    return js_number_to_string(value) if _bound(value) else str(value)


def _equal(a: Any, b: Any) -> bool:
    """JSON equality as the schema keywords mean it (``1 == 1.0``, ``True != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if _bound(a) and _bound(b):
        return bool(a == b)
    return type(a) is type(b) and a == b


class _Walk:
    def __init__(self, checks: Checks) -> None:
        self.checks = checks
        self.depth = 0

    def walk(self, node: Any, value: Any, path: list[str], out: list[Error]) -> None:
        if node is True or node is None:
            return
        if node is False:
            out.append((path, "no value is allowed here"))
            return
        if not isinstance(node, Mapping) or self.checks.ok(node, value):
            return
        if self.depth > 64:  # a recursive schema: the check has already failed
            out.append((path, "invalid"))
            return
        self.depth += 1
        try:
            self._node(node, value, path, out)
        finally:
            self.depth -= 1

    def _node(self, node: Mapping[str, Any], value: Any, path: list[str], out: list[Error]) -> None:
        def push(message: str, at: list[str] = path) -> None:
            out.append((at, message))

        kind = node.get("type")
        if kind is not None:
            kinds = kind if isinstance(kind, list) else [kind]
            if not any(_is_type(value, k) for k in kinds):
                push(f"expected {' or '.join(str(k) for k in kinds)}, got {_type_name(value)}")
                return
        enum = node.get("enum")
        if isinstance(enum, list) and not any(_equal(member, value) for member in enum):
            push(f"expected one of {_list_values(enum)}")
        if "const" in node and not _equal(node["const"], value):
            push(f"expected {json_stringify(node['const'])}")
        if isinstance(value, str):
            self._string(node, value, push)
        if _bound(value):
            self._number(node, value, push)
        if isinstance(value, dict):
            self._object(node, value, path, out, push)
        if isinstance(value, list):
            self._array(node, value, path, out, push)
        for member in node.get("allOf") or ():
            self.walk(member, value, path, out)
        if isinstance(node.get("anyOf"), list):
            self._union(node["anyOf"], value, path, out, exactly_one=False)
        if isinstance(node.get("oneOf"), list):
            self._union(node["oneOf"], value, path, out, exactly_one=True)
        if "not" in node and self.checks.ok(node["not"], value):
            push("must not match the schema in not")
        if "if" in node:
            branch = node.get("then") if self.checks.ok(node["if"], value) else node.get("else")
            if branch is not None:
                self.walk(branch, value, path, out)
        if isinstance(node.get("$ref"), str):
            target = self.checks.target(node)
            if target is None:
                push(f"unresolved reference {node['$ref']}")
            else:
                self.walk(target, value, path, out)

    @staticmethod
    def _string(node: Mapping[str, Any], value: str, push: Any) -> None:
        length = len(value)  # code points, as pi-schema counts them
        if _bound(node.get("minLength")) and length < node["minLength"]:
            push(f"expected at least {_num(node['minLength'])} characters")
        if _bound(node.get("maxLength")) and length > node["maxLength"]:
            push(f"expected at most {_num(node['maxLength'])} characters")
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            try:
                matched = re.search(pattern, value) is not None
            except re.error:
                matched = True
            if not matched:
                push(f"expected to match {pattern}")

    @staticmethod
    def _number(node: Mapping[str, Any], value: float, push: Any) -> None:
        low: Any = node.get("minimum")
        high: Any = node.get("maximum")
        if _bound(low) and value < low:
            push(f"expected >= {_num(low)}")
        if _bound(high) and value > high:
            push(f"expected <= {_num(high)}")
        low, high = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
        if _bound(low) and value <= low:
            push(f"expected > {_num(low)}")
        if _bound(high) and value >= high:
            push(f"expected < {_num(high)}")
        step = node.get("multipleOf")
        if _bound(step) and step and not _multiple(value, step):
            push(f"expected a multiple of {_num(step)}")

    def _object(
        self,
        node: Mapping[str, Any],
        value: dict[str, Any],
        path: list[str],
        out: list[Error],
        push: Any,
    ) -> None:
        properties = node.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        for key in node.get("required") or ():
            if isinstance(key, str) and key not in value:
                push("missing", [*path, key])
        for key, sub in properties.items():
            if key in value:
                self.walk(sub, value[key], [*path, key], out)
        patterns = node.get("patternProperties")
        patterns = patterns if isinstance(patterns, Mapping) else {}
        extra = node.get("additionalProperties")
        names = node.get("propertyNames")
        for key in value:
            matched = key in properties
            for pattern, sub in patterns.items():
                if re.search(pattern, key):
                    matched = True
                    self.walk(sub, value[key], [*path, key], out)
            if not matched and extra is not None:
                if extra is False:
                    push("unknown field", [*path, key])
                else:
                    self.walk(extra, value[key], [*path, key], out)
            if names is not None and not self.checks.ok(names, key):
                push("invalid property name", [*path, key])
        count = len(value)
        if _bound(node.get("minProperties")) and count < node["minProperties"]:
            push(f"expected at least {_num(node['minProperties'])} properties")
        if _bound(node.get("maxProperties")) and count > node["maxProperties"]:
            push(f"expected at most {_num(node['maxProperties'])} properties")
        dependencies = {
            **(node.get("dependentRequired") or {}),
            **(node.get("dependencies") or {}),
        }
        for key, needs in dependencies.items():
            if key not in value:
                continue
            if isinstance(needs, list):
                for name in needs:
                    if name not in value:
                        push(f"required when {key} is present", [*path, name])
            else:
                self.walk(needs, value, path, out)
        for key, sub in (node.get("dependentSchemas") or {}).items():
            if key in value:
                self.walk(sub, value, path, out)

    def _array(
        self,
        node: Mapping[str, Any],
        value: list[Any],
        path: list[str],
        out: list[Error],
        push: Any,
    ) -> None:
        items = node.get("items")
        prefix: list[Any] = []
        if isinstance(items, list):
            prefix, rest = items, node.get("additionalItems")
        else:
            if isinstance(node.get("prefixItems"), list):
                prefix = node["prefixItems"]
            rest = items
        for index, item in enumerate(value):
            sub = prefix[index] if index < len(prefix) else rest
            if sub is not None:
                self.walk(sub, item, [*path, str(index)], out)
        if _bound(node.get("minItems")) and len(value) < node["minItems"]:
            push(f"expected at least {_num(node['minItems'])} items")
        if _bound(node.get("maxItems")) and len(value) > node["maxItems"]:
            push(f"expected at most {_num(node['maxItems'])} items")
        if node.get("uniqueItems") is True and any(
            _equal(value[i], value[j]) for i in range(len(value)) for j in range(i)
        ):
            push("expected unique items")
        if "contains" in node:
            low = node.get("minContains", 1)
            high = node.get("maxContains", math.inf)
            found = sum(1 for item in value if self.checks.ok(node["contains"], item))
            if not low <= found <= high:
                push(_contains_message(low, high))

    def _union(
        self,
        branches: list[Any],
        value: Any,
        path: list[str],
        out: list[Error],
        *,
        exactly_one: bool,
    ) -> None:
        matches = sum(1 for branch in branches if self.checks.ok(branch, value))
        if matches == 1 or (not exactly_one and matches > 0):
            return
        if matches > 1:
            out.append((path, "matches more than one alternative"))
            return
        resolved = [self._resolve(branch) for branch in branches]
        tag = _tag_of(resolved)
        if tag is not None and isinstance(value, dict):
            key, values = tag
            found = next((i for i, v in enumerate(values) if _equal(v, value.get(key))), None)
            if found is None:
                out.append(([*path, key], f"expected one of {_list_values(values)}"))
            else:
                self.walk(branches[found], value, path, out)
            return
        # Blame the branch declaring most of the object's keys, then the one failing deepest.
        best: tuple[int, list[Error]] | None = None
        for branch, node in zip(branches, resolved, strict=True):
            errors: list[Error] = []
            self.walk(branch, value, path, errors)
            if not errors:
                continue
            declared = 0
            if isinstance(value, dict) and isinstance(node, Mapping):
                props = node.get("properties")
                declared = sum(1 for k in value if isinstance(props, Mapping) and k in props)
            if (
                best is None
                or declared > best[0]
                or (declared == best[0] and len(errors[0][0]) > len(best[1][0][0]))
            ):
                best = (declared, errors)
        out.extend(best[1] if best else [(path, "matches no alternative")])

    def _resolve(self, node: Any) -> Any:
        if isinstance(node, Mapping) and isinstance(node.get("$ref"), str):
            return self.checks.target(node)
        return node


def _tag_of(branches: list[Any]) -> tuple[str, list[Any]] | None:
    """A property whose ``const`` tells the branches apart (a tagged union), if any."""
    first = branches[0] if branches else None
    if not isinstance(first, Mapping) or not isinstance(first.get("properties"), Mapping):
        return None
    for key in first["properties"]:
        values = []
        for branch in branches:
            props = branch.get("properties") if isinstance(branch, Mapping) else None
            tag = props.get(key) if isinstance(props, Mapping) else None
            values.append(tag.get("const", _MISSING) if isinstance(tag, Mapping) else _MISSING)
        scalar = all(v is not _MISSING and not isinstance(v, dict | list) for v in values)
        if scalar and len({json_stringify(v) for v in values}) == len(values):
            return key, values
    return None


_MISSING = object()


def _multiple(value: float, step: float) -> bool:
    quotient = value / step
    return math.isfinite(quotient) and abs(quotient - round(quotient)) < 1e-9


def _contains_message(low: float, high: float) -> str:
    if high == math.inf:
        return f"expected at least {_num(low)} matching {'item' if low == 1 else 'items'}"
    if low == 0:
        return f"expected at most {_num(high)} matching {'item' if high == 1 else 'items'}"
    return f"expected between {_num(low)} and {_num(high)} matching items"


def explain(checks: Checks, schema: Any, value: Any) -> list[Error]:
    """The failures of ``value`` (which failed ``schema``), at least one."""
    out: list[Error] = []
    _Walk(checks).walk(schema, value, [], out)
    return out or [([], "invalid")]


__all__ = ["Checks", "Error", "explain"]
