"""The public SDK's agents and sessions: what :mod:`pitrio` exports, loaded on its first use.

:func:`open_agent` yields an :class:`Agent` (one agent's actors and its recorder) and
:func:`create_session` an :class:`AgentSession` (pi's ``AgentSession``); :mod:`pitrio`'s
docstring shows them in use.
"""

from __future__ import annotations

# First: attrs classes defined by the imports below reuse their cached methods (start-up time).
from pitrio import _import_start  # noqa: F401  # isort: skip

import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from pitrio import _attrs_cache
from pitrio.actors.agent_loop import AgentLoop, AgentLoopHandle, AgentState, LoopOptions
from pitrio.actors.model_router import (
    FauxProvider,
    FauxReply,
    FauxToolCall,
    ModelRouterHandle,
    start_model_router,
)
from pitrio.actors.model_router.thinking import DEFAULT_THINKING_LEVEL, clamp_thinking_level
from pitrio.actors.session.bootstrap import (
    DEFAULT_MODEL,
    SessionOptions,
    StartedSession,
    start_session,
)
from pitrio.actors.session.commands import StreamingBehavior
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.recorder import SessionRecorder
from pitrio.actors.session_store.paths import session_dir, session_file_name
from pitrio.actors.session_store.writer import SessionWriter, new_header
from pitrio.actors.tool_executor import AgentTool, ToolExecutor, ToolExecutorHandle
from pitrio.errors import PitrioError, collapse_groups
from pitrio.messages.agent import AgentMessage, user_message
from pitrio.messages.content import ImageContent
from pitrio.messages.entries import CompactionResult, SessionHeader
from pitrio.messages.events import AgentEvent, AgentSessionEvent
from pitrio.messages.model import Model

_attrs_cache.uninstall()

if TYPE_CHECKING:
    from pitrio.actors.model_router import FixtureRules
    from pitrio.actors.session.extensions.ui import UiResponse

# Everything pitrio's own namespace serves from here (``pitrio.__getattr__``): what it held
# when it imported the SDK itself.
__all__ = [
    "DEFAULT_MODEL",
    "DEFAULT_THINKING_LEVEL",
    "FAUX_SCRIPT_ENV",
    "FIXTURE_TOKENS_PER_SECOND",
    "Agent",
    "AgentEvent",
    "AgentLoop",
    "AgentLoopHandle",
    "AgentMessage",
    "AgentSession",
    "AgentSessionEvent",
    "AgentState",
    "AgentTool",
    "CompactionResult",
    "FauxProvider",
    "FauxReply",
    "FauxToolCall",
    "FixtureRules",
    "ImageContent",
    "LoopOptions",
    "Model",
    "ModelRouterHandle",
    "PitrioError",
    "Sequenced",
    "SessionHeader",
    "SessionOptions",
    "SessionRecorder",
    "SessionWriter",
    "StartedSession",
    "StreamingBehavior",
    "ToolExecutor",
    "ToolExecutorHandle",
    "UiResponse",
    "clamp_thinking_level",
    "collapse_groups",
    "create_session",
    "default_faux",
    "new_header",
    "open_agent",
    "session_dir",
    "session_file_name",
    "start_model_router",
    "start_session",
    "user_message",
]

FAUX_SCRIPT_ENV = "PITRIO_FAUX_SCRIPT"
"""Names the script of the built-in ``faux/*`` models (a testing aid, see :func:`default_faux`)."""
FIXTURE_TOKENS_PER_SECOND = 200.0
"""The pace of pi's fixture recordings: 15 ms per 12-character chunk."""


def default_faux(env: Mapping[str, str] | None = None) -> FauxProvider | None:
    """The faux provider ``$PITRIO_FAUX_SCRIPT`` asks for; ``None``: the echoing default.

    A testing aid, so a ``pitrio`` process (``--mode rpc`` included) can replay pi's recorded
    transcripts: ``fixture-rules`` answers with the reply rules of the model pi's fixtures were
    recorded with (``FixtureRules``), streamed at the recording's pace; ``load`` answers the
    load generator's ``load ...`` prompts with paced, time-stamped chunks (``LoadFaux``).
    Unset or empty means the plain echoing faux model; any other value is an error.
    """
    value = (os.environ if env is None else env).get(FAUX_SCRIPT_ENV, "")
    if not value:
        return None
    if value == "fixture-rules":
        from pitrio.actors.model_router import FixtureRules  # a testing aid's: first use

        return FauxProvider(default=FixtureRules(), tokens_per_second=FIXTURE_TOKENS_PER_SECOND)
    if value == "load":
        from pitrio.actors.model_router.providers.faux_load import LoadFaux

        return LoadFaux()
    raise PitrioError(f"{FAUX_SCRIPT_ENV}: unknown script {value!r} (known: fixture-rules, load)")


class AgentSession:
    """A running session (pi's ``AgentSession``): prompt it, queue messages, subscribe, abort.

    Every method sends a command to the session actor and awaits its answer; the session keeps
    serving while a run is in progress.
    """

    def __init__(self, started: StartedSession, router: ModelRouterHandle) -> None:
        self.handle = started.session
        self.store = started.store
        self.loop = started.loop
        self.tools = started.tools
        self.router = router
        self.notices = started.notices
        self.mcp = started.mcp
        """The MCP tool set (``None`` without servers): they connect in the background;
        ``await session.mcp.wait()`` returns once each one's first start has ended."""

    @property
    def header(self) -> SessionHeader:
        """The session's header line."""
        return self.store.header

    @property
    def session_file(self) -> Path | None:
        """The session file (it exists once the first prompt, or another acknowledged entry,
        is recorded), if persisted."""
        return self.store.path

    async def prompt(
        self,
        text: str,
        *,
        images: Sequence[ImageContent] = (),
        streaming_behavior: StreamingBehavior | None = None,
    ) -> None:
        """Send a prompt; returns when its run settles (at once when it was only queued)."""
        await self.handle.prompt(text, images=images, streaming_behavior=streaming_behavior)

    async def steer(self, text: str) -> None:
        """Queue a steering message."""
        await self.handle.steer(text)

    async def follow_up(self, text: str) -> None:
        """Queue a follow-up message."""
        await self.handle.follow_up(text)

    async def abort(self) -> None:
        """Abort the active run and return once the session is idle."""
        await self.handle.abort()

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        await self.handle.wait_for_idle()

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult:
        """Compact the session now."""
        return await self.handle.compact(custom_instructions)

    async def set_model(self, provider: str, model_id: str) -> Model:
        """Switch to another available model."""
        return await self.handle.set_model(provider, model_id)

    async def set_thinking_level(self, level: str) -> str:
        """Set the thinking level (clamped to the model); returns the effective level."""
        return await self.handle.set_thinking_level(level)

    async def messages(self) -> tuple[AgentMessage, ...]:
        """The current context."""
        return await self.handle.messages()

    async def respond_ui(
        self,
        dialog_id: str,
        *,
        value: str | None = None,
        confirmed: bool | None = None,
        cancelled: bool = False,
    ) -> None:
        """Answer an extension's dialog (an ``extension_ui_request`` event's ``id``)."""
        with _attrs_cache.caching():  # the UI protocol: first use, its classes from the cache
            from pitrio.actors.session.extensions.ui import UiResponse
        await self.handle.respond_ui(
            UiResponse(id=dialog_id, value=value, confirmed=confirmed, cancelled=cancelled)
        )

    async def subscribe(self, capacity: int = 4096) -> trio.MemoryReceiveChannel[Sequenced]:
        """Every event from now on, each with its ``seq``."""
        return await self.handle.subscribe(capacity)

    async def events(self, capacity: int = 4096) -> AsyncIterator[AgentSessionEvent]:
        """Every event from now on, as an async iterator of typed events."""
        async with await self.handle.subscribe(capacity) as channel:
            async for item in channel:
                yield item.event


@asynccontextmanager
async def create_session(
    *,
    cwd: str | None = None,
    model: str | None = None,
    thinking_level: str | None = None,
    session: str | None = None,
    continue_recent: bool = False,
    fork: str | None = None,
    persist: bool = True,
    session_dir: str | None = None,
    tools: Sequence[AgentTool] = (),
    builtin_tools: bool = True,
    system_prompt: str | None = None,
    faux: FauxProvider | None = None,
    router: ModelRouterHandle | None = None,
    extensions: Sequence[str] = (),
    no_extensions: bool = False,
    ui_clients: bool = False,
    extension_args: Sequence[str] = (),
    active_tools: Sequence[str] | None = None,
    **more: Any,
) -> AsyncIterator[AgentSession]:
    """Start a session and yield its :class:`AgentSession`; leaving the block aborts a run in
    progress, waits for it to settle and stops the session's actors.

    Errors at start (an unknown model, a locked or broken session file) are raised as the
    :class:`~pitrio.errors.PitrioError` they are, never as an exception group.

    ``extensions`` are paths of Python extensions to load after the discovered ones
    (``no_extensions``: only these). With ``ui_clients`` an extension's dialogs reach
    subscribers as ``extension_ui_request`` events, answered with
    :meth:`AgentSession.respond_ui`; without, they return their defaults at once.
    ``active_tools`` names the tools to activate (``[]``: none). Any other field of
    :class:`SessionOptions` may be given by name (``more``): the command line's
    ``tool_patterns``, ``exclude_tools``, ``session_id``, ``api_key``, ...
    """
    options = SessionOptions(
        cwd=cwd,
        model=model,
        thinking_level=thinking_level,
        session=session,
        continue_recent=continue_recent,
        fork=fork,
        persist=persist,
        session_dir=session_dir,
        tools=tools,
        builtin_tools=builtin_tools,
        system_prompt=system_prompt,
        extensions=tuple(extensions),
        no_extensions=no_extensions,
        ui_clients=ui_clients,
        extension_args=tuple(extension_args),
        active_tools=None if active_tools is None else list(active_tools),
        **more,
    )
    with collapse_groups():
        async with trio.open_nursery() as nursery:
            shared = router or await start_model_router(nursery, faux=faux or default_faux())
            started = await start_session(nursery, shared, options)
            agent_session = AgentSession(started, shared)
            try:
                yield agent_session
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(10):
                    await started.session.abort()
                    await started.store.flush()
                nursery.cancel_scope.cancel()


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
        """The session file (it exists once the first prompt is saved), if persisted."""
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


def __getattr__(name: str) -> Any:
    """``FixtureRules`` (a testing aid, see :func:`default_faux`) and ``UiResponse`` (the
    answer to an extension's dialog), their modules imported on first access rather than by
    every start (cold start, issue 38)."""
    if name == "FixtureRules":
        from pitrio.actors.model_router import FixtureRules

        return FixtureRules
    if name == "UiResponse":
        with _attrs_cache.caching():  # its classes: first use, from the cache
            from pitrio.actors.session.extensions.ui import UiResponse

        return UiResponse
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
