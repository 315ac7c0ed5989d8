"""Which session file an RPC command line resumes, told before pitrio is imported (issue 38).

The launcher starts the parsing child (:mod:`pitrio._preparse`) for that file while the
runtime imports. The answer is a guess: only the command line, the environment, the
settings' ``sessionDir`` and the session dir's file names are read, with the standard library
alone. A wrong guess costs a child whose offer the file really opened does not take.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence


def named_session(
    argv: Sequence[str], cwd: str, env: Mapping[str, str] | None = None
) -> str | None:
    """The session file an RPC command line opens, if it can be told without pitrio and
    names an existing regular file; else ``None``. Options are read spelled ``--opt value``
    or ``--opt=value``:

    * ``--session PATH``: that file (a path: it has a separator or ends in ``.jsonl``);
    * ``--session PREFIX`` (a session id's start) and ``-c``/``--continue``: the newest file
      (by modification time) of the cwd's session dir whose name ends in ``_<id>.jsonl``
      with a matching id, or any ``.jsonl`` file for ``--continue``.

    The session dir is ``--session-dir``, else ``$PITRIO_SESSION_DIR``, else a ``sessionDir``
    setting (:func:`setting_session_dir`), else the agent dir's ``sessions/--<cwd>--``. This
    is a guess where pitrio's own resolution reads more (the project's trust, the headers,
    other projects): a wrong guess costs only a child, whose offer the file that is really
    opened does not take (its identity differs)."""
    environ = os.environ if env is None else env
    options: dict[str, str] = {}
    resume = False
    for index, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in ("-c", "--continue"):
            resume = True
            continue
        name, equals, value = arg.partition("=")
        if name in ("--mode", "--session", "--session-dir"):
            if equals:
                options[name] = value
            elif index + 1 < len(argv):
                options[name] = argv[index + 1]
    session = options.get("--session")
    if options.get("--mode") != "rpc" or not (session or resume):
        return None
    if session and ("/" in session or "\\" in session or session.endswith(".jsonl")):
        path = os.path.join(cwd, os.path.expanduser(session))
    else:
        folder = _session_dir(cwd, options.get("--session-dir"), environ)
        found = _newest(folder, session or "", any_name=not session)
        if found is None:
            return None
        path = found
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None  # a FIFO's bytes are the parent's to read
    except (OSError, ValueError):
        return None
    return path


def _session_dir(cwd: str, flag: str | None, env: Mapping[str, str]) -> str:
    """The cwd's session dir as the store finds it (see :func:`named_session`)."""
    chosen = flag or env.get("PITRIO_SESSION_DIR")
    if chosen:
        return os.path.join(cwd, os.path.expanduser(chosen))
    agent = env.get("PITRIO_AGENT_DIR")
    base = os.path.expanduser(agent) if agent else os.path.expanduser("~/.pitrio/agent")
    setting = setting_session_dir(base, cwd)
    if setting:
        return os.path.join(cwd, os.path.expanduser(setting))
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in ("/", "\\", ":"):
        trimmed = trimmed.replace(char, "-")
    return os.path.join(base, "sessions", f"--{trimmed}--")


def setting_session_dir(agent_dir: str, cwd: str) -> str | None:
    """The ``sessionDir`` setting as pitrio's settings would give it, read without them: the
    project file's value over the agent dir's ``settings.json`` one.

    The project file is ``<cwd>/.pitrio/settings.json``, or, for pi's agent dir
    (``.../.pi/agent``) and without that file, ``<cwd>/.pi/settings.json``: the settings
    module's rule, written once more where it cannot be imported. The project's is read
    whether or not the project is trusted (the runtime reads it only when it is): guessing
    it costs at worst a child whose offer is not taken. A file that does not parse, or a
    value that is not a non-empty string, counts as no setting."""
    folder = os.path.normpath(agent_dir)
    names = [".pitrio"]
    if os.path.basename(folder) == "agent" and os.path.basename(os.path.dirname(folder)) == ".pi":
        names.append(".pi")
    project = None
    for name in names:
        candidate = os.path.join(cwd, name, "settings.json")
        if os.path.exists(candidate):
            project = candidate
            break
    for path in (project, os.path.join(agent_dir, "settings.json")):
        if path is None:
            continue
        value = _read_setting(path, "sessionDir")
        if value is not None:
            return value
    return None


SETTINGS_MAX = 1 << 20
"""A settings file larger than this is not read for the guess (they are a few KB)."""


def _read_setting(path: str, key: str) -> str | None:
    """A top-level string setting of one JSON file, or ``None`` (no file, no such key, not a
    string or empty, or not JSON). Only a regular file is read, and only up to
    :data:`SETTINGS_MAX`: a FIFO or a device there must not hold the start."""
    import json  # only for a resumed session without a session dir named

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or status.st_size > SETTINGS_MAX:
            return None
        values = json.loads(os.read(fd, SETTINGS_MAX + 1))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    value = values.get(key) if isinstance(values, dict) else None
    return value if isinstance(value, str) and value else None


def _newest(folder: str, prefix: str, *, any_name: bool) -> str | None:
    """The most recently modified ``.jsonl`` file in ``folder`` (with ``any_name`` false:
    one whose session id, after the file name's first ``_``, starts with ``prefix``)."""
    best: tuple[int, str] | None = None
    try:
        entries = list(os.scandir(folder))
    except (OSError, ValueError):
        return None
    for entry in entries:
        name = entry.name
        if not name.endswith(".jsonl"):
            continue
        if not any_name and not name.partition("_")[2].startswith(prefix):
            continue
        try:
            modified = entry.stat().st_mtime_ns
        except OSError:
            continue
        if best is None or modified > best[0]:
            best = (modified, entry.path)
    return None if best is None else best[1]
