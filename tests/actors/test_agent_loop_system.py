"""The agent loop and the transcript's system messages (pi 1.6.0): the tools a run can call
are declared on a ``system`` message before its request, changes are patches, and a request's
system prompt and tools are the replay of the transcript's system messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle
from pitrio.actors.model_router import FauxProvider
from pitrio.actors.tool_executor import AgentTool, ToolExecutor, ToolExecutorHandle, text_result
from pitrio.actors.tool_executor.tool import UpdateFn
from pitrio.messages.agent import (
    AgentToolResult,
    SystemMessage,
    ToolReference,
    now_ms,
    user_message,
)
from pitrio.messages.events import AgentEvent
from tests.stray_cancel import no_stray_cancel

from .conftest import FAUX_1, shape


async def _ok(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
    return text_result("ok")


def tool(name: str, description: str = "") -> AgentTool:
    return AgentTool(
        name=name,
        description=description or f"The {name} tool.",
        execute=_ok,
        constrained_sampling={"type": "json_schema", "strict": "prefer"},
    )


@attrs.define
class Fixture:
    loop: AgentLoopHandle
    tools: ToolExecutorHandle
    faux: FauxProvider
    events: trio.MemoryReceiveChannel[AgentEvent]

    def drain(self) -> list[AgentEvent]:
        out: list[AgentEvent] = []
        while True:
            try:
                out.append(self.events.receive_nowait())
            except trio.WouldBlock:
                return out


@asynccontextmanager
async def running(*replies: Any, tools: list[AgentTool]) -> AsyncIterator[Fixture]:
    faux = FauxProvider(replies)
    async with trio.open_nursery() as nursery:
        executor = ToolExecutorHandle(await nursery.start(ToolExecutor(tools).run))
        actor = AgentLoop(stream=faux.stream, tools=executor, model=FAUX_1, system_prompt="base")
        loop = AgentLoopHandle(await nursery.start(actor.run))
        events = await loop.subscribe(capacity=10_000)
        with no_stray_cancel():
            yield Fixture(loop, executor, faux, events)
        nursery.cancel_scope.cancel()


def sections_message(**sections: str | None) -> SystemMessage:
    return SystemMessage(content="", sections=sections, timestamp=now_ms())


async def test_a_run_declares_its_tools_before_the_first_request_and_only_once() -> None:
    async with running("one", "two", tools=[tool("read"), tool("bash")]) as fx:
        new = await fx.loop.prompt("hi")
        events = fx.drain()
        assert shape(events)[:4] == [
            "agent_start",
            "turn_start",
            "message_start system",
            "message_end system",
        ]
        declared = new[0]
        assert isinstance(declared, SystemMessage)
        assert declared.content == "" and declared.sections is None
        assert declared.tools_removed is None
        assert declared.tools_added is not None
        assert [t.name for t in declared.tools_added] == ["read", "bash"]
        assert declared.tools_added[0].constrained_sampling == {
            "type": "json_schema",
            "strict": "prefer",
        }
        # No prompt section yet: the configured prompt; the tools from the declaration.
        request = fx.faux.last_request.context
        assert request.system_prompt == "base"
        assert [t.name for t in request.tools] == ["read", "bash"]
        assert [m.role for m in request.messages] == ["user"]  # not a chat message
        # The next run: nothing changed, nothing declared.
        again = await fx.loop.prompt("again")
        assert [m.role for m in again] == ["user", "assistant"]


async def test_the_request_prompt_is_the_replay_of_the_section_patches() -> None:
    async with running("one", "two", tools=[tool("read")]) as fx:
        first = sections_message(
            preamble="P", tools="<tools>\nT\n</tools>", cwd="<cwd>\n/w\n</cwd>"
        )
        new = await fx.loop.run_prompt((first, user_message("hi")))
        # The pending system message carries the tool declaration too (one message).
        assert [m.role for m in new.messages] == ["system", "user", "assistant"]
        system = new.messages[0]
        assert isinstance(system, SystemMessage)
        assert system.sections == first.sections
        assert system.timestamp == first.timestamp
        assert [t.name for t in system.tools_added or ()] == ["read"]
        request = fx.faux.last_request.context
        assert request.system_prompt == "P\n\n<tools>\nT\n</tools>\n\n<cwd>\n/w\n</cwd>"
        # A patch replaces one section in place and removes another.
        patch = sections_message(tools="<tools>\nT2\n</tools>", cwd=None)
        await fx.loop.run_prompt((patch, user_message("more")))
        assert fx.faux.last_request.context.system_prompt == "P\n\n<tools>\nT2\n</tools>"


async def test_a_changed_tool_set_is_declared_as_a_patch() -> None:
    async with running("one", "two", tools=[tool("read"), tool("bash"), tool("grep")]) as fx:
        await fx.tools.set_active(["read", "bash"])
        await fx.loop.prompt("hi")
        await fx.tools.set_active(["read", "grep"])
        new = await fx.loop.prompt("again")
        patch = new[0]
        assert isinstance(patch, SystemMessage)
        assert [t.name for t in patch.tools_added or ()] == ["grep"]
        assert patch.tools_removed == (ToolReference(name="bash"),)
        request = fx.faux.last_request.context
        assert [t.name for t in request.tools] == ["read", "grep"]


async def test_a_forced_prompt_replaces_the_transcripts_text_but_not_its_tools() -> None:
    async with running("one", "two", tools=[tool("read")]) as fx:
        first = sections_message(preamble="P")
        await fx.loop.configure(forced_system_prompt="forced")
        await fx.loop.run_prompt((first, user_message("hi")))
        request = fx.faux.last_request.context
        assert request.system_prompt == "forced"
        assert [t.name for t in request.tools] == ["read"]
        await fx.loop.configure(forced_system_prompt=None)
        await fx.loop.prompt("again")
        assert fx.faux.last_request.context.system_prompt == "P"
