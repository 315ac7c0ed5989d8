"""Several daemons on one PostgreSQL database (``pitrio serve --store postgresql://...``).

Daemon A is a real ``pitrio serve`` process (so it can be killed with SIGKILL: no lease is
released, nothing is flushed); daemon B runs in this process. Also: a database restart in the
middle of a run, and the pool and lease metrics.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import trio
from trio_websocket import open_websocket_url

from pitrio.actors.host import HostConfig
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.model_router.actor import RouterConfig
from pitrio.transports.daemon.server import DaemonConfig
from pitrio.transports.serve import Daemon, open_daemon
from tests.actors.pg_cluster import fresh_database, shared_cluster
from tests.stray_cancel import no_stray_cancel
from tests.transports.daemon_harness import is_response, receive, send, settled, until

PITRIO = str(Path(sys.executable).parent / "pitrio")
LEASE = 1.0


@pytest.fixture
def database() -> str:
    pytest.importorskip("psycopg")
    shared_cluster()
    return fresh_database()


def backend_options(lease: float = LEASE) -> Any:
    from pitrio.actors.session_store.postgres.backend import BackendOptions
    from pitrio.actors.session_store.postgres.lease import LeaseTerms

    return BackendOptions(terms=LeaseTerms(duration=lease), catch_up_interval=0.5)


@asynccontextmanager
async def in_process_daemon(tmp_path: Path, url: str, name: str) -> AsyncIterator[Daemon]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    config = DaemonConfig(port=0, token=None)
    host = HostConfig(agent_dir=tmp_path / name, default_cwd=str(work))
    async with open_daemon(
        config,
        host,
        faux=FauxProvider(),
        router_config=RouterConfig(agent_dir=None),
        store=url,
        store_options=backend_options(),
    ) as daemon:
        with no_stray_cancel():
            yield daemon


class Lines:
    """Lines of a process's output as they come."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def until(self, pattern: str, seconds: float = 30.0) -> re.Match[str]:
        with trio.fail_after(seconds):
            while True:
                while b"\n" not in self.buffer:
                    chunk = await self.stream.receive_some(65536)
                    if not chunk:
                        raise AssertionError(f"the daemon ended before {pattern!r}")
                    self.buffer += chunk
                line, self.buffer = self.buffer.split(b"\n", 1)
                if match := re.search(pattern, line.decode("utf-8", "replace")):
                    return match


async def prompt(ws_url: str, session_id: str, text: str) -> list[dict[str, Any]]:
    """Attach to the session, prompt, return the frames up to the run's settle."""
    async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
        hello = await receive(ws)
        assert hello["type"] == "attached", hello
        await send(ws, {"id": "p", "type": "prompt", "message": text})
        return await until(ws, settled)


async def create(ws_url: str) -> str:
    async with open_websocket_url(f"{ws_url}/v1/host") as host:
        await receive(host)
        await send(host, {"id": "c", "type": "create"})
        frames = await until(host, is_response("c"))
    assert frames[-1]["success"], frames[-1]
    session_id: str = frames[-1]["data"]["sessionId"]
    return session_id


async def messages(ws_url: str, session_id: str) -> list[dict[str, Any]]:
    async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
        await receive(ws)
        await send(ws, {"id": "m", "type": "get_messages"})
        frames = await until(ws, is_response("m"))
    result: list[dict[str, Any]] = frames[-1]["data"]["messages"]
    return result


def texts(found: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in found:
        content = message.get("content")
        text = (
            content
            if isinstance(content, str)
            else "".join(
                block.get("text", "") for block in content or [] if isinstance(block, dict)
            )
        )
        out.append(f"{message['role']}:{text}")
    return out


async def taken_over(ws_url: str, session_id: str) -> None:
    """Return once the daemon at ``ws_url`` runs the session (it takes it over when the
    owner's lease has expired; until then a client is told who owns it)."""
    with trio.fail_after(15):
        while True:
            async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
                hello = await receive(ws)
            if hello["type"] == "attached":
                return
            assert hello["type"] == "session_owned_elsewhere", hello
            await trio.sleep(0.2)


@asynccontextmanager
async def serve_process(
    tmp_path: Path, url: str, name: str, *extra: str
) -> AsyncIterator[tuple[trio.Process, str]]:
    """A real ``pitrio serve`` process on the database (migrated first) and its URL
    (``extra``: more options, which win over these)."""
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / name)}
    env.pop("PITRIO_SESSION_DIR", None)
    migrate = await trio.run_process(
        [PITRIO, "db", "migrate", "--store", url],
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert migrate.returncode == 0 and b"up to date" in migrate.stdout, migrate
    # One process (--workers 1): these tests pause or kill the daemon's process and watch
    # its leases (with workers, the acceptor's pid holds none; tests/transports/
    # test_serve_workers.py covers workers).
    command = [
        PITRIO, "serve", "--port", "0", "--no-auth", "--store", url,
        "--lease-seconds", str(LEASE), "--cwd", str(tmp_path), "--workers", "1", *extra,
    ]  # fmt: skip
    async with trio.open_nursery() as nursery:
        process: trio.Process = await nursery.start(
            functools.partial(
                trio.run_process,
                command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        )
        try:
            assert process.stdout is not None
            found = await Lines(process.stdout).until(r"listening on (http://\S+)")
            with no_stray_cancel():
                yield process, found.group(1)
        finally:
            if process.returncode is None:
                process.kill()


async def test_a_killed_owners_session_moves_to_another_daemon(
    database: str, tmp_path: Path
) -> None:
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent-a")}  # as serve_process's
    env.pop("PITRIO_SESSION_DIR", None)
    async with serve_process(tmp_path, database, "agent-a") as (process, url_a):
        ws_a = url_a.replace("http://", "ws://").rstrip("/")
        session_id = await create(ws_a)
        await prompt(ws_a, session_id, "one")
        async with in_process_daemon(tmp_path, database, "agent-b") as daemon_b:
            ws_b = f"ws://127.0.0.1:{daemon_b.port}"
            # B does not run A's session: its client is told who does, then follows it.
            async with open_websocket_url(f"{ws_b}/v1/sessions/{session_id}") as follower:
                notice = await receive(follower)
                assert notice["type"] == "session_owned_elsewhere", notice
                assert notice["url"] == url_a
                await send(follower, {"id": "x", "type": "prompt", "message": "no"})
                refused = await receive(follower)
                assert refused["success"] is False and url_a in refused["error"]
                await prompt(ws_a, session_id, "two")
                followed = []
                while len(followed) < 2:  # the user message and the reply, as committed
                    frame = await receive(follower)
                    assert frame["type"] == "entry_appended", frame
                    followed.append(frame)
                assert [f["entrySeq"] for f in followed] == [
                    notice["entrySeq"] + 1,
                    notice["entrySeq"] + 2,
                ]
                assert followed[0]["entry"]["message"]["content"][0]["text"] == "two"
            # A dies without releasing anything. Once its lease expires, B takes over.
            process.send_signal(signal.SIGKILL)
            await process.wait()
            await taken_over(ws_b, session_id)
            await prompt(ws_b, session_id, "three")
            found = texts(await messages(ws_b, session_id))
            # pi 1.6.0: the system message leads (its prompt is in sections, no content).
            assert found == [
                "system:", "user:one", "assistant:one", "user:two", "assistant:two",
                "user:three", "assistant:three",
            ]  # fmt: skip
            async with httpx.AsyncClient() as client:
                got = await client.get(f"http://127.0.0.1:{daemon_b.port}/metrics")
            metrics = got.text
            assert re.search(r"^pitrio_pg_leases_taken_over_total 1$", metrics, re.M)
            assert re.search(r"^pitrio_pg_leases_held 1$", metrics, re.M)
            assert re.search(r"^pitrio_pg_pool_size [1-9]", metrics, re.M)
    # What the database holds: every entry once, numbered without a gap.
    exported = await trio.run_process(
        [PITRIO, "sessions", "export", session_id, "--jsonl", "--store", database],
        env=env,
        capture_stdout=True,
    )
    lines = exported.stdout.splitlines()
    entries = [orjson.loads(line) for line in lines[1:]]
    ids = [entry["id"] for entry in entries]
    assert len(ids) == len(set(ids))
    users = [
        entry["message"]["content"][0]["text"]
        for entry in entries
        if entry.get("message", {}).get("role") == "user"
    ]
    assert users == ["one", "two", "three"]


async def test_a_database_restart_pauses_a_run_and_loses_nothing(
    database: str, tmp_path: Path
) -> None:
    cluster = shared_cluster()
    async with in_process_daemon(tmp_path, database, "agent") as daemon:
        ws_url = f"ws://127.0.0.1:{daemon.port}"
        session_id = await create(ws_url)
        await prompt(ws_url, session_id, "before")  # stored: it has a reply
        async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await trio.to_thread.run_sync(cluster.stop, "fast")
            try:
                await send(ws, {"id": "p", "type": "prompt", "message": "during"})
                # The user message cannot be stored: the run waits, clients are told why.
                await until(ws, lambda f: f.get("type") == "store_unavailable")
            finally:
                await trio.to_thread.run_sync(cluster.start)
            frames = await until(ws, settled, seconds=30)
            kinds = [frame.get("type") for frame in frames]
            assert "store_available" in kinds
            assert kinds.index("store_available") < kinds.index("agent_end")
        found = texts(await messages(ws_url, session_id))
        # pi 1.6.0: the system message leads (its prompt is in sections, no content).
        assert found == [
            "system:", "user:before", "assistant:before", "user:during", "assistant:during",
        ]  # fmt: skip
    # Reopened from the database by a fresh daemon: the same transcript.
    async with in_process_daemon(tmp_path, database, "agent-2") as again:
        reopened = texts(await messages(f"ws://127.0.0.1:{again.port}", session_id))
    assert reopened == found


BUSY_HOOK = """
import time


def setup(api):
    def busy(event, ctx):
        # CPU-bound, on the session's event loop, never yielding: three leases long.
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            sum(range(200))
        return None

    api.on("before_agent_start", busy)
"""


async def test_a_cpu_bound_hook_does_not_starve_the_sessions_lease(
    database: str, tmp_path: Path
) -> None:
    # Issue 36, item 2, through a real daemon: an extension's hook keeps the daemon's event
    # loop busy for 3 s at every prompt (the lease lasts 1 s) while a rival daemon tries to
    # take the session every 50 ms; the lease keeper's thread renews it all along.
    from tests.actors.test_session_store_postgres_lease import Rival

    extensions = tmp_path / "agent" / "extensions"
    extensions.mkdir(parents=True)
    async with in_process_daemon(tmp_path, database, "agent") as daemon:
        ws_url = f"ws://127.0.0.1:{daemon.port}"
        session_id = await create(ws_url)
        await prompt(ws_url, session_id, "before")  # stored, its lease held from now on
        (extensions / "busy.py").write_text(BUSY_HOOK)
        async with open_websocket_url(f"{ws_url}/v1/host") as host:
            await receive(host)
            await send(host, {"id": "x", "type": "close", "sessionId": session_id})
            assert (await until(host, is_response("x")))[-1]["success"]
        # Opened again (with the hook; its lease taken), then prompted: the hook runs first.
        rival = Rival(database, session_id)
        async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
            assert (await receive(ws))["type"] == "attached"
            rival.start()
            try:
                await send(ws, {"id": "p", "type": "prompt", "message": "during"})
                frames = await until(ws, settled, seconds=30)
            finally:
                rival.stop.set()
                await trio.to_thread.run_sync(rival.join)
        kinds = [frame.get("type") for frame in frames]
        assert "session_read_only" not in kinds and "session_owned_elsewhere" not in kinds
        assert rival.taken_at is None, f"the rival took the session at {rival.taken_at:.2f} s"
        # It tried all through the busy hook (3 s): over 2.5 s of it, never a whole
        # lease (1 s) between two attempts (a count of attempts depends on the machine's load).
        tried = rival.tried_at
        assert tried[-1] - tried[0] >= 2.5
        assert max(b - a for a, b in itertools.pairwise(tried)) < 1.0
        found = texts(await messages(ws_url, session_id))
    assert found[-2:] == ["user:during", "assistant:during"]


async def test_a_client_is_told_at_once_when_its_session_loses_the_lease(
    database: str, tmp_path: Path
) -> None:
    # Issue 36, item 2: another daemon forces the lease away while a client is attached and
    # idle; the lease keeper's next renewal finds it and the daemon hands the session over at
    # once: the client is told session_owned_elsewhere naming the new owner without sending
    # anything (it got session_read_only instead, before the hand-over was restored), the
    # session is unloaded here, a prompt is refused naming the owner, nothing more is stored.
    from tests.actors.test_session_store_postgres_lease import Rival

    async with in_process_daemon(tmp_path, database, "agent") as daemon:
        ws_url = f"ws://127.0.0.1:{daemon.port}"
        session_id = await create(ws_url)
        await prompt(ws_url, session_id, "before")
        async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
            await receive(ws)
            rival = Rival(database, session_id, take_over=True)
            rival.start()
            await trio.to_thread.run_sync(rival.join)
            frames = await until(ws, is_owned_elsewhere, seconds=5)
            assert frames[-1]["owner"] == "rival" and frames[-1]["sessionId"] == session_id
            assert "owned by daemon rival" in frames[-1]["reason"]
            assert await session_status(ws_url, session_id) == "evicted"
            await send(ws, {"id": "p", "type": "prompt", "message": "after"})
            refused = (await until(ws, is_response("p")))[-1]
            assert not refused["success"] and "owned by daemon rival" in refused["error"]
    stored = await trio.to_thread.run_sync(functools.partial(stored_lines, database, session_id))
    assert [line["message"]["role"] for line in stored if line["type"] == "message"] == [
        "system",
        "user",
        "assistant",
    ]
    users = [
        line["message"]["content"]
        for line in stored
        if line.get("message", {}).get("role") == "user"
    ]
    assert [block["text"] for content in users for block in content] == ["before"]


async def test_a_paused_owners_client_follows_the_session_to_the_daemon_that_took_it(
    database: str, tmp_path: Path
) -> None:
    # Issue 36: daemon A (a real process) is paused (SIGSTOP) past its lease while a client is
    # attached; daemon B takes the session over. When A runs again its lease keeper's renewal
    # is refused and A hands the session over at once: the client is told
    # session_owned_elsewhere with B's id and url, reconnects there and goes on; every entry
    # is stored once. On the code before the hand-over A only turned read-only.
    async with serve_process(tmp_path, database, "agent-a") as (process, url_a):
        ws_a = url_a.replace("http://", "ws://").rstrip("/")
        session_id = await create(ws_a)
        await prompt(ws_a, session_id, "one")
        async with (
            in_process_daemon(tmp_path, database, "agent-b") as daemon_b,
            open_websocket_url(f"{ws_a}/v1/sessions/{session_id}") as client,
        ):
            assert (await receive(client))["type"] == "attached"
            ws_b = f"ws://127.0.0.1:{daemon_b.port}"
            process.send_signal(signal.SIGSTOP)
            try:
                await taken_over(ws_b, session_id)
            finally:
                process.send_signal(signal.SIGCONT)
            frames = await until(client, is_owned_elsewhere, seconds=10)
            notice = frames[-1]
            assert notice["url"] == daemon_b.server.url, notice
            assert notice["owner"] != "" and notice["sessionId"] == session_id
            # Where it says: the client goes on with B at once.
            await prompt(notice["url"].replace("http://", "ws://").rstrip("/"), session_id, "two")
            await send(client, {"id": "x", "type": "prompt", "message": "no"})
            refused = (await until(client, is_response("x")))[-1]
            assert not refused["success"] and daemon_b.server.url in refused["error"]
            found = texts(await messages(ws_b, session_id))
    assert found == ["system:", "user:one", "assistant:one", "user:two", "assistant:two"]
    stored = await trio.to_thread.run_sync(functools.partial(stored_lines, database, session_id))
    ids = [line["id"] for line in stored]
    assert len(ids) == len(set(ids))


async def test_a_repeated_command_id_is_recognised_by_the_daemon_a_session_failed_over_to(
    database: str, tmp_path: Path
) -> None:
    # Issue 36, item 1: the prompt's id is stored with its user entry, so the daemon that
    # takes the session over after its owner died answers the client's resent prompt with
    # the first answer and runs nothing.
    async with serve_process(tmp_path, database, "agent-a") as (process, url_a):
        ws_a = url_a.replace("http://", "ws://").rstrip("/")
        session_id = await create(ws_a)
        frames = await prompt(ws_a, session_id, "one")
        (answer,) = [frame for frame in frames if is_response("p")(frame)]
        assert answer["data"] == {"disposition": "started"}
        async with in_process_daemon(tmp_path, database, "agent-b") as daemon_b:
            process.send_signal(signal.SIGKILL)
            await process.wait()
            ws_b = f"ws://127.0.0.1:{daemon_b.port}"
            await taken_over(ws_b, session_id)
            async with open_websocket_url(f"{ws_b}/v1/sessions/{session_id}") as ws:
                assert (await receive(ws))["type"] == "attached"
                await send(ws, {"id": "p", "type": "prompt", "message": "one"})
                repeat = (await until(ws, is_response("p")))[-1]
                assert repeat == {**answer, "duplicate": True}
                await send(ws, {"id": "q", "type": "prompt", "message": "two"})
                await until(ws, settled)
            found = texts(await messages(ws_b, session_id))
    assert found == ["system:", "user:one", "assistant:one", "user:two", "assistant:two"]
    stored = await trio.to_thread.run_sync(functools.partial(stored_lines, database, session_id))
    stamps = [line["pitrioCommand"]["id"] for line in stored if "pitrioCommand" in line]
    assert stamps == ["p", "q"]


def is_owned_elsewhere(frame: dict[str, Any]) -> bool:
    return frame.get("type") == "session_owned_elsewhere"


async def session_status(ws_url: str, session_id: str) -> str:
    """The session's status in the daemon's listing (``evicted``: not loaded)."""
    async with open_websocket_url(f"{ws_url}/v1/host") as host:
        await receive(host)
        await send(host, {"id": "l", "type": "list"})
        frames = await until(host, is_response("l"))
    rows = [row for row in frames[-1]["data"]["sessions"] if row.get("id") == session_id]
    status: str = rows[0]["status"]
    return status


def stored_lines(url: str, session_id: str) -> list[dict[str, Any]]:
    """The session's entries as the database holds them (the rival holds its lease)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT payload::text FROM pitrio_entries WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    return [orjson.loads(row[0]) for row in rows]


async def test_serve_refuses_an_unmigrated_database(tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    url = shared_cluster().new_database()
    env = {**os.environ, "PITRIO_AGENT_DIR": str(tmp_path / "agent")}
    result = await trio.run_process(
        [PITRIO, "serve", "--port", "0", "--no-auth", "--store", url],
        env=env,
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )
    assert result.returncode == 1
    assert b"pitrio db migrate" in result.stderr


async def test_a_database_session_exports_to_html_like_a_file_session(
    tmp_path: Path, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where a default-named page is written
    async with in_process_daemon(tmp_path, database, "agent") as daemon:
        ws_url = f"ws://127.0.0.1:{daemon.port}"
        session_id = await create(ws_url)
        async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "e0", "type": "export_html"})
            empty = (await until(ws, is_response("e0")))[-1]
        await prompt(ws_url, session_id, "a question for the page")
        async with open_websocket_url(f"{ws_url}/v1/sessions/{session_id}") as ws:
            await receive(ws)
            await send(ws, {"id": "e1", "type": "export_html"})
            default = (await until(ws, is_response("e1")))[-1]
            chosen = tmp_path / "chosen.html"
            await send(ws, {"id": "e2", "type": "export_html", "outputPath": str(chosen)})
            named = (await until(ws, is_response("e2")))[-1]
    # Before anything was saved there is nothing to export (as for a file not written yet).
    assert not empty["success"] and empty["error"].startswith("Nothing to export yet")
    assert default["success"] and named["success"], (default, named)
    # The default name is answered relative, as pi answers it (issue 21): in the process's cwd.
    assert "/" not in default["data"]["path"]
    page = trio.Path(tmp_path / default["data"]["path"])
    assert re.fullmatch(rf"pitrio-session-.+_{session_id}\.html", page.name)
    html = await page.read_bytes()
    assert b"a question for the page" in html
    assert named["data"]["path"] == str(chosen)
    assert await trio.Path(chosen).read_bytes() == html
