"""Open files of a host's live idle sessions: one descriptor each (the lease's lock file).

A daemon's session count is bounded by its open-files limit (issue 27: a hard limit of 20,000
stopped a daemon near 9,990 sessions when each held its session file and its lock file).
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from pitrio.actors.host import EvictionPolicy, HostedSession, HostHandle
from pitrio.actors.session_store.lease import lock_path
from tests.actors.test_host import agent_dir, running_host  # noqa: F401  (agent_dir: a fixture)

SESSIONS = 12


def open_targets() -> list[str]:
    """What this process's descriptors point at (files by path, others as the kernel names
    them)."""
    targets = []
    for name in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:
            continue  # the listing's own descriptor, closed by now
    return targets


def real_paths(paths: list[Path]) -> set[str]:
    """The paths as ``/proc/self/fd`` shows them (symlinks in the temp dir resolved)."""
    return {os.path.realpath(path) for path in paths}


async def prompted(host: HostHandle, text: str) -> HostedSession:
    hosted = await host.create(model="faux/echo")
    session = await hosted.session()
    await session.prompt(text)
    return hosted


async def settled(sessions: list[HostedSession]) -> None:
    with trio.fail_after(20):
        while any(hosted.running for hosted in sessions):  # noqa: ASYNC110 (actor-owned state)
            await trio.sleep(0.01)


async def test_a_live_idle_session_holds_one_descriptor(agent_dir: Path) -> None:  # noqa: F811
    async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=None)) as host:
        # One session first: what the first one opens once for all (caches, thread pool's
        # files, the session directory) is not counted against the others.
        first = await prompted(host, "warm")
        await settled([first])
        before = open_targets()
        sessions = [await prompted(host, f"session {index}") for index in range(SESSIONS)]
        await settled(sessions)
        after = open_targets()
        assert all(hosted.status == "live" for hosted in sessions)
        paths = [hosted.path for hosted in sessions if hosted.path is not None]
        assert len(paths) == SESSIONS and all(path.exists() for path in paths)
        files = real_paths(paths)
        locks = real_paths([lock_path(path) for path in paths])
        # No session file is held between batches; each lease's lock file is, once.
        assert [target for target in after if target in files] == []
        assert sorted(target for target in after if target in locks) == sorted(locks)
        assert len(after) - len(before) == SESSIONS
        # And the files were written: each holds its prompt and answer.
        for index, path in enumerate(paths):
            assert f"session {index}".encode() in path.read_bytes()
