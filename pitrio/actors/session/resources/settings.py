"""Settings files (spec §8): global ``<agentDir>/settings.json`` merged with the project's.

Pure merge and typed reading; the file I/O is two small functions. Effective settings are the
global object with the project's keys on top, nested objects merged one level. A file that does
not parse is reported (never silently ignored) and treated as empty, as pi does. Writes go to
the global file and change only the keys given, so concurrent edits by hand survive.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson

PROJECT_DIR_NAME = ".pitrio"


@attrs.frozen
class SettingsProblem:
    """A settings file that could not be read."""

    path: str
    error: str


def merge_settings(global_: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    """Project wins; nested objects merge one level; arrays and scalars are replaced."""
    merged = dict(global_)
    for key, value in project.items():
        if value is None:
            continue
        base = merged.get(key)
        if isinstance(value, dict) and isinstance(base, dict):
            merged[key] = {**base, **value}
        else:
            merged[key] = value
    return merged


def migrate_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Apply pi's load-time renames (``queueMode`` -> ``steeringMode``, ...)."""
    out = dict(raw)
    if "queueMode" in out and "steeringMode" not in out:
        out["steeringMode"] = out.pop("queueMode")
    if isinstance(out.get("websockets"), bool) and "transport" not in out:
        out["transport"] = "websocket" if out.pop("websockets") else "sse"
    return out


def read_settings_file(path: Path) -> tuple[dict[str, Any], SettingsProblem | None]:
    """The settings object in ``path`` (``{}`` when absent), or ``{}`` and the problem."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, SettingsProblem(str(path), str(exc))
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return {}, SettingsProblem(str(path), f"invalid JSON: {exc}")
    if not isinstance(value, dict):
        return {}, SettingsProblem(str(path), "settings must be a JSON object")
    return migrate_settings(value), None


@attrs.frozen
class Settings:
    """Effective settings with typed accessors for the keys this runtime reads."""

    values: dict[str, Any] = attrs.field(factory=dict)
    problems: tuple[SettingsProblem, ...] = ()

    def get(self, dotted: str, default: Any = None) -> Any:
        """The value at ``a.b.c``, or ``default``."""
        node: Any = self.values
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def number(self, dotted: str, default: int) -> int:
        """An integer setting (a bad type falls back to ``default``)."""
        value = self.get(dotted, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return default
        return int(value)

    def flag(self, dotted: str, default: bool) -> bool:
        """A boolean setting (a bad type falls back to ``default``)."""
        value = self.get(dotted, default)
        return value if isinstance(value, bool) else default

    def text(self, dotted: str) -> str | None:
        """A string setting, or ``None``."""
        value = self.get(dotted)
        return value if isinstance(value, str) else None


def load_settings(agent_dir: Path, cwd: str | None = None) -> Settings:
    """Global settings of ``agent_dir`` merged with the project settings of ``cwd``."""
    global_values, global_problem = read_settings_file(agent_dir / "settings.json")
    project_values: dict[str, Any] = {}
    project_problem = None
    if cwd is not None:
        project_values, project_problem = read_settings_file(
            Path(cwd) / PROJECT_DIR_NAME / "settings.json"
        )
    problems = tuple(p for p in (global_problem, project_problem) if p is not None)
    return Settings(merge_settings(global_values, project_values), problems)


def update_global_settings(agent_dir: Path, changes: Mapping[str, Any]) -> None:
    """Write ``changes`` (dotted keys allowed) into the global settings file, atomically.

    The file is re-read right before writing, so keys changed by someone else are kept.
    """
    path = agent_dir / "settings.json"
    current, problem = read_settings_file(path)
    if problem is not None and path.exists():
        raise ValueError(f"cannot update {path}: {problem.error}")
    for dotted, value in changes.items():
        node = current
        *parents, leaf = dotted.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[leaf] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".settings.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(orjson.dumps(current, option=orjson.OPT_INDENT_2) + b"\n")
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
