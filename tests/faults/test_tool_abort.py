"""A tool that ignores SIGTERM: abort ends it with SIGKILL after the grace, nothing survives.

The model asks for a ``bash`` command whose shell traps ``SIGTERM`` (it notes the signal in a
file and goes on) and whose background child ignores it. Abort sends ``SIGTERM`` to the
command's process group, waits the grace (``KILL_GRACE_S``), then sends ``SIGKILL``; the
process table must hold none of them afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from functools import partial
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.procfs import ENDED_STATES, is_live, proc_stat
from pitrio.actors.tool_executor import processes
from pitrio.actors.tool_executor.processes import KILL_GRACE_S, terminate_group
from pitrio.messages.content import TextContent
from pitrio.messages.events import ToolExecutionEnd, ToolExecutionUpdate
from tests.faults.support import fault_session, message_entries
from tests.faults.vendor import answer, running_vendor, tool_call

STUBBORN = """\
(trap '' TERM; exec sleep 1000) &
trap 'echo TERM >> term.log' TERM
echo "pids $$ $!"
while :; do wait; done
"""


def _ends_within(seconds: float, pid: int) -> bool:
    """Whether ``pid`` is no longer live within ``seconds`` of real time (polled)."""
    deadline = time.monotonic() + seconds
    while is_live(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)  # real time: the test's trio clock is a MockClock
    return True


def _text(content: tuple[object, ...]) -> str:
    return "".join(block.text for block in content if isinstance(block, TextContent))


def _group_members(pgid: int) -> list[int]:
    """Live processes of group ``pgid``, read from ``/proc``."""
    members = []
    for name in os.listdir("/proc"):
        fields = proc_stat(int(name)) if name.isdigit() else None
        if fields and int(fields[2]) == pgid and fields[0] not in ENDED_STATES:
            members.append(int(name))
    return members


def _started(event: object) -> bool:
    return isinstance(event, ToolExecutionUpdate) and "pids " in _text(event.partial_result.content)


async def test_abort_kills_a_tool_that_ignores_sigterm_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_vendor() as vendor:
        vendor.push(tool_call("bash", {"command": STUBBORN}))
        async with fault_session(tmp_path, monkeypatch, vendor.base_url) as faulted:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(faulted.session.prompt, "run it")
                update = await faulted.recorder.wait_until(_started)
                leader, sleeper = map(int, _text(update.partial_result.content).split()[1:3])
                assert is_live(leader) and is_live(sleeper)
                began = time.monotonic()
                await faulted.session.abort()  # returns once the session is idle
                took = time.monotonic() - began
            await faulted.recorder.wait_for("agent_settled")
            # Nothing left of the command, checked in the process table.
            assert not is_live(leader) and not is_live(sleeper)
            assert _group_members(leader) == []
            # The session goes on.
            vendor.push(answer("Done waiting"))
            await faulted.session.prompt("next")
            path = faulted.session.session_file
    # SIGTERM came first and was survived (the shell's trap ran), so only SIGKILL after the
    # grace can have ended the group.
    assert (faulted.project / "term.log").read_text() == "TERM\n"
    assert took >= KILL_GRACE_S
    (end,) = faulted.recorder.of("tool_execution_end")
    assert isinstance(end, ToolExecutionEnd) and end.is_error
    result = _text(end.result.content)
    assert result.startswith(f"pids {leader} {sleeper}") and result.endswith("Command aborted")
    assert len(vendor.requests) == 2  # the aborted run asked for nothing after the tool
    # Kept: the call, its aborted result, the next exchange.
    assert path is not None
    results = message_entries(path, "toolResult")
    assert [r["message"]["isError"] for r in results] == [True]
    assert results[0]["message"]["content"][0]["text"] == result
    assistants = [e["message"]["stopReason"] for e in message_entries(path, "assistant")]
    assert assistants == ["toolUse", "aborted", "stop"]


async def test_sigkill_follows_sigterm_after_one_grace(
    tmp_path: Path, mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``terminate_group`` on a group that ignores SIGTERM, in virtual time: the SIGKILL
    goes out ``grace`` after the SIGTERM (one deadline for the leader and the group), not
    twice that.

    The clock stands still until the shell has shown it survived the SIGTERM (its trap
    prints), then jumps whenever every task waits. The signals sent are recorded with their
    virtual times."""
    sent: list[tuple[int, float]] = []
    real_signal_group = processes._signal_group

    def recording(pgid: int, signum: int) -> bool:
        if signum:
            sent.append((signum, trio.current_time()))
        return real_signal_group(pgid, signum)

    monkeypatch.setattr(processes, "_signal_group", recording)
    script = STUBBORN.replace("echo TERM >> term.log", "echo TERM")
    process = await trio.lowlevel.open_process(
        ["bash", "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, start_new_session=True
    )
    assert process.stdout is not None
    output = b""

    async def read_until(marker: bytes) -> None:
        nonlocal output
        assert process.stdout is not None
        while marker not in output:
            output += await process.stdout.receive_some(256)

    async with process.stdout, trio.open_nursery() as nursery:
        await read_until(b"\n")
        leader, sleeper = map(int, output.split()[1:3])
        nursery.start_soon(partial(terminate_group, process.pid, process, grace=2.0))
        await read_until(b"TERM")  # SIGTERM delivered and survived
        mock_clock.autojump_threshold = 0
    (term, term_at), (kill, kill_at) = sent
    assert (term, kill) == (signal.SIGTERM, signal.SIGKILL)
    assert kill_at - term_at == pytest.approx(2.0)
    # The group's wait after the SIGKILL ran in virtual time (it autojumps), so a loaded
    # kernel may still be tearing the sleeper down: wait for that in real time, bounded.
    assert _ends_within(5.0, leader) and _ends_within(5.0, sleeper)
