"""Where session files live: the agent dir, a cwd's session dir, file names (spec §4.1)."""

from __future__ import annotations

import os
from pathlib import Path

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
