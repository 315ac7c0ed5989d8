"""Hostile input to the session store: corrupt files and hostile paths (issue 21, fuzz share).

Seeded and bounded (a few seconds): every case is reproducible from its seed and mutation
name. A case passes when ``check`` answers with problems (never an exception other than the
store's own errors), a strict open either succeeds or refuses with an error naming the file,
an opened session's context holds no entry twice and takes an append, the file is changed only
by what was appended (or migrated with the original kept), and nothing else in the directory
changes. Hostile paths are made here: device nodes, FIFOs, links (never the machine's ``/dev``).
"""

from __future__ import annotations

import os
import random
import stat
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
import trio

from pitrio.actors.model_router import FauxProvider, RouterConfig, start_model_router
from pitrio.actors.session.bootstrap import SessionOptions
from pitrio.actors.session.runtime import SessionRuntime
from pitrio.actors.session_store import open_store
from pitrio.actors.session_store.maintenance import check_file, repair_file
from pitrio.errors import PitrioError, SessionError, SessionFileError, collapse_groups

SEEDS = range(12)
CASE_SECONDS = 20  # a guard against a hang, far above what a case takes


def base_lines(rng: random.Random) -> list[bytes]:
    """A valid v3 session: a chain of user/assistant messages with a branch or two."""
    header = {
        "type": "session",
        "version": 3,
        "id": f"s{rng.randrange(10**6)}",
        "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/tmp",
    }
    lines = [orjson.dumps(header)]
    ids: list[str] = []
    for number in range(rng.randrange(3, 14)):
        role = "user" if number % 2 == 0 else "assistant"
        parent = ids[-1] if ids and rng.random() > 0.15 else (rng.choice(ids) if ids else None)
        entry_id = f"e{number:02d}{rng.randrange(16**4):04x}"
        content = [{"type": "text", "text": f"{role} {number} " + "x" * rng.randrange(40)}]
        payload: dict[str, object] = {"role": role, "content": content, "timestamp": number}
        if role == "assistant":
            payload.update(
                api="faux",
                provider="faux",
                model="faux-1",
                usage={
                    "input": 1,
                    "output": 1,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 2,
                    "cost": {
                        "input": 0,
                        "output": 0,
                        "cacheRead": 0,
                        "cacheWrite": 0,
                        "total": 0,
                    },
                },
                stopReason="stop",
            )
        entry = {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": f"2026-01-01T00:00:{number:02d}.000Z",
            "message": payload,
        }
        lines.append(orjson.dumps(entry))
        ids.append(entry_id)
    return lines


def join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _entry(line: bytes) -> dict[str, object]:
    value: dict[str, object] = orjson.loads(line)
    return value


def byte_flip(rng: random.Random, lines: list[bytes]) -> bytes:
    data = bytearray(join(lines))
    for _ in range(rng.randrange(1, 4)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


def truncation(rng: random.Random, lines: list[bytes]) -> bytes:
    data = join(lines)
    return data[: rng.randrange(1, len(data))]


def duplicate_id(rng: random.Random, lines: list[bytes]) -> bytes:
    copy = rng.randrange(1, len(lines))
    return join([*lines, lines[copy]])


def parent_cycle(rng: random.Random, lines: list[bytes]) -> bytes:
    # Point an early entry's parent at a later one on its own chain, or at itself.
    entries = [_entry(line) for line in lines[1:]]
    first = rng.randrange(len(entries))
    later = [i for i in range(first, len(entries)) if _reaches(entries, i, first)]
    target = rng.choice(later)
    entries[first]["parentId"] = entries[target]["id"]
    return join([lines[0], *(orjson.dumps(entry) for entry in entries)])


def _reaches(entries: list[dict[str, object]], start: int, goal: int) -> bool:
    by_id = {entry["id"]: index for index, entry in enumerate(entries)}
    index: int | None = start
    for _ in range(len(entries) + 1):
        if index == goal:
            return True
        if index is None:
            return False
        index = by_id.get(entries[index]["parentId"])
    return False


def missing_parent(rng: random.Random, lines: list[bytes]) -> bytes:
    entries = [_entry(line) for line in lines[1:]]
    entries[rng.randrange(len(entries))]["parentId"] = "gone0000"
    return join([lines[0], *(orjson.dumps(entry) for entry in entries)])


def bom(rng: random.Random, lines: list[bytes]) -> bytes:
    return b"\xef\xbb\xbf" + join(lines)


def crlf(rng: random.Random, lines: list[bytes]) -> bytes:
    return b"".join(line + b"\r\n" for line in lines)


def huge_line(rng: random.Random, lines: list[bytes]) -> bytes:
    entry = _entry(lines[-1])
    entry["id"] = "huge0000"
    message = entry["message"]
    assert isinstance(message, dict)
    message["content"] = [{"type": "text", "text": "y" * rng.randrange(1 << 20, 3 << 20)}]
    return join([*lines, orjson.dumps(entry)])


def garbage_line(rng: random.Random, lines: list[bytes]) -> bytes:
    junk = rng.choice([b"not json", b"[1,2,3]", b'{"type":"x"}', b"\x00\xff\xfe", b"{" * 3000])
    at = rng.randrange(1, len(lines) + 1)
    return join([*lines[:at], junk, *lines[at:]])


def no_header(rng: random.Random, lines: list[bytes]) -> bytes:
    return join(lines[1:])


def no_version(rng: random.Random, lines: list[bytes]) -> bytes:
    header = _entry(lines[0])
    del header["version"]
    return join([orjson.dumps(header), *lines[1:]])


def lone_surrogate(rng: random.Random, lines: list[bytes]) -> bytes:
    at = rng.randrange(1, len(lines))
    broken = lines[at].replace(b'"text":"', b'"text":"\\ud83d', 1)
    return join([*lines[:at], broken, *lines[at + 1 :]])


MUTATIONS: dict[str, Callable[[random.Random, list[bytes]], bytes]] = {
    f.__name__: f
    for f in (
        byte_flip,
        truncation,
        duplicate_id,
        parent_cycle,
        missing_parent,
        bom,
        crlf,
        huge_line,
        garbage_line,
        no_header,
        no_version,
        lone_surrogate,
    )
}


def listing(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in directory.iterdir() if path.is_file()}


async def run_case(directory: Path, name: str, data: bytes) -> str:
    """One corrupt file through check, a strict open and an append; what happened."""
    path = directory / f"{name}.jsonl"
    path.write_bytes(data)
    bystander = directory / "bystander.txt"
    bystander.write_bytes(b"untouched")
    problems = check_file(path)
    if problems:
        assert all(p.message for p in problems)
    outcome = "opened"
    with trio.fail_after(CASE_SECONDS):
        try:
            with collapse_groups():
                async with trio.open_nursery() as nursery:
                    store = await open_store(nursery, path)
                    branch = await store.branch_entries()
                    ids = [entry.id for entry in branch]
                    assert len(ids) == len(set(ids)), f"{name}: an entry twice in the context"
                    await store.context_messages()
                    status = await store.status()
                    await store.append_session_info("fuzzed")
                    nursery.cancel_scope.cancel()
        except SessionError as exc:
            assert str(path) in str(exc), exc
            assert path.read_bytes() == data, f"{name}: a refused file was changed"
            return "refused"
    after = path.read_bytes()
    if status.migrated:
        assert status.backup is not None and status.backup.read_bytes() == data
        outcome = "migrated"
    else:
        assert after.startswith(data), f"{name}: the file was rewritten, not appended to"
    assert bystander.read_bytes() == b"untouched"
    lines = after.splitlines()
    assert b'"name":"fuzzed"' in lines[-1]
    return outcome


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
async def test_corrupt_session_files(tmp_path: Path, mutation: str) -> None:
    outcomes: dict[str, int] = {}
    for seed in SEEDS:
        rng = random.Random(f"{mutation}/{seed}")
        data = MUTATIONS[mutation](rng, base_lines(rng))
        directory = tmp_path / f"case{seed}"
        directory.mkdir()
        before = set(os.listdir(tmp_path))
        outcome = await run_case(directory, mutation, data)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert set(os.listdir(tmp_path)) == before
    if mutation in ("parent_cycle", "duplicate_id", "no_header"):
        assert outcomes == {"refused": len(SEEDS)}, outcomes
    if mutation in ("bom", "crlf", "huge_line", "lone_surrogate", "missing_parent"):
        assert outcomes == {"opened": len(SEEDS)}, outcomes
    if mutation == "no_version":
        assert outcomes == {"migrated": len(SEEDS)}, outcomes


def test_repair_makes_every_repairable_file_open(tmp_path: Path) -> None:
    """``repair`` (the user asking) leaves a file a strict open takes, or refuses it whole."""
    for mutation in ("garbage_line", "duplicate_id", "parent_cycle", "truncation", "byte_flip"):
        for seed in range(6):
            rng = random.Random(f"repair/{mutation}/{seed}")
            path = tmp_path / f"{mutation}{seed}.jsonl"
            original = MUTATIONS[mutation](rng, base_lines(rng))
            path.write_bytes(original)
            try:
                report = repair_file(path)
            except SessionFileError as exc:
                assert "cannot repair" in str(exc) and path.read_bytes() == original
                continue
            errors = [p for p in check_file(path) if p.severity == "error"]
            assert errors == [], (mutation, seed, errors)
            moved = b"".join(raw + b"\n" for _, raw in report.moved)
            if moved:
                assert report.rejected_path.read_bytes().endswith(moved)


HOSTILE_KINDS = ("device", "fifo", "directory", "link-to-device", "link-to-fifo", "dangling")


def make_hostile(kind: str, directory: Path) -> tuple[Path, list[Path]]:
    target = directory / f"{kind}.jsonl"
    if kind in ("device", "link-to-device"):
        node = directory / f"{kind}.node"
        os.mknod(node, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    elif kind in ("fifo", "link-to-fifo"):
        node = directory / f"{kind}.node"
        os.mkfifo(node)
    elif kind == "directory":
        node = target
        node.mkdir()
    else:
        node = directory / "nowhere"
    if kind.startswith("link") or kind == "dangling":
        target.symlink_to(node)
    elif node != target:
        node.rename(target)
        node = target
    return target, [p for p in {target, node} if os.path.lexists(p)]


def identity(path: Path) -> tuple[int, int, int, bytes]:
    info = os.lstat(path)
    content = os.readlink(path).encode() if stat.S_ISLNK(info.st_mode) else b""
    return (stat.S_IFMT(info.st_mode), info.st_ino, info.st_mtime_ns, content)


async def test_hostile_paths_and_corrupt_files_leave_the_session_working(tmp_path: Path) -> None:
    """One runtime switches to every hostile path and a sample of corrupt files: each switch
    answers (an error naming the path, or the session), nothing hostile changes, and the
    session prompts after each one."""
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    cases: list[tuple[str, Path]] = []
    watched: list[Path] = []
    for kind in HOSTILE_KINDS:
        target, nodes = make_hostile(kind, hostile)
        cases.append((kind, target))
        watched.extend(nodes)
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    for mutation in ("byte_flip", "truncation", "parent_cycle", "no_header", "garbage_line"):
        rng = random.Random(f"switch/{mutation}")
        path = corrupt / f"{mutation}.jsonl"
        path.write_bytes(MUTATIONS[mutation](rng, base_lines(rng)))
        cases.append((mutation, path))
    before = {path: identity(path) for path in watched}
    names = sorted(os.listdir(hostile))
    options = SessionOptions(
        cwd=str(tmp_path),
        model="faux/faux-1",
        session_dir=str(tmp_path / "sessions"),
        agent_dir=tmp_path / "agent",
    )
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, FauxProvider(), config=RouterConfig(catalogue=False)
        )
        runtime = SessionRuntime(nursery, router)
        home = await runtime.start(options)
        await home.session.prompt("home")
        home_file = home.store.path
        assert home_file is not None
        for kind, path in cases:
            with trio.fail_after(CASE_SECONDS):
                try:
                    await runtime.switch_session(str(path))
                except PitrioError as exc:
                    assert str(path) in str(exc), (kind, exc)
                    assert runtime.current.store.path == home_file
                else:
                    await runtime.switch_session(str(home_file))
                await runtime.current.session.prompt(f"after {kind}")
        roles = [m.role for m in await runtime.current.store.context_messages()]
        # pi 1.6.0: the home session's system message leads, declared once for all its prompts.
        assert roles == ["system", *["user", "assistant"] * (len(cases) + 1)]
        await runtime.aclose()
        nursery.cancel_scope.cancel()
    assert {path: identity(path) for path in watched} == before
    assert sorted(os.listdir(hostile)) == names
