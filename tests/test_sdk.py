"""The public SDK (pitrio/__init__.py): open_agent and the Agent handle."""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing

import pitrio
from pitrio import FauxProvider, FauxReply, FauxToolCall, open_agent
from pitrio.actors.session_store.paths import encode_cwd
from pitrio.actors.tool_executor import AgentTool, text_result
from pitrio.errors import UnknownModelError
from pitrio.messages.agent import (
    AgentToolResult,
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import from_json
from pitrio.messages.content import TextContent, text_of
from pitrio.messages.entries import FileLine, MessageEntry, SessionHeader
from pitrio.messages.events import AgentEnd, AgentEvent, MessageEnd, MessageStart

BUILTIN_TOOLS = ["read", "bash", "edit", "write"]


def drain(channel: trio.MemoryReceiveChannel[AgentEvent]) -> list[AgentEvent]:
    events: list[AgentEvent] = []
    while True:
        try:
            events.append(channel.receive_nowait())
        except trio.WouldBlock:
            return events


def event_names(events: list[AgentEvent]) -> list[str]:
    names = []
    for event in events:
        if isinstance(event, MessageStart | MessageEnd):
            names.append(f"{event.type}({event.message.role})")
        else:
            names.append(event.type)
    return names


# Every test runs away from the real home and agent dir (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("isolated_dirs")


async def test_prompt_returns_user_and_assistant() -> None:
    faux = FauxProvider(["hi there"])
    async with open_agent(model="faux/faux-1", faux=faux, persist=False) as agent:
        messages = await agent.prompt("hello")
    # pi 1.6.0: the first run of a new transcript declares the tool set on a leading system
    # message (no prompt text here), emitted and returned with the run's new messages.
    assert len(messages) == 3
    system, user, reply = messages
    assert isinstance(system, SystemMessage)
    assert system.content == ""
    assert [tool.name for tool in system.tools_added or ()] == BUILTIN_TOOLS
    assert isinstance(user, UserMessage)
    assert user.content == (TextContent(text="hello"),)
    assert isinstance(reply, AssistantMessage)
    assert reply.content == (TextContent(text="hi there"),)
    assert (reply.provider, reply.model, reply.stop_reason) == ("faux", "faux-1", "stop")
    # The model was sent the prompt.
    assert len(faux.requests) == 1
    assert text_of(faux.requests[0].context.messages[-1].content) == "hello"  # type: ignore[arg-type]


async def test_default_model_echoes() -> None:
    async with open_agent(persist=False) as agent:
        _system, _user, reply = await agent.prompt("echo me")
        state = await agent.state()
    assert isinstance(reply, AssistantMessage)
    assert reply.content == (TextContent(text="echo me"),)
    assert state.model.provider + "/" + state.model.id == pitrio.DEFAULT_MODEL
    assert [m.role for m in state.messages] == ["system", "user", "assistant"]


async def test_second_prompt_sees_the_first() -> None:
    faux = FauxProvider(["one", "two"])
    async with open_agent(model="faux/faux-1", faux=faux, persist=False) as agent:
        first = await agent.prompt("a")
        messages = await agent.prompt("b")
        state = await agent.state()
    # The tool set is declared once, by the first run; the second declares nothing new.
    assert [m.role for m in first] == ["system", "user", "assistant"]
    assert [text_of(m.content) for m in messages] == ["b", "two"]  # type: ignore[union-attr]
    roles = [m.role for m in state.messages]
    assert roles == ["system", "user", "assistant", "user", "assistant"]
    # The system message becomes the request's prompt and tools, not one of its messages.
    assert len(faux.requests[1].context.messages) == 3
    assert [tool.name for tool in faux.requests[1].context.tools] == BUILTIN_TOOLS


async def test_events_arrive_in_order_and_end_with_agent_end() -> None:
    faux = FauxProvider(["hello back"])
    async with open_agent(model="faux/faux-1", faux=faux, persist=False) as agent:
        events_channel = agent.subscribe()
        messages = await agent.prompt("hello")
        # prompt() returns once every event of the run is delivered: all are buffered now.
        events = drain(events_channel)
    names = event_names(events)
    assert names[:7] == [
        "agent_start",
        "turn_start",
        "message_start(system)",
        "message_end(system)",
        "message_start(user)",
        "message_end(user)",
        "message_start(assistant)",
    ]
    assert names[-3:] == ["message_end(assistant)", "turn_end", "agent_end"]
    middle = names[7:-3]
    assert middle and set(middle) == {"message_update"}
    last = events[-1]
    assert isinstance(last, AgentEnd)
    assert last.messages == messages


async def test_events_of_a_tool_call_turn() -> None:
    async def run(_call_id: str, args: dict[str, Any], _update: Any) -> AgentToolResult:
        return text_result(f"got {args['x']}")

    faux = FauxProvider(
        [FauxReply(tool_calls=[FauxToolCall("probe", {"x": 7}, id="call_a")]), "final"]
    )
    async with open_agent(
        model="faux/faux-1",
        faux=faux,
        persist=False,
        tools=[AgentTool(name="probe", execute=run)],
    ) as agent:
        events_channel = agent.subscribe()
        messages = await agent.prompt("use the tool")
        events = drain(events_channel)
    assert [m.role for m in messages] == ["system", "user", "assistant", "toolResult", "assistant"]
    assert [tool.name for tool in messages[0].tools_added or ()] == [  # type: ignore[union-attr]
        *BUILTIN_TOOLS,
        "probe",
    ]
    result = messages[3]
    assert isinstance(result, ToolResultMessage)
    assert result.tool_call_id == "call_a"
    assert result.content == (TextContent(text="got 7"),)
    names = [n for n in event_names(events) if n != "message_update"]
    assert names == [
        "agent_start",
        "turn_start",
        "message_start(system)",
        "message_end(system)",
        "message_start(user)",
        "message_end(user)",
        "message_start(assistant)",
        "message_end(assistant)",
        "tool_execution_start",
        "tool_execution_end",
        "message_start(toolResult)",
        "message_end(toolResult)",
        "turn_end",
        "turn_start",
        "message_start(assistant)",
        "message_end(assistant)",
        "turn_end",
        "agent_end",
    ]


async def test_a_subscriber_sees_only_later_events() -> None:
    async with open_agent(persist=False) as agent:
        await agent.prompt("first")
        events_channel = agent.subscribe()
        await agent.prompt("second")
        events = drain(events_channel)
    starts = [e for e in events if isinstance(e, MessageStart)]
    assert text_of(starts[0].message.content) == "second"  # type: ignore[union-attr]
    assert sum(isinstance(e, AgentEnd) for e in events) == 1


async def test_unknown_model_raises_unknown_model_error_not_a_group() -> None:
    entered = False
    with pytest.raises(UnknownModelError) as info:
        async with open_agent(model="faux/nope", persist=False):
            entered = True
    assert not entered
    assert type(info.value) is UnknownModelError
    assert "faux/nope" in str(info.value)
    assert isinstance(info.value, pitrio.PitrioError)


async def test_errors_in_the_body_propagate_unwrapped() -> None:
    with pytest.raises(ValueError, match="from the body"):
        async with open_agent(persist=False) as agent:
            await agent.prompt("x")
            raise ValueError("from the body")


async def test_leaving_the_block_stops_the_agent() -> None:
    async with open_agent(persist=False) as agent:
        await agent.prompt("x")
    with pytest.raises(pitrio.PitrioError):
        await agent.state()


async def test_session_file_in_a_session_dir(tmp_path: Path) -> None:
    directory = tmp_path / "my-sessions"
    faux = FauxProvider(["answer"])
    async with open_agent(
        model="faux/faux-think",  # a reasoning model keeps "low" (faux-1 would clamp to "off")
        faux=faux,
        cwd="/home/u/proj",
        session_dir_override=str(directory),
        thinking_level="low",
    ) as agent:
        path = agent.session_file
        assert path is not None
        assert path.parent == directory
        assert not path.exists()  # lazy: nothing before the first user message (pi 1.6.0)
        await agent.prompt("question")
        # prompt() returns once the run's messages are saved.
        data = path.read_bytes()
        header = agent.header
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_" + header.id + r"\.jsonl", path.name
    )
    assert path.name.startswith(header.timestamp.replace(":", "-").replace(".", "-"))
    lines = [orjson.loads(line) for line in data.splitlines()]
    decoded = [from_json(line, FileLine) for line in lines]  # type: ignore[arg-type]
    assert decoded[0] == header
    assert isinstance(header, SessionHeader)
    assert (header.cwd, header.version) == ("/home/u/proj", 3)
    assert [line["type"] for line in lines] == [
        "session",
        "model_change",
        "thinking_level_change",
        "message",
        "message",
        "message",
    ]
    assert (lines[1]["provider"], lines[1]["modelId"]) == ("faux", "faux-think")
    assert lines[2]["thinkingLevel"] == "low"
    # pi 1.6.0 stores the run's leading system message (the declared tools) before the prompt.
    assert [line["message"]["role"] for line in lines[3:]] == ["system", "user", "assistant"]
    assert [tool["name"] for tool in lines[3]["message"]["toolsAdded"]] == BUILTIN_TOOLS
    assert lines[5]["message"]["content"] == [{"type": "text", "text": "answer"}]
    assert lines[1]["parentId"] is None
    for previous, line in itertools.pairwise(lines[1:]):
        assert line["parentId"] == previous["id"]
    entries = [d for d in decoded[1:] if isinstance(d, MessageEntry)]
    assert [type(e.message) for e in entries] == [SystemMessage, UserMessage, AssistantMessage]


async def test_session_file_in_the_default_dir(isolated_dirs: Path) -> None:
    cwd = str(isolated_dirs / "proj")
    async with open_agent(cwd=cwd) as agent:
        await agent.prompt("hello")
        path = agent.session_file
    assert path is not None
    assert path.parent == isolated_dirs / "agent" / "sessions" / encode_cwd(cwd)
    assert path.exists()
    # header, model_change, thinking_level_change, then the system, user and assistant messages
    assert len(path.read_bytes().splitlines()) == 6


async def test_session_dir_env(isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PITRIO_SESSION_DIR", str(isolated_dirs / "env-dir"))
    async with open_agent() as agent:
        await agent.prompt("hello")
        path = agent.session_file
    assert path is not None and path.parent == isolated_dirs / "env-dir"
    assert path.exists()


async def test_cwd_defaults_to_the_process_cwd(
    isolated_dirs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(isolated_dirs)
    async with open_agent(persist=False) as agent:
        assert agent.header.cwd == os.getcwd()


async def test_persist_false_writes_nothing(isolated_dirs: Path) -> None:
    async with open_agent(persist=False) as agent:
        await agent.prompt("hello")
        assert agent.session_file is None
    assert not (isolated_dirs / "agent").exists()


async def test_an_error_reply_is_persisted(tmp_path: Path) -> None:
    """An error reply is still an assistant message: it is saved (as in pi)."""
    faux = FauxProvider([FauxReply(error="boom")])
    async with open_agent(
        model="faux/faux-1", faux=faux, session_dir_override=str(tmp_path / "s")
    ) as agent:
        _system, _user, reply = await agent.prompt("x")
        path = agent.session_file
    assert isinstance(reply, AssistantMessage)
    assert (reply.stop_reason, reply.error_message) == ("error", "boom")
    assert path is not None
    last = orjson.loads(path.read_bytes().splitlines()[-1])
    assert last["message"]["stopReason"] == "error"
    assert last["message"]["errorMessage"] == "boom"


async def test_prompt_after_a_cancelled_prompt_still_waits_for_its_save(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Regression: prompt() counted runs, so after a caller gave up on one prompt (its run went
    on in the agent), the next prompt() returned before its own messages were saved."""
    slow = FauxReply(text="slow " * 10, chunk_size=5, chunk_delay=1.0)
    faux = FauxProvider([slow, "second reply"])
    async with open_agent(
        model="faux/faux-1", faux=faux, session_dir_override=str(tmp_path)
    ) as agent:
        with trio.move_on_after(2.5) as scope:
            await agent.prompt("first")
        assert scope.cancelled_caught
        await agent.loop.wait_for_idle()
        messages = await agent.prompt("second")
        path = agent.session_file
        assert path is not None
        lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert text_of(messages[-1].content) == "second reply"  # type: ignore[union-attr]
    texts = [
        line["message"]["content"][0]["text"]
        for line in lines
        if line["type"] == "message" and line["message"]["role"] != "system"
    ]
    assert texts[-2:] == ["second", "second reply"]
