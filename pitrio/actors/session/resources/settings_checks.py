"""Checking one settings file's object (spec §8.2): pitrio's table of the keys it reads, then
pi 1.6.0's published ``settings.schema.json``. Pure; :mod:`.settings` reads and writes files.

The table (:data:`SCHEMA`) keeps its role for the keys pitrio reads: its checks are where a
value pitrio uses must be stricter than pi's schema (a negative retry count or delay), and it
covers pitrio's own keys (``session.fsync``), which pi's schema does not know. Whatever it lets
through is then checked against pi's schema, so every key pi 1.6.0 defines is checked too
(``theme``, ``terminal.*``, ``compaction.modelOverrides``, integer-only token counts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import orjson

from pitrio.actors.json_schema import errors as schema_errors
from pitrio.actors.json_schema import json_path
from pitrio.actors.model_router.models_schema import SCHEMA_PATH as MODELS_SCHEMA_PATH

THINKING_LEVELS = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
TRANSPORTS = ("sse", "websocket", "websocket-cached", "auto")
QUEUE_MODES = ("all", "one-at-a-time")
SETTINGS_SCHEMA_PATH = MODELS_SCHEMA_PATH.with_name("settings.schema.json")
"""pi 1.6.0's published ``settings.json`` schema, copied by ``scripts/gen_catalogue.py``."""


@attrs.frozen
class SettingsProblem:
    """A settings file, or one key in it, that could not be used.

    ``key`` is the dotted key (``retry.maxRetries``) or ``None`` when the whole file is
    unusable.
    """

    path: str
    error: str
    key: str | None = None

    def __str__(self) -> str:
        if self.key is None:
            return f"{self.path}: {self.error}"
        return f"{self.path}: {self.key}: {self.error}"


Check = Callable[[Any], str | None]
"""Returns the problem with a value, or ``None`` when it is acceptable."""


def _string(value: Any) -> str | None:
    return None if isinstance(value, str) else "expected a string"


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "expected true or false"


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "expected a number"
    if not math.isfinite(value) or value < 0:
        return "expected a number of at least 0"
    return None


def _timeout(value: Any) -> str | None:
    if value == "disabled" or _number(value) is None:
        return None
    return 'expected a number of milliseconds (0 or "disabled": no limit)'


def _one_of(*choices: str) -> Check:
    listed = ", ".join(f'"{c}"' for c in choices)

    def check(value: Any) -> str | None:
        return None if value in choices else f"expected one of {listed}"

    return check


def _strings(value: Any) -> str | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return "expected an array of strings"


def _packages(value: Any) -> str | None:
    if isinstance(value, list) and all(
        isinstance(v, str) or (isinstance(v, dict) and isinstance(v.get("source"), str))
        for v in value
    ):
        return None
    return "expected an array of package sources"


def _budgets(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "expected an object"
    for level, budget in value.items():
        if _number(budget) is not None:
            return f'"{level}": expected a number of at least 0'
    return None


_LEVELS = THINKING_LEVELS if "max" in THINKING_LEVELS else (*THINKING_LEVELS, "max")
"""The thinking levels a setting may name: pi 1.6.0's, ``max`` included."""


def _model_levels(value: Any) -> str | None:
    if not isinstance(value, dict):
        return "expected an object of provider/model: thinking level"
    for ref, level in value.items():
        if level not in _LEVELS:
            return f'"{ref}": expected one of {", ".join(_LEVELS)}'
    return None


# Keys of §8.2 this layer reads, with their checks. Parents of dotted keys must be objects.
SCHEMA: dict[str, Check] = {
    "defaultProvider": _string,
    "defaultModel": _string,
    "defaultThinkingLevel": _one_of(*_LEVELS),
    "modelThinkingLevels": _model_levels,
    "defaultTools": _strings,
    "defaultProjectTrust": _one_of("ask", "always", "never"),
    "thinkingBudgets": _budgets,
    "transport": _one_of(*TRANSPORTS),
    "steeringMode": _one_of(*QUEUE_MODES),
    "followUpMode": _one_of(*QUEUE_MODES),
    "compaction.enabled": _flag,
    "compaction.reserveTokens": _number,
    "compaction.keepRecentTokens": _number,
    "branchSummary.reserveTokens": _number,
    "branchSummary.skipPrompt": _flag,
    "retry.enabled": _flag,
    "retry.maxRetries": _number,
    "retry.baseDelayMs": _number,
    "retry.maxDelayMs": _number,
    "retry.maxAgentDelayMs": _number,
    "retry.provider.timeoutMs": _number,
    "retry.provider.maxRetries": _number,
    "retry.provider.maxRetryDelayMs": _number,
    "httpProxy": _string,
    "httpIdleTimeoutMs": _timeout,
    "websocketConnectTimeoutMs": _timeout,
    "shellPath": _string,
    "shellCommandPrefix": _string,
    "session.fsync": _one_of("always", "batch", "never"),
    "images.autoResize": _flag,
    "images.blockImages": _flag,
    "enableSkillCommands": _flag,
    "enabledModels": _strings,
    "sessionDir": _string,
    "extensions": _strings,
    "skills": _strings,
    "prompts": _strings,
    "themes": _strings,
    "packages": _packages,
}


def _parents() -> tuple[str, ...]:
    parents: dict[str, None] = {}
    for key in SCHEMA:
        parts = key.split(".")
        for depth in range(1, len(parts)):
            parents.setdefault(".".join(parts[:depth]), None)
    return tuple(parents)


_PARENTS = _parents()


def validate_settings(
    values: Mapping[str, Any], path: str
) -> tuple[dict[str, Any], tuple[SettingsProblem, ...]]:
    """``values`` without the keys whose values are unusable, and one problem per key.

    A parent that is not an object (``"retry": 3``) is one problem and is dropped whole. The
    keys of :data:`SCHEMA` are checked first, then what is left against pi 1.6.0's schema;
    a problem the schema finds inside a list drops the key holding the list.
    """
    clean: dict[str, Any] = _deep_copy(values)
    problems: list[SettingsProblem] = []
    for parent in _PARENTS:
        container, leaf = _locate(clean, parent)
        if container is not None and leaf in container and not isinstance(container[leaf], dict):
            problems.append(SettingsProblem(path, "expected an object", parent))
            del container[leaf]
    for key, check in SCHEMA.items():
        container, leaf = _locate(clean, key)
        if container is None or leaf not in container:
            continue
        error = check(container[leaf])
        if error is not None:
            problems.append(SettingsProblem(path, error, key))
            del container[leaf]
    problems.extend(_schema_problems(clean, path))
    return clean, tuple(problems)


def _schema_problems(clean: dict[str, Any], path: str) -> list[SettingsProblem]:
    """Drop from ``clean`` each key pi 1.6.0's schema refuses; one problem per key dropped."""
    if not clean:
        return []  # most runs have no settings file: jsonschema is not even imported
    found = list(schema_errors(clean, SETTINGS_SCHEMA_PATH))  # before anything is dropped
    problems: list[SettingsProblem] = []
    dropped: list[list[str]] = []
    for where, wanted in found:
        keys = _object_keys(clean, where)
        if not keys or any(keys[: len(done)] == done for done in dropped):
            continue  # the root (read_settings_file checks it), or inside a key gone already
        container, leaf = _container(clean, keys)
        if container is None or leaf not in container:
            continue
        del container[leaf]
        dropped.append(keys)
        inside = where[len(keys) :]  # a list item's path: the list goes, the item is named
        error = f"item {json_path(inside)}: {wanted}" if inside else wanted
        problems.append(SettingsProblem(path, error, _key_path(keys)))
    return problems


def _object_keys(values: dict[str, Any], where: list[Any]) -> list[str]:
    """The leading object keys of a JSON path: where it enters a list, the key holding it."""
    keys: list[str] = []
    node: Any = values
    for part in where:
        if not isinstance(node, dict) or not isinstance(part, str) or part not in node:
            break
        keys.append(part)
        node = node[part]
    return keys


def _container(values: dict[str, Any], keys: list[str]) -> tuple[dict[str, Any] | None, str]:
    node: Any = values
    for part in keys[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), keys[-1]


def _key_path(keys: list[str]) -> str:
    """``compaction.modelOverrides["openai/gpt-5.1"].reserveTokens``: dotted, a key that is not
    a plain name (a model reference) quoted in brackets, as pi names it."""
    out = ""
    for key in keys:
        if key and all(c.isalnum() or c in "_-$" for c in key):
            out += f".{key}" if out else key
        else:
            out += f"[{orjson.dumps(key).decode()}]"
    return out


def _deep_copy(values: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, dict) else v for k, v in values.items()}


def _locate(values: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    return _container(values, dotted.split("."))
