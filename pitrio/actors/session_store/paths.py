"""Where session files live: the agent dir, a cwd's session dir, file names (spec §4.1); and
what a session path may be (a regular file or nothing yet, :func:`check_session_path`)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import BinaryIO

from pitrio.errors import SessionPathError

SESSION_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
"""pi 1.6.0's rule for a caller-chosen session id (``--session-id``, ``assertValidSessionId``)."""

AGENT_DIR_ENV = "PITRIO_AGENT_DIR"
SESSION_DIR_ENV = "PITRIO_SESSION_DIR"


def agent_dir(env: dict[str, str] | None = None) -> Path:
    """The agent dir: ``$PITRIO_AGENT_DIR``, else ``~/.pitrio/agent``."""
    env = dict(os.environ) if env is None else env
    configured = env.get(AGENT_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".pitrio" / "agent"


def encode_cwd(cwd: str) -> str:
    """A cwd as a directory name: one leading separator dropped, ``/ \\ :`` become ``-``."""
    trimmed = cwd[1:] if cwd[:1] in ("/", "\\") else cwd
    for char in ("/", "\\", ":"):
        trimmed = trimmed.replace(char, "-")
    return f"--{trimmed}--"


def session_dir(
    cwd: str, *, override: str | None = None, env: dict[str, str] | None = None
) -> Path:
    """Where a cwd's sessions go: ``--session-dir`` > ``$PITRIO_SESSION_DIR`` > the default."""
    env = dict(os.environ) if env is None else env
    chosen = override or env.get(SESSION_DIR_ENV)
    if chosen:
        return Path(chosen).expanduser()
    return agent_dir(env) / "sessions" / encode_cwd(cwd)


def session_file_name(header_timestamp: str, session_id: str) -> str:
    """``<timestamp with : and . as ->_<session id>.jsonl``."""
    stamp = header_timestamp.replace(":", "-").replace(".", "-")
    return f"{stamp}_{session_id}.jsonl"


# -- what a session path may be (issue 21) ---------------------------------------------------

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


def file_kind(mode: int) -> str:
    """What a ``st_mode`` is, in words (``a regular file``, ``a character device``, ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def path_refusal(link: os.stat_result | None, target: os.stat_result | None) -> str | None:
    """Why a path cannot hold a session file, or ``None`` if it can (the one rule, pure).

    ``link`` is the path's own ``lstat`` (``None``: nothing there, a new session may start
    there), ``target`` what it leads to (``stat``; ``None`` for a link to nothing). Only a
    regular file will do, reached directly or through symbolic links; a path that does not
    exist yet will do too. Anything else would have pitrio read a device or block on a FIFO,
    and then write a session file in its place.
    """
    if link is None:
        return None
    if stat.S_ISLNK(link.st_mode):
        if target is None:
            return "not a session file: a symbolic link to nothing"
        if not stat.S_ISREG(target.st_mode):
            return f"not a session file: a symbolic link to {file_kind(target.st_mode)}"
        return None
    if not stat.S_ISREG(link.st_mode):
        return f"not a session file: {file_kind(link.st_mode)}"
    return None


def _stat(path: Path, *, follow: bool) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=follow)
    except (FileNotFoundError, NotADirectoryError):
        return None


def check_session_path(path: Path | str) -> Path:
    """Raise :class:`~pitrio.errors.SessionPathError` unless ``path`` may hold a session file
    (see :func:`path_refusal`); returns it as a :class:`Path`. Touches nothing: two ``stat``
    calls. Every way a session path comes in goes through here before anything opens it."""
    path = Path(path)
    link = _stat(path, follow=False)
    target = _stat(path, follow=True) if link is not None and stat.S_ISLNK(link.st_mode) else link
    reason = path_refusal(link, target)
    if reason is not None:
        raise SessionPathError(str(path), reason)
    return path


def open_session_file(path: Path, *, buffering: int = -1) -> BinaryIO | None:
    """Open a session file for reading after :func:`check_session_path`; ``None`` if missing.

    Opened without blocking (a FIFO swapped in after the check does not hang the open) and
    checked again on the descriptor itself, so a path replaced between the two is refused too.
    ``buffering`` is the read buffer's size (-1: Python's default, the file system's block).
    """
    check_session_path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SessionPathError(str(path), f"not a session file: {file_kind(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise
