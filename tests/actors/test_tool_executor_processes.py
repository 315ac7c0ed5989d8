"""Processes started on the event loop's thread: output, exit, waits, groups, failures."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.direct_io import DirectReader
from pitrio.actors.session.user_bash import BashCommandError, run_user_bash
from pitrio.actors.tool_executor.processes import (
    SpawnedProcess,
    can_spawn_inline,
    spawn_merged,
    terminate_group,
)
from pitrio.actors.tool_executor.tools.bash import create_bash_tool
from pitrio.errors import ToolError

from .tools.support import run_one, text

pytestmark = pytest.mark.skipif(not can_spawn_inline(), reason="needs pidfds (Linux 5.3+)")


async def read_all(process: SpawnedProcess) -> bytes:
    reader = DirectReader(process.stdout.fileno(), 65536)
    data = b""
    while chunk := await reader.read():
        data += chunk
    await process.stdout.aclose()
    return data


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


async def test_output_and_errors_in_one_pipe_exit_code_and_own_group(tmp_path: Path) -> None:
    process = spawn_merged(
        ["sh", "-c", "echo out; echo err >&2; echo $PWD; exit 3"],
        cwd=str(tmp_path),
        env={"PATH": os.environ["PATH"]},
    )
    assert os.getpgid(process.pid) == process.pid  # the leader of its own group
    assert await read_all(process) == f"out\nerr\n{tmp_path}\n".encode()
    assert await process.wait() == 3
    assert process.returncode == 3


async def test_the_bash_tool_and_the_bash_command_spawn_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # trio's open_process starts the child from a worker thread; neither needs one now.
    async def no_threads(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker thread was used")

    monkeypatch.setattr(trio.to_thread, "run_sync", no_threads)
    result, _ = await run_one(create_bash_tool(str(tmp_path)), {"command": "echo hi"})
    assert text(result) == "hi\n"
    monkeypatch.setenv("PITRIO_PROBE", "inherited")
    user = await run_user_bash("echo $PITRIO_PROBE", str(tmp_path))
    assert (user.output, user.exit_code) == ("inherited\n", 0)  # env=None: ours


async def test_concurrent_and_cancelled_waits_all_see_the_exit(tmp_path: Path) -> None:
    process = spawn_merged(["sleep", "30"], cwd=str(tmp_path), env=dict(os.environ))
    codes: list[int] = []
    with trio.move_on_after(0.05) as scope:
        await process.wait()  # cancelled while it runs: the process is left to wait for
    assert scope.cancelled_caught and process.returncode is None
    async with trio.open_nursery() as nursery:
        for _ in range(2):

            async def wait() -> None:
                codes.append(await process.wait())

            nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        process.kill()
    assert codes == [-signal.SIGKILL] * 2
    await process.stdout.aclose()


async def test_terminate_group_ends_a_leader_that_ignores_sigterm(tmp_path: Path) -> None:
    script = "trap '' TERM; echo ready; while :; do sleep 0.01; done"
    process = spawn_merged(["sh", "-c", script], cwd=str(tmp_path), env=dict(os.environ))
    reader = DirectReader(process.stdout.fileno(), 64)
    assert await reader.read() == b"ready\n"
    await terminate_group(process.pid, process, grace=0.2)
    assert process.returncode == -signal.SIGKILL
    await process.stdout.aclose()


async def test_a_failed_spawn_raises_and_leaves_no_descriptor(tmp_path: Path) -> None:
    before = open_fds()
    with pytest.raises(FileNotFoundError):
        spawn_merged(["true"], cwd=str(tmp_path / "missing"), env=dict(os.environ))
    with pytest.raises(FileNotFoundError):
        spawn_merged([str(tmp_path / "no-such-program")], cwd=str(tmp_path), env={})
    assert open_fds() == before


async def test_a_process_reaped_by_returncode_can_still_be_waited_for(tmp_path: Path) -> None:
    # terminate_group reads returncode (which reaps an exited child) and then waits.
    process = spawn_merged(["true"], cwd=str(tmp_path), env=dict(os.environ))
    assert await read_all(process) == b""
    # Until it has exited, without reaping it; then returncode reaps it.
    await trio.to_thread.run_sync(os.waitid, os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    assert process.returncode == 0
    with trio.fail_after(5):
        assert await process.wait() == 0


async def test_a_nul_in_a_command_is_refused_before_spawning(tmp_path: Path) -> None:
    # issue 21: the spawn's bare ValueError killed the session (user command and bash tool).
    message = "The command contains a NUL character (at offset 4): no command line can hold one"
    with pytest.raises(BashCommandError, match=r"^The command contains a NUL") as caught:
        await run_user_bash("echo\0x", str(tmp_path))
    assert str(caught.value) == message
    tool = create_bash_tool(str(tmp_path))

    async def ignore(_result: object) -> None:
        pass

    with pytest.raises(ToolError) as refused:
        await tool.execute("call-1", {"command": "echo\0x"}, ignore)
    assert str(refused.value) == message
