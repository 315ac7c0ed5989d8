"""pi 1.6.0's two locks on MCP OAuth state, taken the way proper-lockfile takes them, so that
pi and pitrio processes exclude each other.

* Every read and edit of ``mcp-auth.json`` holds ``<real path of the file>.lock`` (a
  directory; pi's ``lockSync`` with proper-lockfile's defaults: stale after 10 s, ten
  attempts 20 ms apart). The hold is a read, or a read and one write, so it is short.
* A token refresh holds ``<agentDir>/mcp-auth-refresh-<16 hex of sha256(key)>.lock`` from
  reading the tokens to saving new ones (stale after 20 s, waited for up to 25 s, tried
  every 100 ms). Many authorization servers rotate refresh tokens, so two processes that
  refresh with the same refresh token lose the grant; under this lock the second one reads
  the first one's new tokens and uses them instead.

The directory's mtime is its age: a holder that dies stops renewing it, and the next
process takes it over once it is stale. The helpers of :mod:`pitrio.actors.model_router.
auth_file` (pi's lock on ``auth.json``, the same convention) do the ``mkdir``/``rmdir``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from pitrio.actors.mcp.state import McpServerError
from pitrio.actors.model_router.auth_file import lock_path, touch_lock, try_lock, unlock

FILE_LOCK_STALE_S = 10.0
FILE_LOCK_ATTEMPTS = 10
FILE_LOCK_DELAY_S = 0.02
REFRESH_LOCK_STALE_S = 20.0
REFRESH_LOCK_WAIT_S = 25.0
REFRESH_LOCK_RETRY_S = 0.1


class McpAuthLockBusy(McpServerError):
    """Another process held a lock on the MCP credentials for the whole wait."""


@contextmanager
def file_locked(path: Path) -> Iterator[Path]:
    """Hold pi's lock on ``mcp-auth.json``; yields the file's real path (pi locks the target of
    a symlink, so the file is read and replaced there too).

    The wait blocks the thread, as pi's does: it is at most ten 20 ms pauses, and only while
    another process reads or writes the file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    real = Path(os.path.realpath(path))
    for attempt in range(FILE_LOCK_ATTEMPTS):
        if try_lock(real, time.time(), FILE_LOCK_STALE_S):
            break
        if attempt + 1 < FILE_LOCK_ATTEMPTS:
            time.sleep(FILE_LOCK_DELAY_S)
    else:
        raise McpAuthLockBusy(f"{lock_path(real)} is held by another process")
    try:
        yield real
    finally:
        unlock(real)


def refresh_lock_target(agent: Path, key: str) -> Path:
    """The file whose ``.lock`` directory is pi's refresh lock for a server's state ``key``."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return agent / f"mcp-auth-refresh-{digest}"


async def acquire_refresh_lock(target: Path) -> None:
    """Take the refresh lock (waiting for another holder, breaking a stale lock); raises
    :class:`McpAuthLockBusy` after pi's wait."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    deadline = trio.current_time() + REFRESH_LOCK_WAIT_S
    while not try_lock(target, time.time(), REFRESH_LOCK_STALE_S):
        if trio.current_time() >= deadline:
            raise McpAuthLockBusy("Another process is refreshing the MCP server's tokens")
        await trio.sleep(REFRESH_LOCK_RETRY_S)


def renew_refresh_lock(target: Path) -> None:
    """Mark the held refresh lock as alive (before a request that may take a while)."""
    touch_lock(target)


def release_refresh_lock(target: Path) -> None:
    """Give the refresh lock back."""
    unlock(target)
