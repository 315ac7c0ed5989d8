"""The disk refuses an append: a real kernel error, in a process of its own (``disk_driver``).

Two ways to a real error, both asserted the same way:

* ``rlimit``: the driver lowers its own ``RLIMIT_FSIZE`` just above the session file's size;
  the next append gets ``EFBIG`` (after the kernel took the part that fitted). Always runs.
* ``tmpfs``: the driver runs in a private user and mount namespace (``unshare -rm``) with a
  1 MB tmpfs holding the session directory, fills it after the first exchange, and the next
  append gets ``ENOSPC``. Skipped where the sandbox forbids user namespaces.

What is reported: the prompt whose entry could not be written raises
``ReadOnlySessionError`` naming the file and the kernel's error; the session then refuses
prompts with the same text and says so in its state; closing it raises nothing. What is kept:
the file holds exactly the entries acknowledged before (the part of the failed batch the
kernel took is cut off again), reopens without a problem, and projects the first exchange.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

ROOT = Path(__file__).resolve().parents[2]
ERRORS = {"rlimit": "[Errno 27] File too large", "tmpfs": "[Errno 28] No space left on device"}


def _namespaces_work(tmp_path: Path) -> str | None:
    """``None`` if a tmpfs can be mounted in a private namespace here, else why not."""
    target = tmp_path / "probe"
    target.mkdir()
    try:
        probe = subprocess.run(
            ["unshare", "-rm", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(target)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if probe.returncode == 0 else probe.stderr.strip() or "unshare failed"


async def _run_driver(mode: str, tmp_path: Path) -> dict[str, Any]:
    work, disk, out = tmp_path / "work", tmp_path / "disk", tmp_path / "out.json"
    work.mkdir()
    disk.mkdir()
    driver = [
        sys.executable,
        "-m",
        "tests.faults.disk_driver",
        *("--mode", mode, "--work", str(work), "--disk", str(disk), "--out", str(out)),
    ]
    if mode == "tmpfs":
        mount = f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(disk))}"
        driver = ["unshare", "-rm", "sh", "-c", f"{mount} && exec {shlex.join(driver)}"]
    with trio.fail_after(30):
        done = await trio.run_process(
            driver, cwd=ROOT, capture_stdout=True, capture_stderr=True, check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = orjson.loads(out.read_bytes())
    return result


@pytest.mark.parametrize("mode", ["rlimit", "tmpfs"])
async def test_a_full_disk_turns_the_session_read_only_and_keeps_what_was_acknowledged(
    tmp_path: Path, mode: str
) -> None:
    if mode == "tmpfs" and (why := _namespaces_work(tmp_path)) is not None:
        pytest.skip(f"no private mount namespace here: {why}")
    result = await _run_driver(mode, tmp_path)
    path = result["path"]
    expected = (
        f"{path}: writing the session failed: {ERRORS[mode]}. The session is read-only "
        "from now on; every entry saved before is in the file."
    )
    # Reported: the prompt whose entry failed raises it, later prompts are refused with it.
    assert result["first"] is None
    assert result["second"] == {"type": "ReadOnlySessionError", "message": expected}
    assert result["third"] == {"type": "ReadOnlySessionError", "message": expected}
    assert result["write_error"] == expected
    assert result["read_only_events"] == [expected]  # clients are told once, at once
    assert not result["is_running"] and result["settled"] == 2  # the failed run settled
    assert result["closed_cleanly"]
    if mode == "tmpfs":
        assert result["filler"] > 0  # the file system really was full
    # Kept: exactly what was acknowledged, nothing torn, the first exchange projects back.
    assert result["acknowledged"] == result["acknowledged_before"]
    assert result["reopened_ids"][2:] == result["acknowledged"]  # after model + thinking level
    assert result["reopened_problems"] == []
    assert result["size_after"] == result["size_before"]
    assert result["file_ends_with_newline"]
    # pi 1.6.0: the session's system message comes first, stored as a message entry.
    assert result["reopened_roles"] == ["system", "user", "assistant"]
    assert result["reopened_context"][1:] == ["first question", "first answer"]
    assert result["live_roles"][:3] == ["system", "user", "assistant"]
    assert result["live"][1:3] == ["first question", "first answer"]
    lines = (tmp_path / "work" / "session-copy.jsonl").read_bytes().splitlines()
    kept = [orjson.loads(line) for line in lines]
    assert [(e["type"], e.get("message", {}).get("role")) for e in kept] == [
        ("session", None),
        ("model_change", None),
        ("thinking_level_change", None),
        ("message", "system"),  # pi 1.6.0 stores the system message first (fixtures/pi16)
        ("message", "user"),
        ("message", "assistant"),
    ]
