"""A session that runs out of disk, in a process of its own (run by ``test_disk_full.py``).

A disk fault must be a real kernel error, and the two ways to get one both need a process of
their own: ``RLIMIT_FSIZE`` limits every file the process writes (``EFBIG`` past the limit;
Python ignores ``SIGXFSZ``), and a small tmpfs can only be mounted in a private mount namespace
(``unshare -rm``), whose mounts die with the process (``ENOSPC`` once it is full).

The driver runs a real session (a loopback vendor over HTTP, a session file on the small file
system), lets one exchange succeed, brings the fault about, and records what the session
reports; after the session is closed it reopens the file read-only, still under the fault, and
writes everything as JSON to ``--out``, outside the small file system.

    python -m tests.faults.disk_driver --mode rlimit|tmpfs --work DIR --disk DIR --out FILE
"""

from __future__ import annotations

import argparse
import errno
import resource
import shutil
from pathlib import Path
from typing import Any

import orjson
import trio

import pitrio
from pitrio.actors.session_store import open_store
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, AssistantMessage, UserMessage
from pitrio.messages.content import TextContent
from tests.faults.support import OsEnvironment, fault_session
from tests.faults.vendor import answer, running_vendor

BIG_PROMPT = "second question " + "x" * 20_000
"""Larger than any slack a full disk leaves in the file's last block, or than the limit."""


def _text(message: AgentMessage) -> str:
    """The first 40 characters of a message's text (enough to tell them apart)."""
    if isinstance(message, UserMessage | AssistantMessage) and not isinstance(message.content, str):
        return "".join(c.text for c in message.content if isinstance(c, TextContent))[:40]
    return ""


def _fill(disk: Path) -> int:
    """Write a filler file until the file system says ENOSPC; its size."""
    written = 0
    block = b"\0" * 65536
    with open(disk / "filler", "wb", buffering=0) as filler:
        while True:
            try:
                written += filler.write(block) or 0
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written


def _error(exc: BaseException | None) -> dict[str, str] | None:
    if exc is None:
        return None
    return {"type": type(exc).__name__, "message": str(exc)}


async def _prompt(session: pitrio.AgentSession, text: str) -> BaseException | None:
    try:
        await session.prompt(text)
    except PitrioError as exc:
        return exc
    return None


async def drive(mode: str, work: Path, disk: Path) -> dict[str, Any]:
    """Run the scenario; everything the parent asserts on."""
    result: dict[str, Any] = {"mode": mode}
    async with running_vendor() as vendor:
        vendor.push(answer("first answer"), answer("second answer"), answer("third answer"))
        async with fault_session(
            work, OsEnvironment(), vendor.base_url, {}, session_dir=disk / "sessions"
        ) as faulted:
            session, recorder = faulted.session, faulted.recorder
            result["first"] = _error(await _prompt(session, "first question"))
            await recorder.wait_for("agent_settled")
            path = session.session_file
            assert path is not None
            result["path"] = str(path)
            result["acknowledged_before"] = [e.entry.id for e in recorder.of("entry_appended")]
            result["size_before"] = path.stat().st_size
            if mode == "rlimit":
                _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
                limit = result["size_before"] + 256
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
            else:
                result["filler"] = _fill(disk)
            result["second"] = _error(await _prompt(session, BIG_PROMPT))
            await recorder.wait_for("agent_settled", 2)
            result["third"] = _error(await _prompt(session, "third question"))
            state = await session.handle.state()
            result["write_error"] = state.write_error
            result["is_running"] = state.is_running
            live = await session.messages()
            result["live_roles"] = [m.role for m in live]
            result["live"] = [_text(m) for m in live]
            result["acknowledged"] = [e.entry.id for e in recorder.of("entry_appended")]
            result["settled"] = recorder.count("agent_settled")
            result["read_only_events"] = [e.error for e in recorder.of("session_read_only")]
            result["requests"] = len(vendor.requests)
        result["closed_cleanly"] = True
    # Reopen as the next process would, the disk still full (a reader writes nothing).
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, read_only=True)
        result["reopened_ids"] = [entry.id for entry in await store.entries()]
        result["reopened_problems"] = [str(p) for p in (await store.status()).problems]
        reopened = await store.context_messages()
        result["reopened_roles"] = [m.role for m in reopened]
        result["reopened_context"] = [_text(m) for m in reopened]
        nursery.cancel_scope.cancel()
    result["size_after"] = path.stat().st_size
    result["file_ends_with_newline"] = path.read_bytes().endswith(b"\n")
    shutil.copyfile(path, work / "session-copy.jsonl")
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("rlimit", "tmpfs"), required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--disk", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = trio.run(drive, args.mode, args.work, args.disk)
    # Written with the limit lifted (the report itself must not hit it).
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    args.out.write_bytes(orjson.dumps(result))


if __name__ == "__main__":
    main()
