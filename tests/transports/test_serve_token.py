"""Rotating the daemon's token as ``docs/operations.md`` says: stop the daemon, delete
``<agent dir>/daemon-token``, start it again. The new token is another one, the old one is
refused, and the file is private again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import trio

PITRIO = str(Path(sys.executable).parent / "pitrio")


async def _serve_and_probe(agent: Path, tokens: list[str]) -> tuple[str, list[int]]:
    """Start ``pitrio serve``, GET /metrics with each of ``tokens`` and the file's own; stop.
    Returns the file's token and the statuses."""
    process = await trio.lowlevel.open_process(
        [PITRIO, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PITRIO_AGENT_DIR": str(agent)},
    )
    try:
        assert process.stdout is not None
        out = b""
        with trio.fail_after(20):
            while b"web page:" not in out:
                out += await process.stdout.receive_some(4096)
        url = out.split(b"listening on ", 1)[1].split(b"\n", 1)[0].decode()
        current = (agent / "daemon-token").read_text().strip()
        statuses = []
        async with httpx.AsyncClient() as client:
            for token in (*tokens, current):
                answer = await client.get(
                    f"{url}metrics", headers={"Authorization": f"Bearer {token}"}
                )
                statuses.append(answer.status_code)
        process.send_signal(signal.SIGTERM)
        with trio.fail_after(10):
            assert await process.wait() == 0
        return current, statuses
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_deleting_the_token_file_and_restarting_rotates_the_token(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    first, statuses = await _serve_and_probe(agent, [])
    assert statuses == [200]
    # a restart alone keeps the token
    same, statuses = await _serve_and_probe(agent, [first])
    assert same == first and statuses == [200, 200]
    (agent / "daemon-token").unlink()
    second, statuses = await _serve_and_probe(agent, [first])
    assert second != first and len(second) >= 40
    assert statuses == [401, 200]  # the old token is refused, the new one works
    assert (agent / "daemon-token").stat().st_mode & 0o777 == 0o600


async def test_a_token_written_by_the_operator_is_used(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    chosen = "operator-chosen-token_0123456789abcdef"
    path = agent / "daemon-token"
    path.write_text(chosen + "\n")
    path.chmod(0o600)
    current, statuses = await _serve_and_probe(agent, ["something-else"])
    assert current == chosen and statuses == [401, 200]
