"""The host actor: create, list, close, delete, lazy open, idle eviction, crash restarts."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.host import (
    EvictionPolicy,
    HostConfig,
    HostHandle,
    InvalidSessionIdError,
    RestartPolicy,
    SessionFailedError,
    start_host,
)
from pitrio.actors.host.feed import Outgoing
from pitrio.actors.model_router import FauxProvider, start_model_router
from pitrio.actors.model_router.actor import RouterConfig
from pitrio.actors.session.actor import SessionActor
from pitrio.errors import SessionNotFoundError
from tests.stray_cancel import no_stray_cancel


@pytest.fixture(autouse=True)
def agent_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    agent = tmp_path / "agent"
    monkeypatch.setenv("PITRIO_AGENT_DIR", str(agent))
    monkeypatch.delenv("PITRIO_SESSION_DIR", raising=False)
    return agent


@asynccontextmanager
async def running_host(agent: Path, **config: object) -> AsyncIterator[HostHandle]:
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, FauxProvider(), config=RouterConfig(agent_dir=None)
        )
        cwd = agent.parent / "work"
        cwd.mkdir(exist_ok=True)
        host = await start_host(
            nursery,
            router,
            HostConfig(agent_dir=agent, default_cwd=str(cwd), **config),  # type: ignore[arg-type]
        )
        with no_stray_cancel():
            yield host
        await host.shutdown()
        nursery.cancel_scope.cancel()


@pytest.fixture
def mock_clock(mock_clock: trio.testing.MockClock) -> trio.testing.MockClock:
    # Real time passes (threads and files take it); jumps move past idle and restart windows.
    mock_clock.rate = 1.0
    return mock_clock


async def wait_for(condition: Callable[[], bool], seconds: float = 20.0) -> None:
    with trio.fail_after(seconds):
        while not condition():  # noqa: ASYNC110 (polls state owned by actors)
            await trio.sleep(0.01)


async def boom(actor: SessionActor) -> None:
    raise RuntimeError("boom")


async def test_create_prompt_list_and_reopen_after_close(agent_dir: Path) -> None:
    async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=None)) as host:
        hosted = await host.create(model="faux/echo", name="first")
        assert hosted.status == "live"
        session = await hosted.session()
        await session.prompt("hello")
        assert hosted.path is not None and hosted.path.exists()
        rows = await host.list()
        assert [row["id"] for row in rows] == [hosted.id]
        row = rows[0]
        # pi 1.6.0 counts every message entry: the leading system message, the prompt, the reply.
        assert row["name"] == "first" and row["messageCount"] == 3
        assert row["firstMessage"] == "hello" and row["status"] == "live"
        await host.close(hosted.id)
        assert hosted.status == "evicted"
        again = await host.open(hosted.id)
        assert again is hosted and hosted.status == "live"
        messages = await (await hosted.session()).messages()
        assert [m.role for m in messages] == ["system", "user", "assistant"]


async def test_a_closed_sessions_tree_is_freed_by_the_close(agent_dir: Path) -> None:
    # The stopped tree is cyclic garbage. With the automatic collector off, it is freed only
    # by the host's own young-generation collection when the tree has stopped; the tree is
    # made after a full collection, so it is young then.
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=None)) as host:
            hosted = await host.create(model="faux/echo")
            await (await hosted.session()).prompt("hello")
            assert hosted.started is not None
            store = weakref.ref(hosted.started.store._address._actor)
            assert store() is not None
            await host.close(hosted.id)
            assert hosted.status == "evicted"
            assert store() is None
            again = await host.open(hosted.id)
            messages = await (await again.session()).messages()
            assert [m.role for m in messages] == ["system", "user", "assistant"]
    finally:
        if enabled:
            gc.enable()


async def test_unknown_and_invalid_ids(agent_dir: Path) -> None:
    async with running_host(agent_dir) as host:
        with pytest.raises(SessionNotFoundError):
            await host.get("01a22911-0398-732e-aaa3-d4fe9792e2a7")
        with pytest.raises(InvalidSessionIdError):
            await host.get("../../etc/passwd")


async def test_sessions_on_disk_are_found_by_id(agent_dir: Path) -> None:
    async with running_host(agent_dir) as host:
        hosted = await host.create()
        await (await hosted.session()).prompt("persist me")
        session_id = hosted.id
    # A new host (a restarted daemon) finds the file by id and lists it as evicted.
    async with running_host(agent_dir) as host:
        rows = await host.list()
        assert rows[0]["id"] == session_id and rows[0]["status"] == "evicted"
        reopened = await host.open(session_id)
        messages = await (await reopened.session()).messages()
        # pi 1.6.0: the context starts with the session's system message.
        assert [m.role for m in messages] == ["system", "user", "assistant"]


async def test_delete_removes_the_file(agent_dir: Path) -> None:
    async with running_host(agent_dir) as host:
        hosted = await host.create()
        client = hosted.attach()
        await (await hosted.session()).prompt("bye")
        assert hosted.path is not None
        path = hosted.path
        await host.delete(hosted.id)
        assert not path.exists() and not path.with_name(path.name + ".lock").exists()
        assert await host.list() == []
        kinds = []
        while (item := client.feed.take()) is not None:
            if isinstance(item, Outgoing):
                kinds.append(item.payload["type"])
        assert kinds[-1] == "session_closed"
        with pytest.raises(SessionNotFoundError):
            await host.get(hosted.id)


async def test_idle_session_is_evicted_and_reopened(
    agent_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=60)) as host:
        hosted = await host.create()
        await (await hosted.session()).prompt("remember me")
        client = hosted.attach()
        mock_clock.jump(120)
        await trio.sleep(0.2)  # the evictor wakes and passes
        assert hosted.status == "live"  # a client is attached
        client.detach()
        mock_clock.jump(120)
        await wait_for(lambda: hosted.status == "evicted")
        seq = hosted.seq
        messages = await (await hosted.session()).messages()
        # pi 1.6.0: the context starts with the session's system message.
        assert [m.role for m in messages] == ["system", "user", "assistant"]
        assert hosted.seq == seq  # numbering continues after a reopen


async def test_unwritten_session_survives_eviction(
    agent_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=60)) as host:
        hosted = await host.create(model="faux/faux-think", thinking_level="high")
        named = await host.create(name="draft")
        assert not hosted.persisted
        # Issue 21: a name is acknowledged, so it is written at once (a file of its own).
        assert named.persisted
        mock_clock.jump(120)
        await wait_for(lambda: hosted.status == "evicted" and named.status == "evicted")
        state = await (await hosted.session()).state()
        assert (state.agent.model.id, state.agent.thinking_level) == ("faux-think", "high")
        assert state.session_id == hosted.id
        state = await (await named.session()).state()
        assert state.session_name == "draft" and state.session_id == named.id


async def test_crash_restarts_then_fails(
    agent_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    policy = RestartPolicy(max_restarts=3, window=60)
    async with running_host(agent_dir, restart=policy) as host:
        hosted = await host.create()
        await (await hosted.session()).prompt("survive")
        client = hosted.attach()
        for attempt in range(1, 4):
            session = await hosted.session()
            with pytest.raises(Exception):  # noqa: B017 - the actor dies answering
                await session.invoke(boom)
            with trio.fail_after(5):
                while hosted.started is None or hosted.started.session is session:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            assert hosted.restarts == attempt
            # Restarted from its file: the conversation (pi 1.6.0: with its leading system
            # message) is still there.
            messages = await (await hosted.session()).messages()
            assert [m.role for m in messages] == ["system", "user", "assistant"]
            mock_clock.jump(1)
        with pytest.raises(Exception):  # noqa: B017
            await (await hosted.session()).invoke(boom)
        with trio.fail_after(5):
            while hosted.status != "failed":  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert hosted.failure == "RuntimeError: boom"
        with pytest.raises(SessionFailedError, match="boom"):
            await hosted.session()
        notices = []
        while (item := client.feed.take()) is not None:
            if isinstance(item, Outgoing):
                notices.append(item.payload["type"])
        assert notices == ["attached", *["session_restarted"] * 3, "session_failed"]
        # close forgets the failure: the session can be opened again.
        await host.close(hosted.id)
        messages = await (await hosted.session()).messages()
        assert [m.role for m in messages] == ["system", "user", "assistant"]


async def test_restart_window_slides(agent_dir: Path, mock_clock: trio.testing.MockClock) -> None:
    async with running_host(agent_dir, restart=RestartPolicy(max_restarts=1, window=60)) as host:
        hosted = await host.create()
        for _ in range(3):  # one crash a minute is within the intensity
            session = await hosted.session()
            with pytest.raises(Exception):  # noqa: B017
                await session.invoke(boom)
            await wait_for(
                lambda s=session: (
                    hosted.started is not None  # type: ignore[misc]
                    and hosted.started.session is not s
                )
            )
            mock_clock.jump(61)
        assert hosted.restarts == 3 and hosted.status == "live"


async def test_two_hundred_sessions_evicted_and_reopened(
    agent_dir: Path, mock_clock: trio.testing.MockClock
) -> None:
    started = time.monotonic()
    async with running_host(agent_dir, eviction=EvictionPolicy(idle_seconds=60)) as host:
        sessions = []

        async def make(index: int) -> None:
            hosted = await host.create()
            await (await hosted.session()).prompt(f"session {index}")
            sessions.append((index, hosted))

        limiter = trio.CapacityLimiter(16)

        async def limited(index: int) -> None:
            async with limiter:
                await make(index)

        async with trio.open_nursery() as nursery:
            for index in range(200):
                nursery.start_soon(limited, index)
        assert len({hosted.id for _, hosted in sessions}) == 200
        # Each session's last events (agent_settled) count as activity: let them arrive.
        await wait_for(lambda: not any(hosted.running for _, hosted in sessions))
        await trio.sleep(0.1)
        mock_clock.jump(120)
        await wait_for(lambda: all(hosted.status == "evicted" for _, hosted in sessions))
        stats = await host.host_stats()
        assert stats.sessions == {"evicted": 200} and stats.evictions_total == 200

        async def reopen(index: int, hosted: object) -> None:
            async with limiter:
                from pitrio.actors.host import HostedSession

                assert isinstance(hosted, HostedSession)
                handle = await (await host.open(hosted.id)).session()
                messages = await handle.messages()
                assert [m.role for m in messages] == ["system", "user", "assistant"]
                assert messages[1].content[0].text == f"session {index}"  # type: ignore[union-attr]

        async with trio.open_nursery() as nursery:
            for index, hosted in sessions:
                nursery.start_soon(reopen, index, hosted)
        assert (await host.host_stats()).sessions == {"live": 200}
        assert len(await host.list()) == 200
    assert time.monotonic() - started < 60


async def test_a_crash_restart_reads_the_command_ids_again_from_what_was_stored(
    agent_dir: Path,
) -> None:
    # An id the crashed tree answered but whose entry never reached the store (a prompt
    # accepted while the database was down) must not be answered "done" after the restart:
    # the client's repeat is applied (found by the chaos run, tests/faults/test_chaos.py).
    from pitrio.sdk.session import Fresh
    from pitrio.transports.rpc.once import hosted_ledger

    async with running_host(agent_dir) as host:
        hosted = await host.create()
        await (await hosted.session()).prompt("stored")
        ledger = await hosted_ledger(hosted)
        ledger.begin("lost", "fp")
        ledger.finish("lost", "fp", {"success": True, "data": {"disposition": "started"}})
        session = await hosted.session()
        with pytest.raises(Exception):  # noqa: B017 - the actor dies answering
            await session.invoke(boom)
        await wait_for(lambda: hosted.restarts == 1 and hosted.status == "live")
        again = await hosted_ledger(hosted)
        assert again is not ledger
        assert isinstance(again.begin("lost", "fp"), Fresh)
