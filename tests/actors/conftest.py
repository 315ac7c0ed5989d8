"""Shared helpers for actor tests: a running agent loop over a faux model."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle, LoopHooks, LoopOptions
from pitrio.actors.model_router import FAUX_MODELS, FauxProvider
from pitrio.actors.tool_executor import AgentTool, ToolExecutor, ToolExecutorHandle
from pitrio.messages.agent import AgentMessage
from pitrio.messages.events import AgentEvent, MessageUpdate, ToolExecutionEnd
from pitrio.messages.model import Model
from tests.stray_cancel import no_stray_cancel

FAUX_1: Model = next(model for model in FAUX_MODELS if model.id == "faux-1")


@attrs.define
class LoopFixture:
    """A running loop, its faux model, and the events it emitted so far."""

    loop: AgentLoopHandle
    faux: FauxProvider
    events: trio.MemoryReceiveChannel[AgentEvent]
    seen: list[AgentEvent] = attrs.field(factory=list)

    def drain(self) -> list[AgentEvent]:
        """Every event emitted since the last drain (the channel is large enough to hold all)."""
        fresh: list[AgentEvent] = []
        while True:
            try:
                fresh.append(self.events.receive_nowait())
            except trio.WouldBlock:
                break
        self.seen.extend(fresh)
        return fresh


@asynccontextmanager
async def running_loop(
    *replies: Any,
    tools: Sequence[AgentTool] = (),
    messages: Sequence[AgentMessage] = (),
    options: LoopOptions | None = None,
    hooks: LoopHooks | None = None,
    faux: FauxProvider | None = None,
    model: Model = FAUX_1,
) -> AsyncIterator[LoopFixture]:
    """Start a tool executor and an agent loop on a faux model; stop them afterwards."""
    faux = faux or FauxProvider(replies)
    async with trio.open_nursery() as nursery:
        executor = ToolExecutorHandle(await nursery.start(ToolExecutor(tools).run))
        actor = AgentLoop(
            stream=faux.stream,
            tools=executor,
            model=model,
            messages=messages,
            options=options,
            hooks=hooks,
        )
        loop = AgentLoopHandle(await nursery.start(actor.run))
        events = await loop.subscribe(capacity=100_000)
        with no_stray_cancel():
            yield LoopFixture(loop=loop, faux=faux, events=events)
        nursery.cancel_scope.cancel()


def shape(events: Sequence[AgentEvent]) -> list[str]:
    """A compact description of an event sequence, for order assertions.

    ``message_update`` runs are collapsed to one ``message_update``; messages show their role.
    """
    out: list[str] = []
    for event in events:
        name = event.type
        if isinstance(event, MessageUpdate):
            if out and out[-1] == "message_update":
                continue
        elif name in ("message_start", "message_end"):
            name += f" {event.message.role}"  # type: ignore[union-attr]
        elif name.startswith("tool_execution"):
            name += f" {event.tool_name}"  # type: ignore[union-attr]
            if isinstance(event, ToolExecutionEnd) and event.is_error:
                name += " error"
        out.append(name)
    return out


@pytest.fixture
def quiet_pitrio_log() -> Iterator[None]:
    """pitrio's log at CRITICAL for one test: its scenarios provoke what the log reports
    (aborted requests, a foreign writer) and its output would only be noise."""
    logger = logging.getLogger("pitrio")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)
