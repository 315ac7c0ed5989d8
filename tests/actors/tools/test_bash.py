"""The bash tool (spec §5.5) with real processes: output, exit codes, limits, timeouts, abort."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import trio
import trio.testing

from pitrio.actors.agent_loop.abort import RunAbort
from pitrio.actors.tool_executor.batch import ToolBatch, run_tool_batch
from pitrio.actors.tool_executor.processes import ProcessGroups
from pitrio.actors.tool_executor.tools import bash as bash_module
from pitrio.actors.tool_executor.tools.bash import (
    BashSettings,
    _Throttle,
    create_bash_tool,
    format_output,
    structured_output,
    with_status,
)
from pitrio.actors.tool_executor.tools.output import OutputAccumulator
from pitrio.errors import PitrioError, ToolError
from pitrio.messages.agent import AssistantMessage, Usage
from pitrio.messages.content import ToolCall
from pitrio.messages.events import AgentEvent, ToolExecutionEnd, ToolExecutionUpdate

from .support import alive_with_marker, run_one, text, unique_marker


def read_text(path: str) -> str:
    return Path(path).read_text()


async def test_echo_streams_an_empty_then_a_full_update(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path))
    result, updates = await run_one(tool, {"command": "echo hi"})
    assert text(result) == "hi\n"
    assert result.details is None
    assert updates[0].content == () and updates[0].details is None
    assert text(updates[-1]) == "hi\n" and updates[-1].details == {}


async def test_stdout_and_stderr_are_one_stream_in_order(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path))
    result, _ = await run_one(tool, {"command": "echo a; echo b >&2; echo c"})
    assert text(result) == "a\nb\nc\n"


async def test_runs_in_the_working_directory(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path))
    result, _ = await run_one(tool, {"command": "pwd"})
    assert text(result) == f"{tmp_path}\n"


async def test_nonzero_exit_is_an_error_with_the_output(tmp_path: Path) -> None:
    # pi 1.6.0 returns the failure as a result marked isError, with structuredContent (0.73.1
    # threw, so the result was only the text); the text is the same as before
    tool = create_bash_tool(str(tmp_path))
    result, _ = await run_one(tool, {"command": "echo to-stderr >&2; exit 3"})
    assert result.is_error is True
    assert text(result) == "to-stderr\n\n\nCommand exited with code 3"  # as pi's fixture
    assert result.details is None
    structured = result.structured_content
    assert list(structured) == ["output", "truncated", "exit_code", "wall_time_seconds"]
    assert structured["output"] == "to-stderr\n" and structured["truncated"] is False
    assert structured["exit_code"] == 3
    result, _ = await run_one(tool, {"command": "exit 1"})
    assert result.is_error is True
    assert text(result) == "(no output)\n\nCommand exited with code 1"
    assert result.structured_content["output"] == ""


async def test_success_has_structured_content(tmp_path: Path) -> None:
    result, _ = await run_one(create_bash_tool(str(tmp_path)), {"command": "printf 'a\\nb'"})
    assert result.is_error is None
    assert result.structured_content == {
        "output": "a\nb",
        "truncated": False,
        "exit_code": 0,
        "wall_time_seconds": result.structured_content["wall_time_seconds"],
    }
    seconds = result.structured_content["wall_time_seconds"]
    assert seconds >= 0 and round(seconds, 1) == seconds  # tenths, as pi rounds it


def test_structured_output_keeps_head_and_tail_of_a_long_output() -> None:
    assert structured_output(b"short", limit=10) == ("short", False)
    # 26 bytes, limit 10: the first 5 and the last 5, and how many were left out
    text, cut = structured_output(b"abcdefghijklmnopqrstuvwxyz", limit=10)
    assert cut is True
    assert text == "abcde\n\n[... 16 bytes omitted ...]\n\nvwxyz"
    # cuts at character boundaries: a split "é" is dropped from both ends
    raw = "é".encode() * 10  # 20 bytes
    text, cut = structured_output(raw, limit=7)  # head 3 bytes, tail 4 bytes
    assert text == "é\n\n[... 13 bytes omitted ...]\n\néé"


async def test_no_output(tmp_path: Path) -> None:
    result, _ = await run_one(create_bash_tool(str(tmp_path)), {"command": "true"})
    assert text(result) == "(no output)"


async def test_killed_by_a_signal_counts_as_success(tmp_path: Path) -> None:
    result, _ = await run_one(create_bash_tool(str(tmp_path)), {"command": "echo x; kill -9 $$"})
    assert text(result) == "x\n"


async def test_settings_prefix_shell_and_cwd(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(command_prefix="GREETING=hello"))
    result, _ = await run_one(tool, {"command": "echo $GREETING"})
    assert text(result) == "hello\n"
    tool = create_bash_tool(str(tmp_path), BashSettings(shell_path="/no/such/shell"))
    with pytest.raises(ToolError, match=r"^Custom shell path not found: /no/such/shell$"):
        await run_one(tool, {"command": "true"})
    gone = tmp_path / "gone"
    with pytest.raises(ToolError) as caught:
        await run_one(create_bash_tool(str(gone)), {"command": "true"})
    assert str(caught.value) == (
        f"Working directory does not exist: {gone}\nCannot execute bash commands."
    )
    tool = create_bash_tool(str(tmp_path), BashSettings(env={"PATH": os.environ["PATH"], "V": "1"}))
    result, _ = await run_one(tool, {"command": "echo ${V}${HOME:-unset}"})
    assert text(result) == "1unset\n"


async def test_line_truncation_saves_the_full_output(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(temp_dir=str(tmp_path)))
    result, updates = await run_one(tool, {"command": "seq 1 3000"})
    body, notice = text(result).rsplit("\n\n", 1)
    lines = body.split("\n")
    assert lines[0] == "1002" and lines[-2] == "3000" and lines[-1] == ""
    assert len(lines) == 2000
    match = re.fullmatch(r"\[Showing lines 1002-3001 of 3001\. Full output: (.+)\]", notice)
    assert match is not None
    path = match.group(1)
    assert re.fullmatch(re.escape(str(tmp_path)) + r"/pi-bash-[0-9a-f]{16}\.log", path)
    expected = "".join(f"{i}\n" for i in range(1, 3001))
    assert read_text(path) == expected
    assert result.details["fullOutputPath"] == path
    assert result.details["truncation"]["truncatedBy"] == "lines"
    assert result.details["truncation"]["totalLines"] == 3001
    assert updates[-1].details["fullOutputPath"] == path


async def test_byte_truncation_of_one_huge_line(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(temp_dir=str(tmp_path)))
    result, _ = await run_one(tool, {"command": "head -c 60000 /dev/zero | tr '\\0' a"})
    body, notice = text(result).rsplit("\n\n", 1)
    assert body == "a" * 51200
    assert re.fullmatch(
        r"\[Showing last 50\.0KB of line 1 \(line is 58\.6KB\)\. Full output: .+\]", notice
    )
    assert result.details["truncation"]["lastLinePartial"] is True


async def test_byte_truncation_of_many_lines(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(temp_dir=str(tmp_path)))
    command = "for i in $(seq 1 100); do printf '%01000d\\n' $i; done"
    result, _ = await run_one(tool, {"command": command})
    notice = text(result).rsplit("\n\n", 1)[1]
    assert re.fullmatch(
        r"\[Showing lines 50-101 of 101 \(50\.0KB limit\)\. Full output: .+\]", notice
    )


async def test_failed_truncated_command_keeps_notice_and_status(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(temp_dir=str(tmp_path)))
    result, _ = await run_one(tool, {"command": "seq 1 2500; exit 2"})
    assert result.is_error is True
    message = text(result)
    assert "[Showing lines 502-2501 of 2501. Full output: " in message
    assert message.endswith("]\n\nCommand exited with code 2")
    assert result.details["fullOutputPath"].startswith(str(tmp_path))
    # the whole output (read back from the full-output file), under pi's 1 MB limit: not cut
    structured = result.structured_content
    assert structured["output"] == "".join(f"{n}\n" for n in range(1, 2501))
    assert structured["truncated"] is False and "full_output_path" not in structured
    assert structured["exit_code"] == 2


async def test_output_left_in_the_pipe_at_exit_is_read_when_the_reader_ran_late(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a loaded machine the reader may not run between the shell's exit and the end of the
    # grace: what the shell wrote is then still in the pipe, and must not be lost (it was:
    # "lines 14-65 of 65" instead of 101, under load). Here the reader never reads at all.
    def stalled(_stream: object, _size: int) -> object:
        async def read() -> bytes:
            await trio.sleep_forever()
            raise AssertionError("unreachable")

        return read

    monkeypatch.setattr(bash_module, "receiver", stalled)
    tool = create_bash_tool(str(tmp_path), BashSettings(temp_dir=str(tmp_path)))
    result, updates = await run_one(tool, {"command": "seq 1 2500; exit 2"})
    message = text(result)
    assert "[Showing lines 502-2501 of 2501. Full output: " in message
    assert message.endswith("]\n\nCommand exited with code 2")
    assert result.structured_content["output"] == "".join(f"{n}\n" for n in range(1, 2501))
    assert read_text(result.details["fullOutputPath"]) == result.structured_content["output"]
    assert text(updates[-1]).startswith("502\n")


async def test_timeout_ends_the_command(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    marker = unique_marker()
    tool = create_bash_tool(str(tmp_path), BashSettings(kill_grace=0.2))
    with pytest.raises(ToolError) as caught:
        await run_one(tool, {"command": f"sleep {marker}", "timeout": 5})
    assert str(caught.value) == "Command timed out after 5 seconds"
    assert not alive_with_marker(marker)


async def test_timeout_keeps_the_output_so_far(tmp_path: Path) -> None:
    tool = create_bash_tool(str(tmp_path), BashSettings(kill_grace=0.2))
    with pytest.raises(ToolError) as caught:
        await run_one(tool, {"command": "echo partial; sleep 30.7272", "timeout": 0.4})
    assert str(caught.value) == "partial\n\n\nCommand timed out after 0.4 seconds"


async def test_background_child_holding_the_pipe_does_not_hang(tmp_path: Path) -> None:
    marker = unique_marker()
    groups = ProcessGroups()
    tool = create_bash_tool(str(tmp_path), processes=groups)
    start = trio.current_time()
    result, _ = await run_one(tool, {"command": f"sleep {marker} & echo started"})
    assert text(result) == "started\n"
    assert trio.current_time() - start < 5
    assert alive_with_marker(marker) and groups.tracked()  # left running, but tracked
    await groups.terminate_all(grace=0.2)
    assert not alive_with_marker(marker)


def test_formatting_is_pure() -> None:
    output = OutputAccumulator(max_lines=3, max_bytes=1000)
    output.append(b"1\n2\n3\n4")
    output.finish()
    text_, details = format_output(
        output.snapshot(), last_line_bytes=1, full_output_path="/t/f.log", empty="(no output)"
    )
    assert text_ == "2\n3\n4\n\n[Showing lines 2-4 of 4. Full output: /t/f.log]"
    assert details is not None and details["fullOutputPath"] == "/t/f.log"
    assert with_status("", "Command aborted") == "Command aborted"
    assert with_status("out", "Command aborted") == "out\n\nCommand aborted"


async def test_updates_are_throttled(autojump_clock: trio.testing.MockClock) -> None:
    flushed: list[float] = []

    async def flush() -> None:
        flushed.append(trio.current_time())

    throttle = _Throttle(flush)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(throttle.run)
        throttle.mark()
        await trio.sleep(0.01)
        for _ in range(10):  # a burst: reported once, 100 ms after the previous report
            throttle.mark()
            await trio.sleep(0.005)
        await trio.sleep(1)
        throttle.mark()
        await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    assert len(flushed) == 3
    assert flushed[0] == pytest.approx(0.0)
    assert flushed[1] == pytest.approx(0.1)
    assert flushed[2] - flushed[1] >= 0.1


def _one_call(command: str) -> AssistantMessage:
    return AssistantMessage(
        content=(ToolCall(id="call_1", name="bash", arguments={"command": command}),),
        api="faux-api",
        provider="faux",
        model="faux-1",
        usage=Usage(),
        stop_reason="toolUse",
        timestamp=1,
    )


async def test_abort_kills_the_whole_tree_and_reports_the_output(tmp_path: Path) -> None:
    """``bash "sleep 30"`` whose command has children and grandchildren; abort; none left."""
    marker = unique_marker()
    command = (
        f"bash -c 'sleep {marker} & sleep {marker} & wait' & "
        f"sh -c 'sh -c \"sleep {marker}\" & sleep {marker}' & "
        f"sh -c \"trap '' TERM; sleep {marker}\" & "  # ignores SIGTERM: needs the SIGKILL
        f"echo ready; sleep {marker}"
    )
    groups = ProcessGroups()
    tool = create_bash_tool(str(tmp_path), BashSettings(kill_grace=0.3), groups)
    abort = RunAbort()
    events: list[AgentEvent] = []

    async def emit(event: AgentEvent) -> None:
        events.append(event)
        if isinstance(event, ToolExecutionUpdate) and "ready" in text(event.partial_result):
            with trio.move_on_after(5):  # let every descendant start (no event tells us)
                while len(alive_with_marker(marker)) < 7:  # noqa: ASYNC110
                    await trio.sleep(0.01)
            abort.abort()

    batch = ToolBatch(assistant_message=_one_call(command), tools=(tool,))
    with trio.fail_after(20):
        result = await run_tool_batch(batch, emit=emit, abort=abort)
    message = result.messages[0]
    assert message.is_error
    assert text(message) == "ready\n\n\nCommand aborted"  # type: ignore[arg-type]
    assert message.details == {}
    end = next(e for e in events if isinstance(e, ToolExecutionEnd))
    assert end.is_error
    assert alive_with_marker(marker) == []
    assert not groups.tracked()


async def test_abort_before_start_reports_command_aborted(tmp_path: Path) -> None:
    abort = RunAbort()
    abort.abort()
    tool = create_bash_tool(str(tmp_path))

    async def emit(event: AgentEvent) -> None:
        pass

    batch = ToolBatch(assistant_message=_one_call("echo never"), tools=(tool,))
    result = await run_tool_batch(batch, emit=emit, abort=abort)
    assert text(result.messages[0]) == "Command aborted"  # type: ignore[arg-type]


async def test_what_the_os_cannot_take_is_refused_with_its_name(tmp_path: Path) -> None:
    """Issue 36: the command (a model's), the prefix (settings) and the environment (the
    SDK's): each refused before the spawn with the field named, nothing started."""
    marker = tmp_path / "ran"
    cases = [
        (BashSettings(), f"touch {marker} \ud800", "The command contains a lone surrogate"),
        (
            BashSettings(command_prefix="X=\udfff"),
            f"touch {marker}",
            "The shellCommandPrefix contains a lone surrogate (\\udfff at offset 2)",
        ),
        (
            BashSettings(env={"PATH": os.environ["PATH"], "V": "a\ud800"}),
            f"touch {marker}",
            "The environment variable 'V' contains a lone surrogate (\\ud800 at offset 1)",
        ),
        (
            BashSettings(env={"PATH": os.environ["PATH"], "V": "a\0b"}),
            f"touch {marker}",
            "The environment variable 'V' contains a NUL character (at offset 1)",
        ),
    ]
    for settings, command, problem in cases:
        tool = create_bash_tool(str(tmp_path), settings)
        with pytest.raises(PitrioError) as caught:
            await run_one(tool, {"command": command})
        assert str(caught.value).startswith(problem), caught.value
    assert not marker.exists()
