"""The built-in tools driven by the agent loop: pi's recorded tool events, abort of a bash tree."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router import FauxProvider, FauxReply, FauxToolCall
from pitrio.actors.tool_executor import ToolExecutor, ToolExecutorHandle
from pitrio.messages.agent import ToolResultMessage
from pitrio.messages.codec import encode
from pitrio.messages.content import text_of
from pitrio.messages.events import AgentEvent, ToolExecutionUpdate
from tests.shared_dir import TRANSCRIPTS as TRANSCRIPT
from tests.stray_cancel import no_stray_cancel

from .conftest import FAUX_1
from .tools.support import alive_with_marker, unique_marker


@asynccontextmanager
async def agent(cwd: Path, *replies: Any) -> AsyncIterator[tuple[AgentLoopHandle, Any]]:
    faux = FauxProvider(replies)
    async with trio.open_nursery() as nursery:
        executor = ToolExecutorHandle(
            await nursery.start(ToolExecutor(builtin=True, cwd=str(cwd)).run)
        )
        loop = AgentLoopHandle(
            await nursery.start(AgentLoop(stream=faux.stream, tools=executor, model=FAUX_1).run)
        )
        events = await loop.subscribe(capacity=10_000)
        with no_stray_cancel():
            yield loop, events
        nursery.cancel_scope.cancel()


def drain(events: Any) -> list[AgentEvent]:
    out = []
    while True:
        try:
            out.append(events.receive_nowait())
        except trio.WouldBlock:
            return out


async def test_tool_events_match_pi_transcript(tmp_path: Path) -> None:
    """``prompt_tool_call``: read notes.txt, then bash ls; tool events byte for byte."""
    (tmp_path / "notes.txt").write_text("Project notes\n- first item\n- second item\n")
    (tmp_path / "README.md").write_text("# demo\n")
    (tmp_path / "src").mkdir()
    replies = [
        FauxReply(tool_calls=[FauxToolCall("read", {"path": "notes.txt"})]),
        FauxReply(tool_calls=[FauxToolCall("bash", {"command": "ls"})]),
        "done",
    ]
    async with agent(tmp_path, *replies) as (loop, events):
        await loop.prompt("Look at the project")
        seen = drain(events)
    ours = [encode(e).decode() for e in seen if e.type.startswith("tool_execution")]
    expected_file = TRANSCRIPT / "prompt_tool_call.out.jsonl"
    expected = [
        line
        for line in expected_file.read_text().splitlines()
        if line.startswith('{"type":"tool_execution')
    ]
    # The transcript is pi 0.73.1's. pi 1.6.0 adds to tool_execution_end a last key
    # ``durationMs`` and to the result of read and bash a ``structuredContent`` after the
    # content; checked here, then taken out: the rest is still 0.73.1's byte for byte.
    assert [line.split(",")[0] for line in ours] == [line.split(",")[0] for line in expected]
    structured = []
    for index, line in enumerate(ours):
        if not line.startswith('{"type":"tool_execution_end"'):
            continue
        event = orjson.loads(line)
        assert list(event)[-1] == "durationMs"
        assert isinstance(event.pop("durationMs"), int)
        result = event["result"]
        assert list(result)[:2] == ["content", "structuredContent"]
        structured.append(result.pop("structuredContent"))
        ours[index] = orjson.dumps(event).decode()
    assert ours == expected
    read_text = "Project notes\n- first item\n- second item\n"
    assert structured[0] == read_text  # read: the text it read
    bash = structured[1]
    assert list(bash) == ["output", "truncated", "exit_code", "wall_time_seconds"]
    assert bash["output"] == "README.md\nnotes.txt\nsrc\n"
    assert bash["truncated"] is False and bash["exit_code"] == 0


async def test_abort_during_bash_through_the_loop(tmp_path: Path) -> None:
    marker = unique_marker()
    command = f"sh -c 'sleep {marker} & sleep {marker}' & echo started; sleep {marker}"
    replies = [FauxReply(tool_calls=[FauxToolCall("bash", {"command": command})]), "never"]
    async with agent(tmp_path, *replies) as (loop, events):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(loop.prompt, "run it")
            async for event in events:
                if isinstance(event, ToolExecutionUpdate) and "started" in text_of(
                    event.partial_result.content
                ):
                    break
            with trio.fail_after(10):
                await loop.abort()
        state = await loop.state()
    result = next(m for m in state.messages if isinstance(m, ToolResultMessage))
    assert result.is_error
    assert text_of(result.content) == "started\n\n\nCommand aborted"
    assert state.messages[-1].stop_reason == "aborted"  # type: ignore[union-attr]
    assert state.pending_tool_calls == frozenset()
    assert alive_with_marker(marker) == []
