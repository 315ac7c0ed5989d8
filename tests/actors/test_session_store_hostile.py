"""Session paths and session trees that lie (issue 21: defects 1, 14, 16).

Every hostile node is made here, in the test's temporary directory: a character device with
``os.mknod``, a FIFO with ``os.mkfifo``, symbolic links. Never the machine's ``/dev/null``.
"""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import orjson
import pytest
import trio

from pitrio.actors.host.index import header_id
from pitrio.actors.model_router import FauxProvider, RouterConfig, start_model_router
from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session.runtime import SessionRuntime
from pitrio.actors.session_store import fork_from, list_sessions, open_store
from pitrio.actors.session_store.file_check import check_session_bytes
from pitrio.actors.session_store.file_format import parse_session_bytes
from pitrio.actors.session_store.jsonline import loads_line
from pitrio.actors.session_store.lease import Lease
from pitrio.actors.session_store.maintenance import check_file, repair_file
from pitrio.actors.session_store.paths import check_session_path, path_refusal
from pitrio.errors import (
    SessionFileError,
    SessionLockedError,
    SessionPathError,
    collapse_groups,
)
from pitrio.transports.sessions_cli import run_sessions_command

HEADER = (
    b'{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}'
)


def message(entry_id: str, parent: str | None, text: str, role: str = "user") -> bytes:
    value = {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1},
    }
    return orjson.dumps(value)


def file_of(*lines: bytes) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def device(path: Path) -> Path:
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    return path


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def identity(path: Path) -> tuple[int, int, int]:
    info = os.lstat(path)
    return (stat.S_IFMT(info.st_mode), info.st_ino, info.st_mtime_ns)


# -- the rule --------------------------------------------------------------------------------


def test_the_rule_takes_a_regular_file_or_nothing(tmp_path: Path) -> None:
    regular = tmp_path / "a.jsonl"
    regular.write_bytes(file_of(HEADER))
    link = tmp_path / "link.jsonl"
    link.symlink_to(regular)
    assert check_session_path(regular) == regular
    assert check_session_path(link) == link
    assert check_session_path(tmp_path / "missing.jsonl") == tmp_path / "missing.jsonl"
    assert path_refusal(None, None) is None


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (device, "a character device"),
        (fifo, "a FIFO"),
        (lambda path: (path.mkdir(), path)[1], "a directory"),
    ],
)
def test_the_rule_refuses_what_is_no_file(tmp_path: Path, make: object, words: str) -> None:
    assert callable(make)
    node = make(tmp_path / "node.jsonl")
    before = identity(node)
    link = tmp_path / "link.jsonl"
    link.symlink_to(node)
    with pytest.raises(SessionPathError, match=words) as caught:
        check_session_path(node)
    assert str(node) in str(caught.value)
    with pytest.raises(SessionPathError, match=f"a symbolic link to {words}"):
        check_session_path(link)
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nothing")
    with pytest.raises(SessionPathError, match="a symbolic link to nothing"):
        check_session_path(dangling)
    assert identity(node) == before


async def test_opening_a_device_or_fifo_leaves_it_alone(tmp_path: Path) -> None:
    for node in (device(tmp_path / "dev.jsonl"), fifo(tmp_path / "fifo.jsonl")):
        before = identity(node)
        with pytest.raises(SessionPathError, match=str(node)), collapse_groups():
            async with trio.open_nursery() as nursery:
                await open_store(nursery, node)
        assert identity(node) == before
        assert not (tmp_path / f"{node.name}.lock").exists()


def test_check_and_repair_refuse_a_device_and_a_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for node in (device(tmp_path / "dev.jsonl"), fifo(tmp_path / "fifo.jsonl")):
        before = identity(node)
        # Read, a FIFO blocks (no writer) and a device may never end: neither is opened.
        assert run_sessions_command(["check", str(node)]) == 2
        assert run_sessions_command(["repair", str(node)]) == 2
        err = capsys.readouterr().err
        assert f"Error: {node}: not a session file" in err
        assert identity(node) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dev.jsonl", "fifo.jsonl"]
    with pytest.raises(SessionPathError):
        check_file(tmp_path / "fifo.jsonl")
    with pytest.raises(SessionPathError):
        repair_file(tmp_path / "dev.jsonl")


def test_fork_from_and_listing_skip_what_is_no_file(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    node = fifo(sessions / "2026-01-01T00-00-00-000Z_abc.jsonl")
    (sessions / "2026-01-02T00-00-00-000Z_dir.jsonl").mkdir()
    with pytest.raises(SessionPathError, match="a FIFO"):
        fork_from(node, str(tmp_path), directory=tmp_path / "forks")
    assert list_sessions(sessions) == []
    assert header_id(node) is None  # the daemon's id lookup
    assert not (tmp_path / "forks").exists()


def test_a_text_file_is_not_a_session(tmp_path: Path) -> None:
    text = tmp_path / "notes.jsonl"
    text.write_bytes(b"hello\nnot a session\n")
    problems = check_file(text)
    assert (problems[0].line, problems[0].kind, problems[0].severity) == (1, "no_header", "error")
    assert problems[0].message.startswith("not a pi session file")


# -- lone surrogates and BOM (defect 14) ----------------------------------------------------


def test_a_lone_surrogate_is_accepted_and_kept() -> None:
    line = message("m1", None, "cut \\ud83d here").replace(b"\\\\ud83d", b"\\ud83d")
    assert b"\\ud83d here" in line
    parsed = parse_session_bytes(file_of(HEADER, line), origin="f", decode_all=True)
    assert parsed.problems == []
    assert parsed.entries[0].raw == line  # kept byte for byte
    assert loads_line(line)["message"]["content"][0]["text"] == "cut \ud83d here"


async def test_a_session_with_a_lone_surrogate_opens_and_appends(tmp_path: Path) -> None:
    line = message("m1", None, "cut \\udc00 here").replace(b"\\\\udc00", b"\\udc00")
    path = tmp_path / "s.jsonl"
    path.write_bytes(file_of(HEADER, line))
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path)
        (first,) = await store.context_messages()
        assert first.content[0].text == "cut \udc00 here"  # type: ignore[union-attr]
        await store.append_session_info("named")
        clone = await store.clone()
        assert clone.seed.entries[0].raw == line
        nursery.cancel_scope.cancel()
    lines = path.read_bytes().splitlines()
    assert lines[:2] == [HEADER, line]


def test_a_bom_before_the_header_is_read_as_pi_reads_it() -> None:
    parsed = parse_session_bytes(
        file_of(b"\xef\xbb\xbf" + HEADER, message("m1", None, "one")), origin="f"
    )
    assert parsed.problems == [] and parsed.header is not None
    assert [e.id for e in parsed.entries] == ["m1"]


# -- trees that lie (defect 16) --------------------------------------------------------------


def kinds(data: bytes) -> list[tuple[int, str, str]]:
    return [(p.line, p.kind, p.severity) for p in check_session_bytes(data, origin="f")]


def test_check_reports_cycles_self_parents_and_a_missing_version() -> None:
    cycle = file_of(HEADER, message("m1", "m2", "one"), message("m2", "m1", "two"))
    assert kinds(cycle) == [(3, "parent_cycle", "error")]
    own = file_of(HEADER, message("m1", None, "one"), message("m2", "m2", "two"))
    assert kinds(own) == [(3, "parent_cycle", "error")]
    longer = file_of(
        HEADER,
        message("a", None, "root"),
        message("b", "d", "x"),
        message("c", "b", "y"),
        message("d", "c", "z"),
        message("e", "d", "under the loop"),
    )
    assert kinds(longer) == [(5, "parent_cycle", "error")]
    unversioned = HEADER.replace(b'"version":3,', b"")
    assert kinds(file_of(unversioned, message("m1", None, "one"))) == [(1, "no_version", "warning")]
    genuine_v1 = (
        b'{"type":"message","timestamp":"t","message":{"role":"user","content":"a","timestamp":1}}'
    )
    assert kinds(file_of(unversioned, genuine_v1)) == []  # pi's own v1 files: nothing to say


def test_sessions_check_exits_1_on_a_cycle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(file_of(HEADER, message("m1", "m2", "one"), message("m2", "m1", "two")))
    assert run_sessions_command(["check", str(path)]) == 1
    assert f"{path}:3: error: entry m2 is in a parent cycle" in capsys.readouterr().out


async def test_resume_refuses_a_cycle_with_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    data = file_of(HEADER, message("m1", None, "one"), message("m2", "m2", "two"))
    path.write_bytes(data)
    with (
        pytest.raises(SessionFileError, match=f"{path}:3: entry m2 is its own parent"),
        collapse_groups(),
    ):
        async with trio.open_nursery() as nursery:
            await open_store(nursery, path)
    assert path.read_bytes() == data


async def test_a_migration_keeps_the_original_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.jsonl"
    unversioned = HEADER.replace(b'"version":3,', b"")
    original = file_of(
        unversioned,
        message("m1", None, "one"),
        message("m2", "m1", "two"),
        message("m3", "m1", "x"),
    )
    path.write_bytes(original)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path)
        status = await store.status()
        nursery.cancel_scope.cancel()
    backup = tmp_path / "s.jsonl.v1.bak"
    assert status.migrated and status.backup == backup
    assert backup.read_bytes() == original
    assert path.read_bytes() != original
    assert any(str(backup) in record.getMessage() for record in caplog.records)
    # A second migration of a restored original never replaces the first backup.
    path.write_bytes(original)
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path)
        assert (await store.status()).backup == tmp_path / "s.jsonl.v1.1.bak"
        nursery.cancel_scope.cancel()
    assert backup.read_bytes() == original


# -- a failed switch keeps the session (defect 1) --------------------------------------------


async def test_a_switch_that_fails_after_the_stop_brings_the_session_back(
    tmp_path: Path,
) -> None:
    """A session file another live writer holds passes every check of the file, so the current
    session is stopped before the open fails: it must come back, usable."""
    other = tmp_path / "other.jsonl"
    other.write_bytes(file_of(HEADER, message("m1", None, "theirs")))
    lease = Lease.acquire(other)
    options = SessionOptions(
        cwd=str(tmp_path),
        model="faux/faux-1",
        session_dir=str(tmp_path / "s"),
        agent_dir=tmp_path / "agent",
    )
    try:
        async with trio.open_nursery() as nursery:
            router = await start_model_router(
                nursery, FauxProvider(), config=RouterConfig(catalogue=False)
            )
            runtime = SessionRuntime(nursery, router)
            first = await runtime.start(options)
            await first.session.prompt("mine")
            first_id = first.store.header.id
            with pytest.raises(SessionLockedError):
                await runtime.switch_session(str(other))
            back = runtime.current
            assert back.store.header.id == first_id
            await back.session.prompt("still mine")
            roles = [m.role for m in await back.store.context_messages()]
            # pi 1.6.0: the session's system message leads; the failed switch added nothing.
            assert roles == ["system", "user", "assistant", "user", "assistant"]
            with pytest.raises(SessionFileError, match="not a pi session file"):
                text = tmp_path / "text.jsonl"
                text.write_bytes(b"plain text\n")
                await runtime.switch_session(str(text))
            assert runtime.current.store.header.id == first_id
            await runtime.aclose()
            nursery.cancel_scope.cancel()
    finally:
        lease.release()
    assert other.read_bytes() == file_of(HEADER, message("m1", None, "theirs"))


async def test_resuming_a_migrated_file_gives_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_bytes(file_of(HEADER.replace(b'"version":3,', b""), message("m1", None, "one")))
    options = SessionOptions(
        cwd=str(tmp_path), model="faux/faux-1", agent_dir=tmp_path / "agent", path=path
    )
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, FauxProvider(), config=RouterConfig(catalogue=False)
        )
        runtime = SessionRuntime(nursery, router)
        started = await runtime.start(options)
        backup = tmp_path / "old.jsonl.v1.bak"
        assert any(str(backup) in notice for notice in started.notices), started.notices
        await runtime.aclose()
        nursery.cancel_scope.cancel()


def test_the_rule_refuses_a_socket(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(path))
        before = identity(path)
        with pytest.raises(SessionPathError, match="a socket"):
            check_session_path(path)
        assert run_sessions_command(["check", str(path)]) == 2
        assert identity(path) == before
