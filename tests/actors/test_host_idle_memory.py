"""What a live idle session of a host holds (issue 38: 10,000 idle sessions <= 100 KB each).

Measured in this process with tracemalloc, not by timing: each session is created and prompted
once with the faux model, as ``bench/daemon_idle.py`` does over the websocket API.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections import Counter
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import trio

from pitrio.actors.host import EvictionPolicy, HostHandle
from pitrio.messages.shared import MIN_SHARED
from pitrio.transports.daemon.frames import delta_frame
from tests.actors.test_host import agent_dir, running_host  # noqa: F401  (agent_dir: a fixture)
from tests.actors.test_host_descriptors import prompted, settled

MEASURED = 8
BOUND_KB = 118
"""In-process KB per idle session, counting what the first few sessions still add to shared
tables and caches (the faux model's prompt cache: ~4.5 KB a session here). 106 KB now (the
host's relay a sink of the session's outlet, no store-notice forwarder or writer task while
idle), 119-120 KB before that, 146 KB before a system message's sections and tools were
shared; over 60 sessions 107 and 134 KB for those two (``bench/daemon_idle.py`` measures RSS
per session over thousands)."""


def idle_host(agent: Path) -> AbstractAsyncContextManager[HostHandle]:
    """A host as ``pitrio serve`` runs one: no eviction, the daemon's frames in its replay."""
    return running_host(agent, eviction=EvictionPolicy(idle_seconds=None), encode_frame=delta_frame)


async def test_idle_sessions_share_the_system_message_in_their_replay(agent_dir: Path) -> None:  # noqa: F811
    async with idle_host(agent_dir) as host:
        sessions = [await prompted(host, f"hello {index}") for index in range(2)]
        await settled(sessions)
        held = [hosted.replay._frames for hosted in sessions]  # the buffer's own items
        pieced = [[frame for frame in frames if isinstance(frame, tuple)] for frames in held]
        # message_start, message_end, entry_appended of the system message, and agent_end.
        assert [len(frames) for frames in pieced] == [4, 4]
        big = [
            {id(piece) for frame in frames for piece in frame if len(piece) >= MIN_SHARED}
            for frames in pieced
        ]
        # The sections and the tools: one copy for both sessions (and all four frames).
        assert len(big[0] & big[1]) == 2
        # A resume gets every frame whole, as it was sent.
        frames = sessions[0].replay.since(0)
        assert frames is not None and all(type(frame) is bytes for frame in frames)
        assert b'"role":"system"' in frames[2] and frames[-1].startswith(b'{"type":"agent_settled"')


async def test_an_idle_session_holds_less_than_the_bound(agent_dir: Path) -> None:  # noqa: F811
    async with idle_host(agent_dir) as host:
        # Two first: what the first sessions load and cache once is not counted.
        warm = [await prompted(host, f"warm {index}") for index in range(2)]
        await settled(warm)
        gc.collect()
        tracemalloc.start(1)
        try:
            before = tracemalloc.get_traced_memory()[0]
            sessions = [await prompted(host, f"hello {index}") for index in range(MEASURED)]
            await settled(sessions)
            gc.collect()
            per_session = (tracemalloc.get_traced_memory()[0] - before) / MEASURED / 1024
        finally:
            tracemalloc.stop()
        assert all(hosted.status == "live" for hosted in sessions)
        assert per_session < BOUND_KB, f"{per_session:.1f} KB per idle session"


IDLE_TASKS = 7
"""Tasks of a live idle hosted session: the host's supervisor, five actor loops and the event
pump. 10 before the host's relay became a sink of the session's outlet (an outlet feeder
task, its buffer and a relay channel), the store's notices a hand-off to a task started for
them (a forwarder task and its channel) and the store's writer a task started when something
is queued (issue 38)."""


def task_names() -> Counter[str]:
    """The names of every task of this run, counted."""
    names: Counter[str] = Counter()
    tasks = [trio.lowlevel.current_root_task()]
    while tasks:
        task = tasks.pop()
        names[task.name] += 1
        tasks.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return names


async def test_an_idle_hosted_session_runs_only_its_actors_and_pump(agent_dir: Path) -> None:  # noqa: F811
    async with idle_host(agent_dir) as host:
        warm = await prompted(host, "warm")
        await settled([warm])
        before = task_names()
        sessions = [await prompted(host, f"hello {index}") for index in range(3)]
        await settled(sessions)
        added = task_names() - before
        assert all(hosted.status == "live" for hosted in sessions)
        assert sum(added.values()) == 3 * IDLE_TASKS, added
        idle = ("._feed", "._forward_notices", "._writer")
        assert not [name for name in added if name.endswith(idle)], added
        # Every event still reached the host, numbered in order, in its replay.
        frames = sessions[0].replay.since(0)
        assert frames is not None and len(frames) == sessions[0].seq
        assert frames[-1].startswith(b'{"type":"agent_settled"')


def test_an_idle_sessions_objects_keep_their_fields_in_slots() -> None:
    from pitrio.actors.agent_loop.actor import AgentLoop
    from pitrio.actors.session.actor import SessionActor
    from pitrio.actors.session.cache_warmer import CacheWarmer
    from pitrio.actors.session.driver import RunDriver
    from pitrio.actors.session.maintenance import MaintenanceGate
    from pitrio.actors.session.notices import StoreNotices
    from pitrio.actors.session.operations import SessionOperations
    from pitrio.actors.session.pump import EventPump
    from pitrio.actors.session.shell import UserShell
    from pitrio.actors.session.warming import SessionWarming
    from pitrio.actors.session_store.actor import SessionStore
    from pitrio.actors.session_store.projection import Projection
    from pitrio.actors.session_store.tree import SessionTree
    from pitrio.actors.supervisor.actor.shell import Supervisor
    from pitrio.messages.transcript import SystemReplay

    kept = (AgentLoop, SessionActor, CacheWarmer, RunDriver, MaintenanceGate, StoreNotices)
    kept += (SessionOperations, EventPump, UserShell, SessionWarming, SessionStore, Projection)
    kept += (SessionTree, Supervisor, SystemReplay)
    # One of each per idle session: no instance dict (the session actor's, past 30 fields,
    # was 1.6 KB; the others' values arrays cost more than slots), a weak reference kept.
    assert [kind.__name__ for kind in kept if kind.__dictoffset__ != 0] == []
    assert [kind.__name__ for kind in kept if kind.__weakrefoffset__ == 0] == []


async def test_an_idle_sessions_actors_keep_no_set_of_pending_replies(agent_dir: Path) -> None:  # noqa: F811
    async with idle_host(agent_dir) as host:
        sessions = [await prompted(host, f"hello {index}") for index in range(2)]
        await settled(sessions)
        for hosted in sessions:
            started = hosted.started
            assert started is not None
            handles = (started.session, started.loop, started.store, started.tools)
            actors = [handle._address._actor for handle in handles]  # type: ignore[attr-defined]
            # No reply in flight, so no set (216 bytes an actor): the next call makes one.
            assert [actor.address.link.pending for actor in actors] == [None] * 4
