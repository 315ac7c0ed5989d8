"""A session actor wired to real agent-loop, store, router and tool-executor actors, for the
session tests that drive it directly (commands, races)."""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import attrs
import trio
import trio.testing

from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle, LoopOptions
from pitrio.actors.model_router import FAUX_MODELS, FauxProvider, RouterConfig, start_model_router
from pitrio.actors.model_router.providers.faux_rules import FixtureRules
from pitrio.actors.session.actor import SessionActor
from pitrio.actors.session.commands import SessionSettings
from pitrio.actors.session.extensions.runner import ExtensionRunner
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.handle import SessionHandle
from pitrio.actors.session_store import SessionStoreHandle, create_store
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.actors.tool_executor import AgentTool, ToolExecutor, ToolExecutorHandle
from pitrio.messages.events import AgentSessionEvent
from pitrio.messages.model import Model
from tests.stray_cancel import no_stray_cancel

FAUX_1 = next(m for m in FAUX_MODELS if m.id == "faux-1")
FAUX_SMALL = next(m for m in FAUX_MODELS if m.id == "faux-small")
FIXTURE_SETTINGS = SessionSettings(
    retry=RetrySettings(max_retries=2, base_delay_ms=50),
    compaction=CompactionSettings(keep_recent_tokens=60),
)
"""The recording settings of pi's fixtures (fixtures README)."""


@attrs.define
class Fixture:
    """The running session's handles, its scripted model and its event subscription."""

    session: SessionHandle
    store: SessionStoreHandle
    faux: FauxProvider
    events: trio.MemoryReceiveChannel[Sequenced]
    actor: SessionActor | None = None
    loop: AgentLoopHandle | None = None

    async def drain(self) -> list[AgentSessionEvent]:
        """Every event delivered so far (the feeder hands them over one at a time)."""
        out: list[AgentSessionEvent] = []
        while True:
            await trio.testing.wait_all_tasks_blocked()
            try:
                out.append(self.events.receive_nowait().event)
            except trio.WouldBlock:
                return out

    async def until(self, kind: str) -> list[AgentSessionEvent]:
        """The events up to and including the next one of type ``kind``."""
        out: list[AgentSessionEvent] = []
        async for item in self.events:
            out.append(item.event)
            if item.event.type == kind:
                return out
        raise AssertionError(f"no {kind}")


@asynccontextmanager
async def session(
    faux: FauxProvider | None = None,
    *,
    model: Model = FAUX_1,
    settings: SessionSettings = FIXTURE_SETTINGS,
    tools: Sequence[AgentTool] = (),
    extensions: ExtensionRunner | None = None,
    routed: bool = False,
) -> AsyncIterator[Fixture]:
    """A session in memory (``faux`` scripts the model; default: the fixtures' rules).
    ``routed``: the loop sends the session's id with its requests, as a started session's
    does (the fixtures' recordings have none)."""
    faux = faux or FauxProvider(default=FixtureRules())
    async with trio.open_nursery() as nursery:
        router = await start_model_router(nursery, faux, config=RouterConfig(catalogue=False))
        store = await create_store(nursery, tempfile.gettempdir(), persist=False)
        # A session starts with its model and thinking level recorded, as pi's do.
        await store.append_model_change(model.provider, model.id)
        await store.append_thinking_level_change("off")
        executor = ToolExecutorHandle(await nursery.start(ToolExecutor(list(tools)).run))
        options = LoopOptions(session_id=store.header.id if routed else None)
        agent_loop = AgentLoop(stream=router.stream, model=model, tools=executor, options=options)
        loop = AgentLoopHandle(await nursery.start(agent_loop.run))
        actor = SessionActor(
            loop=loop, store=store, router=router, settings=settings, extensions=extensions
        )
        handle = SessionHandle(await nursery.start(actor.run))
        events = await handle.subscribe(capacity=100_000)
        with no_stray_cancel():
            yield Fixture(
                session=handle, store=store, faux=faux, events=events, actor=actor, loop=loop
            )
        nursery.cancel_scope.cancel()
