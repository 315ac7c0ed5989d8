"""``switch_session`` to paths that are no session file, through a real ``pitrio --mode rpc``
(issue 21, defects 1 and 13).

Each test makes its own device node, FIFO, directory, text file or symbolic link in its
temporary directory (never the machine's ``/dev/null``), asks the process to switch there,
and checks: the answer is an error naming the path and what it is; the node is untouched (same
type, inode, mtime, content); nothing new appeared beside it; the first session is still
current and answers a prompt; an ``extension_ui_response`` afterwards does not end the process.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.transports.rpc.harness import Dirs, rpc_process

Snapshot = tuple[int, int, int, bytes]


def snapshot(path: Path) -> Snapshot:
    """Type, inode, mtime and (for a regular file or a link) content of ``path`` itself."""
    info = os.lstat(path)
    if stat.S_ISREG(info.st_mode):
        content = path.read_bytes()
    elif stat.S_ISLNK(info.st_mode):
        content = os.readlink(path).encode()
    else:
        content = b""
    return (stat.S_IFMT(info.st_mode), info.st_ino, info.st_mtime_ns, content)


def make_target(kind: str, where: Path) -> tuple[Path, str, list[Path]]:
    """The hostile path, the words the error must hold, and every node to watch."""
    where.mkdir()
    target = where / "target.jsonl"
    if kind == "device":
        os.mknod(target, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        return target, "a character device", [target]
    if kind == "fifo":
        os.mkfifo(target)
        return target, "a FIFO", [target]
    if kind == "directory":
        target.mkdir()
        return target, "a directory", [target]
    if kind == "text":
        target.write_text("hello\nthis is not a session\n")
        return target, "not a pi session file", [target]
    if kind in ("cycle", "self-parent"):
        first, second = ("m2", "m1") if kind == "cycle" else (None, "m2")
        target.write_bytes(session_file(message_line("m1", first), message_line("m2", second)))
        words = "is in a parent cycle" if kind == "cycle" else "is its own parent"
        return target, f"{target}:3: entry m2 {words}", [target]
    if kind == "link-to-device":
        device = where / "device"
        os.mknod(device, stat.S_IFCHR | 0o600, os.makedev(1, 3))
        target.symlink_to(device)
        return target, "a symbolic link to a character device", [target, device]
    if kind == "link-to-fifo":
        fifo = where / "fifo"
        os.mkfifo(fifo)
        target.symlink_to(fifo)
        return target, "a symbolic link to a FIFO", [target, fifo]
    if kind == "dangling-link":
        target.symlink_to(where / "nothing")
        return target, "a symbolic link to nothing", [target]
    raise AssertionError(kind)


HEADER = (
    b'{"type":"session","version":3,"id":"abc","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/tmp"}'
)


def message_line(entry_id: str, parent: str | None, text: str = "old") -> bytes:
    """A user message entry as pi writes it; ``text`` goes in as written (JSON escapes too)."""
    parent_json = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        f'"timestamp":"2026-01-01T00:00:01.000Z","message":{{"role":"user",'
        f'"content":[{{"type":"text","text":"{text}"}}],"timestamp":1}}}}'
    ).encode()


def session_file(*lines: bytes) -> bytes:
    return b"".join(line + b"\n" for line in (HEADER, *lines))


KINDS = [
    "cycle",
    "self-parent",
    "device",
    "fifo",
    "directory",
    "text",
    "link-to-device",
    "link-to-fifo",
    "dangling-link",
]


@pytest.mark.parametrize("kind", KINDS)
async def test_switch_to_a_path_that_is_no_session_file(tmp_path: Path, kind: str) -> None:
    dirs = Dirs.make(tmp_path)
    target, reason, watched = make_target(kind, tmp_path / "hostile")
    before = {path: snapshot(path) for path in watched}
    listing = sorted(os.listdir(tmp_path / "hostile"))
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": "first"})
        await rpc.event("agent_settled", 1)
        state = await rpc.data({"type": "get_state"})

        refused = await rpc.request({"type": "switch_session", "sessionPath": str(target)})
        assert refused["success"] is False
        assert str(target) in refused["error"] and reason in refused["error"], refused
        assert "Exceptions from" not in refused["error"]

        # Defect 13: an answer to no dialog after the failed switch is ignored, not fatal.
        await rpc.send({"type": "extension_ui_response", "id": "none", "value": "x"})
        after = await rpc.data({"type": "get_state"})
        assert after["sessionFile"] == state["sessionFile"]
        assert after["sessionId"] == state["sessionId"]
        await rpc.data({"type": "prompt", "message": "still here"})
        await rpc.event("agent_settled", 2)
        messages = (await rpc.data({"type": "get_messages"}))["messages"]
        roles = [m["role"] for m in messages]
        assert roles == ["system", "user", "assistant", "user", "assistant"]  # pi 1.6.0
        assert rpc.process.returncode is None
    assert {path: snapshot(path) for path in watched} == before
    assert sorted(os.listdir(tmp_path / "hostile")) == listing


async def test_switch_through_a_link_to_a_session_file_works(tmp_path: Path) -> None:
    """A symbolic link is followed to a regular file: the session there opens, the link stays."""
    dirs = Dirs.make(tmp_path)
    async with rpc_process(dirs) as rpc:
        await rpc.data({"type": "prompt", "message": "remember me"})
        await rpc.event("agent_settled", 1)
        first = Path((await rpc.data({"type": "get_state"}))["sessionFile"])
        await rpc.data({"type": "new_session"})
        link = tmp_path / "link.jsonl"
        link.symlink_to(first)
        await rpc.data({"type": "switch_session", "sessionPath": str(link)})
        messages = (await rpc.data({"type": "get_messages"}))["messages"]
        assert messages[0]["role"] == "system"  # the session's leading one (pi 1.6.0)
        assert messages[1]["content"][0]["text"] == "remember me"
        await rpc.data({"type": "prompt", "message": "again"})
        await rpc.event("agent_settled", 2)
    assert link.is_symlink() and link.resolve() == first
    assert b"again" in snapshot(first)[3]


@pytest.mark.parametrize("flag", ["--session", "--fork"])
@pytest.mark.parametrize("kind", ["device", "fifo", "directory", "text", "link-to-fifo"])
async def test_start_up_refuses_a_path_that_is_no_session_file(
    tmp_path: Path, flag: str, kind: str
) -> None:
    """``--session PATH`` / ``--fork PATH``: the process says why and exits; nothing changes."""
    dirs = Dirs.make(tmp_path)
    target, reason, watched = make_target(kind, tmp_path / "hostile")
    before = {path: snapshot(path) for path in watched}
    listing = sorted(os.listdir(tmp_path / "hostile"))
    async with rpc_process(dirs, flag, str(target)) as rpc:
        assert await rpc.wait_exit() != 0
        await rpc.wait_until(lambda lines: rpc.stdout_closed, seconds=5)
    err = rpc.stderr.decode()
    assert str(target) in err and reason in err, err
    assert "Traceback" not in err and "Exceptions from" not in err
    assert {path: snapshot(path) for path in watched} == before
    assert sorted(os.listdir(tmp_path / "hostile")) == listing
    assert not list((dirs.agent).glob("sessions/*/*.jsonl"))


async def test_a_lone_surrogate_in_a_session_file_is_read_and_kept(tmp_path: Path) -> None:
    """pi writes ``"\\ud83d"`` for half an emoji and reads it back; so does pitrio: the
    session resumes, the context holds the surrogate (written back escaped, as pi writes it),
    and the line stays in the file as it was."""
    dirs = Dirs.make(tmp_path)
    line = message_line("m1", None, "half \\ud83d an emoji")
    path = tmp_path / "surrogate.jsonl"
    path.write_bytes(session_file(line))
    async with rpc_process(dirs, "--session", str(path)) as rpc:
        messages = (await rpc.data({"type": "get_messages"}))["messages"]
        assert messages[0]["content"][0]["text"] == "half \ud83d an emoji"
        await rpc.data({"type": "prompt", "message": "next"})
        await rpc.event("agent_settled", 1)
        await rpc.data({"type": "clone"})
        cloned = Path((await rpc.data({"type": "get_state"}))["sessionFile"])
    written = snapshot(path)[3].splitlines()
    assert written[:2] == [HEADER, line]
    assert line in snapshot(cloned)[3].splitlines()


async def test_switch_to_a_relative_path_resolves_it_against_the_cwd(tmp_path: Path) -> None:
    """``sessionPath`` relative: pi resolves it against the working directory, so the state's
    ``sessionFile`` is absolute; a relative hostile path is still refused, named as given."""
    dirs = Dirs.make(tmp_path)
    (dirs.cwd / "adir").mkdir()
    async with rpc_process(dirs) as rpc:
        refused = await rpc.request({"type": "switch_session", "sessionPath": "adir"})
        assert refused["success"] is False and "directory" in refused["error"]
        await rpc.data({"type": "switch_session", "sessionPath": "sub/../nothere.jsonl"})
        state = await rpc.data({"type": "get_state"})
        assert state["sessionFile"] == str(dirs.cwd / "nothere.jsonl")
        await rpc.data({"type": "prompt", "message": "kept here"})
        await rpc.event("agent_settled", 1)
    assert b"kept here" in (dirs.cwd / "nothere.jsonl").read_bytes()
