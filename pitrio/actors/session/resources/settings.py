"""Settings files (spec §8): global ``<agentDir>/settings.json`` merged with the project's.

Pure merge, validation and typed reading; the file I/O is a few small functions.

* Effective settings are the global object with the project's keys on top, nested objects
  merged at every depth (pi 1.6.0's rule; ``compaction.modelOverrides`` entries of both files
  merge before a model's entry is looked up). The project file is
  ``<cwd>/.pitrio/settings.json``; when the agent dir is pi's own (``~/.pi/agent``, or
  ``pi_compat=True``) a project without ``.pitrio/settings.json`` falls back to
  ``.pi/settings.json``.
* A file that does not parse is reported and read as ``{}`` (pi does the same). A key holding
  a value of the wrong type is reported with its file and key path and left out, so its
  default applies: first the keys pitrio reads are checked by :data:`SCHEMA` (pitrio's own
  keys, and checks stricter than pi's schema where a value is used), then the rest against pi
  1.6.0's published ``settings.schema.json``. Keys neither knows are kept untouched (files
  shared with a newer pi).
* Writes change only the keys given, re-read the file under a directory lock right before
  replacing it atomically, and refuse to touch a file that is invalid: the user's file is
  never overwritten while it has a problem.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson

from pitrio.actors.session.cache_warming import WarmingMode, cache_warming_mode
from pitrio.actors.session.resources.settings_checks import (
    QUEUE_MODES,
    SCHEMA,
    SETTINGS_SCHEMA_PATH,
    THINKING_LEVELS,
    TRANSPORTS,
    SettingsProblem,
    validate_settings,
)
from pitrio.actors.session_store.paths import SESSION_DIR_ENV
from pitrio.actors.supervisor.branch_summary import BranchSummarySettings
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.actors.tool_executor import BashSettings, BuiltinSettings, ReadSettings
from pitrio.errors import PitrioError

PROJECT_DIR_NAME = ".pitrio"
PI_PROJECT_DIR_NAME = ".pi"
SETTINGS_FILE = "settings.json"

QueueMode = Literal["all", "one-at-a-time"]
RESOURCE_KINDS = ("extensions", "skills", "prompts", "themes")

__all__ = [
    "QUEUE_MODES",
    "RESOURCE_KINDS",
    "SCHEMA",
    "SETTINGS_SCHEMA_PATH",
    "THINKING_LEVELS",
    "TRANSPORTS",
    "Settings",
    "SettingsProblem",
    "SettingsWriteError",
    "builtin_tool_settings",
    "load_settings",
    "merge_settings",
    "migrate_settings",
    "validate_settings",
]


class SettingsWriteError(PitrioError, ValueError):
    """A settings file was not written: it is invalid, or the change would make it so."""

    def __init__(self, path: Path, problems: tuple[SettingsProblem, ...]) -> None:
        details = "; ".join(str(p) if p.key is None else f"{p.key}: {p.error}" for p in problems)
        super().__init__(f"cannot update {path}: {details}")
        self.path = path
        self.problems = problems


# --- pure rules -------------------------------------------------------------------------------


def merge_settings(global_: Mapping[str, Any], project: Mapping[str, Any]) -> dict[str, Any]:
    """Project wins; nested objects merge at every depth; arrays and scalars are replaced."""
    merged = dict(global_)
    for key, value in project.items():
        if value is None:
            continue
        base = merged.get(key)
        if isinstance(value, dict) and isinstance(base, dict):
            merged[key] = merge_settings(base, value)
        else:
            merged[key] = value
    return merged


def migrate_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """Apply pi's load-time renames.

    ``queueMode`` -> ``steeringMode``; a boolean ``websockets`` -> ``transport``; the legacy
    ``skills`` object ``{enableSkillCommands, customDirectories}`` -> ``enableSkillCommands``
    plus a ``skills`` array.
    """
    out = dict(raw)
    if "queueMode" in out and "steeringMode" not in out:
        out["steeringMode"] = out.pop("queueMode")
    if isinstance(out.get("websockets"), bool) and "transport" not in out:
        out["transport"] = "websocket" if out.pop("websockets") else "sse"
    legacy = out.get("skills")
    if isinstance(legacy, dict):
        del out["skills"]
        enable = legacy.get("enableSkillCommands")
        if isinstance(enable, bool) and "enableSkillCommands" not in out:
            out["enableSkillCommands"] = enable
        directories = legacy.get("customDirectories")
        if isinstance(directories, list) and directories:
            out["skills"] = list(directories)
    return out


# --- reading ----------------------------------------------------------------------------------


def read_settings_file(path: Path) -> tuple[dict[str, Any], SettingsProblem | None]:
    """The (migrated) settings object in ``path`` (``{}`` when absent), or ``{}`` and the problem.

    Types are not checked here; :func:`validate_settings` does that.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, SettingsProblem(str(path), exc.strerror or str(exc))
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return {}, SettingsProblem(str(path), f"invalid JSON: {exc}")
    if not isinstance(value, dict):
        return {}, SettingsProblem(str(path), "settings must be a JSON object")
    return migrate_settings(value), None


def is_pi_agent_dir(agent_dir: Path) -> bool:
    """Whether ``agent_dir`` is pi's (``.../.pi/agent``): then pi's project dirs are read too."""
    return agent_dir.name == "agent" and agent_dir.parent.name == PI_PROJECT_DIR_NAME


def project_dir_names(agent_dir: Path, pi_compat: bool | None = None) -> tuple[str, ...]:
    """Project config dir names in the order they are consulted (``.pitrio`` first)."""
    compat = is_pi_agent_dir(agent_dir) if pi_compat is None else pi_compat
    return (PROJECT_DIR_NAME, PI_PROJECT_DIR_NAME) if compat else (PROJECT_DIR_NAME,)


def project_config_dirs(
    cwd: str, agent_dir: Path, pi_compat: bool | None = None
) -> tuple[Path, ...]:
    """The project's config dirs: ``<cwd>/.pitrio`` and, for pi's agent dir, ``<cwd>/.pi``."""
    return tuple(Path(cwd) / name for name in project_dir_names(agent_dir, pi_compat))


def project_settings_path(cwd: str, agent_dir: Path, pi_compat: bool | None = None) -> Path:
    """The project settings file: the first config dir's that exists, else ``.pitrio``'s."""
    dirs = project_config_dirs(cwd, agent_dir, pi_compat)
    for directory in dirs:
        candidate = directory / SETTINGS_FILE
        if candidate.exists():
            return candidate
    return dirs[0] / SETTINGS_FILE


@attrs.frozen
class Settings:
    """Effective settings with typed accessors for the keys this runtime reads (§8.2).

    ``values`` is the merged, validated object; ``global_values`` / ``project_values`` are
    the two files' validated objects (resource lists resolve against their own file's dir).
    """

    values: dict[str, Any] = attrs.field(factory=dict)
    problems: tuple[SettingsProblem, ...] = ()
    global_values: dict[str, Any] = attrs.field(factory=dict)
    project_values: dict[str, Any] = attrs.field(factory=dict)
    global_path: Path | None = None
    project_path: Path | None = None

    # -- generic ---------------------------------------------------------------------------

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

    # -- §8.2 ------------------------------------------------------------------------------

    @property
    def default_provider(self) -> str | None:
        """``defaultProvider``: the provider of the initial model."""
        return self.text("defaultProvider")

    @property
    def default_model(self) -> str | None:
        """``defaultModel``: the initial model id (with ``default_provider``)."""
        return self.text("defaultModel")

    @property
    def default_thinking_level(self) -> str | None:
        """``defaultThinkingLevel`` (``None``: the caller's fallback, pi's ``"medium"``)."""
        return self.text("defaultThinkingLevel")

    @property
    def thinking_budgets(self) -> dict[str, int]:
        """``thinkingBudgets``: tokens per thinking level for budget-based providers."""
        value = self.get("thinkingBudgets")
        if not isinstance(value, dict):
            return {}
        return {str(level): int(budget) for level, budget in value.items()}

    @property
    def transport(self) -> str:
        """``transport`` (pi 0.73.1's code default ``"auto"``)."""
        return self.text("transport") or "auto"

    @property
    def steering_mode(self) -> QueueMode:
        """``steeringMode``: deliver queued steering messages ``all`` at once or one per turn."""
        return "all" if self.get("steeringMode") == "all" else "one-at-a-time"

    @property
    def follow_up_mode(self) -> QueueMode:
        """``followUpMode``: like :attr:`steering_mode` for follow-up messages."""
        return "all" if self.get("followUpMode") == "all" else "one-at-a-time"

    @property
    def retry(self) -> RetrySettings:
        """``retry.*`` (enabled, maxRetries, baseDelayMs, maxAgentDelayMs)."""
        return RetrySettings.from_json(self.get("retry"))

    @property
    def compaction(self) -> CompactionSettings:
        """``compaction.*`` (enabled, reserveTokens, keepRecentTokens)."""
        return CompactionSettings.from_json(self.get("compaction"))

    @property
    def branch_summary(self) -> BranchSummarySettings:
        """``branchSummary.*`` (reserveTokens, skipPrompt)."""
        return BranchSummarySettings.from_json(self.get("branchSummary"))

    @property
    def shell_path(self) -> str | None:
        """``shellPath``: the shell for the bash tool and ``!`` commands."""
        return self.text("shellPath")

    @property
    def shell_command_prefix(self) -> str | None:
        """``shellCommandPrefix``: a line run before every bash command."""
        return self.text("shellCommandPrefix")

    @property
    def images_auto_resize(self) -> bool:
        """``images.autoResize`` (default on): the read tool scales large images down."""
        return self.flag("images.autoResize", True)

    @property
    def images_block(self) -> bool:
        """``images.blockImages`` (default off): images are replaced before reaching a model."""
        return self.flag("images.blockImages", False)

    @property
    def enable_skill_commands(self) -> bool:
        """``enableSkillCommands`` (default on); ``/skill:`` expansion happens regardless."""
        return self.flag("enableSkillCommands", True)

    @property
    def enabled_models(self) -> tuple[str, ...] | None:
        """``enabledModels``: the model patterns to cycle through, or ``None`` for all."""
        value = self.get("enabledModels")
        return tuple(value) if isinstance(value, list) else None

    @property
    def cache_warming(self) -> WarmingMode:
        """``cacheWarming`` (``off``/``streaming``/``idle``, default ``idle``), read from the
        agent dir's settings only: pi 1.6.0 ignores a project's value, since warming spends
        the user's money."""
        return cache_warming_mode(self.global_values)

    @property
    def session_dir(self) -> str | None:
        """``sessionDir``: where session files go (``~`` expanded)."""
        value = self.text("sessionDir")
        return os.path.expanduser(value) if value else None

    def session_dir_for(
        self, cwd: str, flag: str | None, env: Mapping[str, str] | None = None
    ) -> str | None:
        """The session dir of a session in ``cwd``: ``flag`` (``--session-dir``), else none
        where ``$PITRIO_SESSION_DIR`` names one (the store reads it), else :attr:`session_dir`
        taken from ``cwd`` when relative: pi 1.6.0's order of flag, variable, setting."""
        environ = os.environ if env is None else env
        if flag or environ.get(SESSION_DIR_ENV) or not self.session_dir:
            return flag
        return str(Path(cwd) / self.session_dir)

    def resource_entries(self, kind: str, scope: Literal["user", "project"]) -> tuple[str, ...]:
        """One file's resource list (``skills``, ``prompts``, ...): paths and patterns."""
        values = self.global_values if scope == "user" else self.project_values
        entries = values.get(kind)
        return tuple(entries) if isinstance(entries, list) else ()


def builtin_tool_settings(
    settings: Settings, env: Mapping[str, str] | None = None
) -> BuiltinSettings:
    """What the built-in tools take from the settings, as pi 1.6.0 gives them: the read tool
    ``images.autoResize``, the bash tool ``shellPath`` and ``shellCommandPrefix`` (and ``env``,
    its commands' environment: the process's when ``None``)."""
    return BuiltinSettings(
        read=ReadSettings(auto_resize_images=settings.images_auto_resize),
        bash=BashSettings(
            shell_path=settings.shell_path, command_prefix=settings.shell_command_prefix, env=env
        ),
    )


def load_settings(
    agent_dir: Path,
    cwd: str | None = None,
    *,
    pi_compat: bool | None = None,
    project_trusted: bool = True,
) -> Settings:
    """Global settings of ``agent_dir`` merged with the project settings of ``cwd`` (not
    read at all for an untrusted project: :mod:`.trust`)."""
    global_path = agent_dir / SETTINGS_FILE
    global_raw, global_problem = read_settings_file(global_path)
    global_values, global_problems = validate_settings(global_raw, str(global_path))
    project_values: dict[str, Any] = {}
    project_problems: tuple[SettingsProblem, ...] = ()
    project_problem = None
    project_path = None
    if cwd is not None and project_trusted:
        project_path = project_settings_path(cwd, agent_dir, pi_compat)
        project_raw, project_problem = read_settings_file(project_path)
        project_values, project_problems = validate_settings(project_raw, str(project_path))
    problems = (
        *(p for p in (global_problem,) if p is not None),
        *global_problems,
        *(p for p in (project_problem,) if p is not None),
        *project_problems,
    )
    return Settings(
        merge_settings(global_values, project_values),
        problems,
        global_values=global_values,
        project_values=project_values,
        global_path=global_path,
        project_path=project_path,
    )


# --- writing ----------------------------------------------------------------------------------


@contextmanager
def _directory_lock(directory: Path) -> Iterator[None]:
    # An exclusive flock on the directory itself serialises pitrio's writers without leaving
    # a lock file behind; the file is replaced by rename, so locking the file would not do.
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def update_settings_file(path: Path, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``changes`` (dotted keys allowed) into one settings file, atomically.

    The file is re-read under the lock right before writing, so keys changed by someone
    else are kept. Raises :class:`SettingsWriteError`, writing nothing, when the file does
    not parse or has an invalid known key, or when a change would put one there. Returns
    the object written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with _directory_lock(path.parent):
        current, problem = read_settings_file(path)
        if problem is not None:
            raise SettingsWriteError(path, (problem,))
        _, existing = validate_settings(current, str(path))
        if existing:
            raise SettingsWriteError(path, existing)
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
        _, introduced = validate_settings(current, str(path))
        if introduced:
            raise SettingsWriteError(path, introduced)
        _write_atomically(path, orjson.dumps(current, option=orjson.OPT_INDENT_2) + b"\n")
    return current


def update_global_settings(agent_dir: Path, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Write ``changes`` into ``<agent_dir>/settings.json`` (what pi's setters persist)."""
    return update_settings_file(agent_dir / SETTINGS_FILE, changes)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".settings.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def configured_store(agent: Path, flag: str | None) -> str | None:
    """The session store: ``flag`` (``--store``), else the ``session.store`` setting of the
    agent dir's ``settings.json``, else ``None`` (session files)."""
    if flag:
        return flag
    values, _ = read_settings_file(agent / "settings.json")
    session = values.get("session")
    store = session.get("store") if isinstance(session, dict) else None
    return store if isinstance(store, str) and store else None
