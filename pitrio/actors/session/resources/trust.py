"""Project trust, as pi 1.6.0 decides it (its ``docs/security.md``).

A project's protected files (settings, MCP servers, extensions, skills, prompt templates,
themes, ``SYSTEM.md`` / ``APPEND_SYSTEM.md`` under its config dir, and ``.agents/skills`` of
the cwd or an ancestor) load only when the project is trusted. Context files
(``AGENTS.md``, ``CLAUDE.md``) load either way, as in 1.6.0.

The decision, in order:

1. ``--approve`` / ``--no-approve`` (:attr:`TrustInputs.override`);
2. a cwd without protected files: the nearest saved decision, else trusted;
3. the first ``project_trust`` extension handler answering yes or no (user-level and ``-e``
   extensions only: the project's own are not loaded yet);
4. the nearest saved decision in ``<agentDir>/trust.json`` (the cwd or a parent);
5. ``defaultProjectTrust`` of the agent dir's settings: ``always`` trusts, ``never`` does
   not, ``ask`` (the default) asks when a client can answer and is untrusted otherwise
   (print, JSON and RPC modes).

:func:`decide` is the pure rule; the rest is small file I/O: :func:`has_protected_resources`
looks at the cwd, :func:`read_trust_file` / :func:`save_decisions` read and write
``trust.json`` (an object of canonical directory path -> ``true`` / ``false``; ``null``
values are skipped on reading and dropped on writing, keys sorted, two-space indent).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

import attrs
import orjson

from pitrio.errors import PitrioError

TRUST_FILE = "trust.json"
PROTECTED_ENTRIES = (
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
)
"""Entries of a project config dir (``.pi``, ``.pitrio``) that need a trust decision; a bare
config dir does not."""

DefaultTrust = Literal["ask", "always", "never"]
DEFAULT_TRUST: DefaultTrust = "ask"
Reason = Literal["override", "no-resources", "extension", "saved", "default", "ask", "no-ui"]

UNTRUSTED_NOTICE = (
    "Project {cwd} is not trusted: its local settings, extensions, skills, prompt templates, "
    "system prompt files and MCP servers were not loaded (run with --approve, or save a "
    "decision in {trust_file})"
)
"""Said once per session started in an untrusted project that has protected files."""


class TrustFileError(PitrioError):
    """``trust.json`` cannot be read or written; the message names the file and the fault."""


@attrs.frozen(kw_only=True)
class ExtensionAnswer:
    """A ``project_trust`` handler's yes or no, and whether to save it."""

    trusted: bool
    remember: bool = False


@attrs.frozen(kw_only=True)
class TrustInputs:
    """Everything :func:`decide` needs; ``cwd`` is canonical (:func:`canonical_path`)."""

    cwd: str
    override: bool | None = None
    has_protected: bool = False
    saved: Mapping[str, bool | None] = attrs.field(factory=dict)
    default: DefaultTrust = DEFAULT_TRUST
    can_ask: bool = False
    """A client can answer a trust dialog (pi: the interactive terminal)."""
    extension: ExtensionAnswer | None = None


@attrs.frozen(kw_only=True)
class TrustDecision:
    """The outcome: ``trusted``, why, and (``ask``) whether a client must be asked first.

    ``save``: the decisions to write into ``trust.json`` (an extension's remembered answer).
    """

    trusted: bool
    reason: Reason
    ask: bool = False
    saved_path: str | None = None
    save: tuple[tuple[str, bool | None], ...] = ()


def canonical_path(path: str | os.PathLike[str]) -> str:
    """The absolute path with symlinks resolved (pi's key for ``trust.json``)."""
    absolute = os.path.abspath(path)
    try:
        return os.path.realpath(absolute, strict=True)
    except OSError:
        return absolute


def nearest_saved(saved: Mapping[str, bool | None], cwd: str) -> tuple[str, bool] | None:
    """The closest saved ``true``/``false`` for ``cwd`` or a parent (``null`` is skipped;
    keys compare as absolute, normalised paths)."""
    keyed: dict[str, bool | None] = {}
    for key, item in saved.items():
        keyed.setdefault(os.path.abspath(key), item)
    current = cwd
    while True:
        value = keyed.get(current)
        if value is True or value is False:
            return current, value
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def decide(inputs: TrustInputs) -> TrustDecision:
    """pi 1.6.0's decision for ``inputs`` (see the module's docstring for the order)."""
    if inputs.override is not None:
        return TrustDecision(trusted=inputs.override, reason="override")
    found = nearest_saved(inputs.saved, inputs.cwd)
    if not inputs.has_protected:
        if found is not None:
            return TrustDecision(trusted=found[1], reason="saved", saved_path=found[0])
        return TrustDecision(trusted=True, reason="no-resources")
    if inputs.extension is not None:
        answer = inputs.extension
        save = ((inputs.cwd, answer.trusted),) if answer.remember else ()
        return TrustDecision(trusted=answer.trusted, reason="extension", save=save)
    if found is not None:
        return TrustDecision(trusted=found[1], reason="saved", saved_path=found[0])
    if inputs.default == "always":
        return TrustDecision(trusted=True, reason="default")
    if inputs.default == "never":
        return TrustDecision(trusted=False, reason="default")
    if inputs.can_ask:
        return TrustDecision(trusted=False, reason="ask", ask=True)
    return TrustDecision(trusted=False, reason="no-ui")


def default_trust(value: object) -> DefaultTrust:
    """``defaultProjectTrust`` of the agent dir's settings (anything else: ``ask``)."""
    if value == "always":
        return "always"
    if value == "never":
        return "never"
    return DEFAULT_TRUST


# -- the choices of a trust dialog -------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TrustOption:
    """One answer of the trust dialog: its label, the decision and what it saves."""

    label: str
    trusted: bool
    updates: tuple[tuple[str, bool | None], ...] = ()


def trust_options(cwd: str) -> tuple[TrustOption, ...]:
    """1.6.0's dialog choices for canonical ``cwd``, in its order."""
    options = [TrustOption(label="Trust", trusted=True, updates=((cwd, True),))]
    parent = os.path.dirname(cwd)
    if parent != cwd:
        options.append(
            TrustOption(
                label=f"Trust parent folder ({parent})",
                trusted=True,
                updates=((parent, True), (cwd, None)),
            )
        )
    options.append(TrustOption(label="Trust (this session only)", trusted=True))
    options.append(TrustOption(label="Do not trust", trusted=False, updates=((cwd, False),)))
    options.append(TrustOption(label="Do not trust (this session only)", trusted=False))
    return tuple(options)


def trust_prompt(cwd: str) -> str:
    """The dialog's title."""
    return (
        f"Trust project folder?\n{cwd}\n\nThis lets pitrio load the project's settings and "
        "resources and run its extensions and MCP servers."
    )


# -- file I/O ----------------------------------------------------------------------------------


def has_protected_resources(
    cwd: str, config_dir_names: Sequence[str], home: str | os.PathLike[str]
) -> bool:
    """Whether ``cwd`` has files that need a trust decision: a protected entry in one of its
    config dirs, or ``.agents/skills`` in it or an ancestor (``~/.agents/skills`` is the
    user's own and does not count)."""
    current = canonical_path(cwd)
    for name in config_dir_names:
        config = os.path.join(current, name)
        if any(os.path.exists(os.path.join(config, entry)) for entry in PROTECTED_ENTRIES):
            return True
    user_skills = os.path.join(canonical_path(home), ".agents", "skills")
    while True:
        candidate = os.path.join(current, ".agents", "skills")
        if candidate != user_skills and os.path.exists(candidate):
            return True
        parent = os.path.dirname(current)
        if parent == current:
            return False
        current = parent


def parse_trust_file(data: bytes, path: str) -> dict[str, bool | None]:
    """``trust.json``'s object; raises :class:`TrustFileError` naming ``path`` and the fault."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TrustFileError(f"Failed to read trust store {path}: {exc}") from None
    if not isinstance(value, dict):
        raise TrustFileError(f"Invalid trust store {path}: expected an object")
    for key, item in value.items():
        if item is not True and item is not False and item is not None:
            raise TrustFileError(
                f"Invalid trust store {path}: value for {orjson.dumps(key).decode()} "
                "must be true, false, or null"
            )
    return dict(value)


def read_trust_file(agent_dir: Path) -> dict[str, bool | None]:
    """The saved decisions of ``<agent_dir>/trust.json`` (none when it does not exist)."""
    path = agent_dir / TRUST_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise TrustFileError(f"Failed to read trust store {path}: {exc.strerror}") from None
    return parse_trust_file(data, str(path))


def apply_updates(
    saved: Mapping[str, bool | None], updates: Iterable[tuple[str, bool | None]]
) -> dict[str, bool]:
    """``saved`` with ``updates`` applied (``None`` removes a key), nulls dropped, sorted."""
    merged: dict[str, bool] = {k: v for k, v in saved.items() if v is not None}
    for key, value in updates:
        merged.pop(key, None)
        if value is not None:
            merged[key] = value
    return {key: merged[key] for key in sorted(merged)}


def save_decisions(agent_dir: Path, updates: Sequence[tuple[str, bool | None]]) -> None:
    """Write ``updates`` into ``trust.json`` under a lock, re-reading it first."""
    if not updates:
        return
    agent_dir.mkdir(parents=True, exist_ok=True)
    path = agent_dir / TRUST_FILE
    fd = os.open(agent_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # pitrio writers; the file is replaced by rename
        data = apply_updates(read_trust_file(agent_dir), updates)
        temp = path.with_name(f".{TRUST_FILE}.{os.getpid()}.tmp")
        temp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
        os.replace(temp, path)
    except OSError as exc:
        raise TrustFileError(f"Failed to write trust store {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
