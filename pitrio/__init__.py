"""pitrio: pi's agent session runtime as trio actors. This module is the public SDK.

``open_agent`` starts the actors of one agent (model router, tool executor, agent loop) and the
session recorder in a nursery, and yields an :class:`Agent` handle. Leaving the ``async with``
stops them all.

    async with pitrio.open_agent(model="faux/echo", persist=False) as agent:
        events = agent.subscribe()
        await agent.prompt("hello")
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle, AgentState, LoopOptions
from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    FauxToolCall,
    ModelRouterHandle,
    start_model_router,
)
from pitrio.actors.model_router.thinking import DEFAULT_THINKING_LEVEL, clamp_thinking_level
from pitrio.actors.session.recorder import SessionRecorder
from pitrio.actors.session_store.paths import session_dir, session_file_name
from pitrio.actors.session_store.writer import SessionWriter, new_header
from pitrio.actors.tool_executor import AgentTool, ToolExecutor, ToolExecutorHandle
from pitrio.errors import PitrioError, collapse_groups
from pitrio.messages.agent import AgentMessage, user_message
from pitrio.messages.entries import SessionHeader
from pitrio.messages.events import AgentEvent

__all__ = [
    "DEFAULT_MODEL",
    "Agent",
    "FauxProvider",
    "FauxReply",
    "FauxToolCall",
    "PitrioError",
    "open_agent",
]

DEFAULT_MODEL = "faux/echo"


class Agent:
    """A running agent: prompt it, subscribe to its events, read its state."""

    def __init__(
        self,
        loop: AgentLoopHandle,
        router: ModelRouterHandle,
        tools: ToolExecutorHandle,
        recorder: SessionRecorder,
    ) -> None:
        self.loop = loop
        self.router = router
        self.tools = tools
        self._recorder = recorder

    @property
    def header(self) -> SessionHeader:
        """The session's header line."""
        return self._recorder.writer.header

    @property
    def session_file(self) -> Path | None:
        """The session file (it exists once the first assistant message does), if persisted."""
        return self._recorder.writer.path

    def subscribe(self, capacity: int = 1024) -> trio.MemoryReceiveChannel[AgentEvent]:
        """Every event from now on, in order; a subscriber that falls behind slows the agent."""
        return self._recorder.subscribe(capacity)

    async def prompt(self, text: str) -> tuple[AgentMessage, ...]:
        """Run one prompt; returns its new messages once every event is delivered and saved."""
        result = await self.loop.run_prompt((user_message(text),))
        await self._recorder.wait_run_end(result.run)
        return result.messages

    async def abort(self) -> None:
        """Abort the active run and wait until the agent is idle."""
        await self.loop.abort()

    async def state(self) -> AgentState:
        """A snapshot of the agent's state."""
        return await self.loop.state()


@asynccontextmanager
async def open_agent(
    *,
    model: str | None = None,
    cwd: str | None = None,
    persist: bool = True,
    session_dir_override: str | None = None,
    system_prompt: str = "",
    thinking_level: str | None = None,
    tools: Sequence[AgentTool] = (),
    faux: FauxProvider | None = None,
    options: LoopOptions | None = None,
) -> AsyncIterator[Agent]:
    """Start an agent on ``model`` (``provider/id``) and yield its handle.

    Raises :class:`~pitrio.errors.UnknownModelError` if the model is not registered. With
    ``persist`` the session is written as a pi JSONL v3 file under the session dir of ``cwd``.
    """
    cwd = cwd or os.getcwd()
    with collapse_groups():
        async with _agent_nursery(
            model=model,
            cwd=cwd,
            persist=persist,
            session_dir_override=session_dir_override,
            system_prompt=system_prompt,
            thinking_level=thinking_level,
            tools=tools,
            faux=faux,
            options=options,
        ) as agent:
            yield agent


@asynccontextmanager
async def _agent_nursery(
    *,
    model: str | None,
    cwd: str,
    persist: bool,
    session_dir_override: str | None,
    system_prompt: str,
    thinking_level: str | None,
    tools: Sequence[AgentTool],
    faux: FauxProvider | None,
    options: LoopOptions | None,
) -> AsyncIterator[Agent]:
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux=faux)
        resolved, level_from_pattern = await router.resolve_pattern(model or DEFAULT_MODEL)
        executor = ToolExecutorHandle(
            await nursery.start(ToolExecutor(tools, builtin=True, cwd=cwd).run)
        )
        header = new_header(cwd)
        path = None
        if persist:
            directory = session_dir(cwd, override=session_dir_override)
            path = directory / session_file_name(header.timestamp, header.id)
        writer = SessionWriter(header, path)
        writer.append_model_change(resolved.provider, resolved.id)
        # pi's default is "medium", clamped to what the model supports ("off" without reasoning).
        # An explicit level wins over a ``provider/id:level`` suffix; pi's default is medium.
        level = clamp_thinking_level(
            resolved, thinking_level or level_from_pattern or DEFAULT_THINKING_LEVEL
        )
        writer.append_thinking_level_change(level)
        agent_loop = AgentLoop(
            stream=router.stream,
            tools=executor,
            model=resolved,
            system_prompt=system_prompt,
            thinking_level=level,
            options=options,
        )
        loop = AgentLoopHandle(await nursery.start(agent_loop.run))
        recorder = SessionRecorder(writer)
        await nursery.start(recorder.pump, await loop.subscribe())
        try:
            yield Agent(loop, router, executor, recorder)
        finally:
            nursery.cancel_scope.cancel()
