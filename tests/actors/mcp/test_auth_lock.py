"""pi 1.6.0's locks on MCP OAuth state (proper-lockfile's ``<file>.lock`` directories whose
mtime is their age), as pitrio takes them. The race of real processes is in
tests/transports/test_mcp_oauth.py and, against pi, tests/interop/test_pi_mcp_oauth.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.mcp.auth_lock import (
    FILE_LOCK_STALE_S,
    REFRESH_LOCK_STALE_S,
    REFRESH_LOCK_WAIT_S,
    McpAuthLockBusy,
    acquire_refresh_lock,
    file_locked,
    refresh_lock_target,
    release_refresh_lock,
)
from pitrio.actors.mcp.oauth import CredentialFile


def _age(directory: Path, seconds: float) -> None:
    """Make a lock directory look last renewed ``seconds`` ago."""
    then = time.time() - seconds
    os.utime(directory, (then, then))


def test_the_refresh_lock_is_named_as_pi_names_it(tmp_path: Path) -> None:
    # What node computes for pi: createHash("sha256").update(key).digest("hex").slice(0, 16).
    target = refresh_lock_target(tmp_path, "mcp__remote|http://127.0.0.1:8080/mcp")
    assert target == tmp_path / "mcp-auth-refresh-c72cd456b8166d18"


async def test_a_held_refresh_lock_is_waited_for_and_then_taken(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    target = tmp_path / "mcp-auth-refresh-x"
    held = tmp_path / "mcp-auth-refresh-x.lock"
    held.mkdir()  # another process holds it, renewed just now
    taken_at: list[float] = []

    async def wait_for_it() -> None:
        await acquire_refresh_lock(target)
        taken_at.append(trio.current_time())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait_for_it)
        await trio.sleep(5)
        assert taken_at == []  # still waiting after 5 s
        held.rmdir()  # the holder lets go
    assert taken_at and 5 <= taken_at[0] < 5.2
    assert held.is_dir()  # ours now
    release_refresh_lock(target)
    assert not held.exists()


async def test_a_refresh_lock_held_for_the_whole_wait_is_busy(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    target = tmp_path / "mcp-auth-refresh-x"
    (tmp_path / "mcp-auth-refresh-x.lock").mkdir()
    start = trio.current_time()
    with pytest.raises(McpAuthLockBusy, match="Another process is refreshing"):
        await acquire_refresh_lock(target)
    assert trio.current_time() - start >= REFRESH_LOCK_WAIT_S
    assert (tmp_path / "mcp-auth-refresh-x.lock").is_dir()  # not ours to remove


async def test_a_refresh_lock_no_longer_renewed_is_taken_over(tmp_path: Path) -> None:
    target = tmp_path / "mcp-auth-refresh-x"
    held = tmp_path / "mcp-auth-refresh-x.lock"
    held.mkdir()
    _age(held, REFRESH_LOCK_STALE_S + 1)  # its holder was killed
    with trio.fail_after(1):
        await acquire_refresh_lock(target)
    assert time.time() - held.stat().st_mtime < 5  # a fresh lock, ours


def test_edits_of_mcp_auth_json_hold_its_lock(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "mcp-auth.json"
    file = CredentialFile(path)
    file.update("remote", "http://127.0.0.1:1/mcp", {"tokens": {"access_token": "a"}})
    lock = tmp_path / "agent" / "mcp-auth.json.lock"
    lock.mkdir()  # pi is reading or writing the file
    with pytest.raises(McpAuthLockBusy, match=r"mcp-auth\.json\.lock is held"):
        file.update("remote", "http://127.0.0.1:1/mcp", {"tokens": {"access_token": "b"}})
    with pytest.raises(McpAuthLockBusy):
        file.states()
    _age(lock, FILE_LOCK_STALE_S + 1)  # pi died holding it
    file.update("remote", "http://127.0.0.1:1/mcp", {"tokens": {"access_token": "b"}})
    assert not lock.exists()
    stored = json.loads(path.read_text())["mcp__remote|http://127.0.0.1:1/mcp"]
    assert stored["tokens"] == {"access_token": "b"}


def test_a_symlinked_mcp_auth_json_is_locked_and_written_at_its_target(tmp_path: Path) -> None:
    target = tmp_path / "store" / "real-auth.json"
    target.parent.mkdir()
    target.write_text("{}")
    link = tmp_path / "agent" / "mcp-auth.json"
    link.parent.mkdir()
    link.symlink_to(target)
    with file_locked(link) as real:
        assert real == target
        assert (tmp_path / "store" / "real-auth.json.lock").is_dir()  # where pi locks it
    CredentialFile(link).update("remote", "http://127.0.0.1:1/mcp", {"tokens": {"x": "y"}})
    assert link.is_symlink()
    assert "mcp__remote|http://127.0.0.1:1/mcp" in json.loads(target.read_text())
