"""``ctx``: what a handler or command can see and do besides the API (spec §7.2).

Every method goes through the session's handle (or the store's, for read-only views), so a
handler never touches an actor's state; handlers run outside the session's inbox task, so these
calls cannot deadlock it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from pitrio.actors.session.extensions.asks import (
    ExtensionApiError,
    ModelScope,
    ScopedModel,
    ShutdownRequest,
)
from pitrio.actors.session.extensions.ui import ExtensionUI, NoUI
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import CompactionResult
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import AssistantMessageEvent, EventSender, StreamDone, StreamError

if TYPE_CHECKING:
    from pitrio.actors.session.handle import SessionHandle
    from pitrio.actors.session.operations import NavigationResult
    from pitrio.actors.session_store.actor import SessionStoreHandle

StreamCall = Callable[
    [Model, LlmContext, StreamOptions, EventSender],
    Awaitable[None],
]
"""The session's way to the model router (``router.stream``, traced when tracing is on)."""
STREAM_BUFFER = 64
"""Events of an extension's request held until it reads them; past that the provider waits
(back-pressure, nothing dropped)."""


class SessionView:
    """A read-only view of the session file (pi's ``ctx.sessionManager``)."""

    def __init__(self, store: SessionStoreHandle) -> None:
        self._store = store

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self._store.header.id

    @property
    def session_file(self) -> str | None:
        """The session file's path (``None`` for an in-memory session)."""
        return None if self._store.path is None else str(self._store.path)

    @property
    def cwd(self) -> str:
        """The session's working directory."""
        return self._store.header.cwd

    async def leaf_id(self) -> str | None:
        """The current leaf's entry id."""
        return await self._store.leaf_id()

    async def entries(self) -> list[Any]:
        """Every entry of the file."""
        return await self._store.entries()

    async def branch(self, from_id: str | None = None) -> list[Any]:
        """The entries from the root to the leaf (or to ``from_id``)."""
        return await self._store.branch_entries(from_id)

    async def entry(self, entry_id: str) -> Any:
        """One entry by id (``None`` if unknown)."""
        return await self._store.get_entry(entry_id)

    async def label(self, entry_id: str) -> str | None:
        """An entry's label."""
        return await self._store.label(entry_id)

    async def session_name(self) -> str | None:
        """The session's name."""
        return await self._store.session_name()


@attrs.frozen
class ContextUsage:
    """How full the model's context is (pi's ``ContextUsage``): ``tokens`` and ``percent``
    are ``None`` when they cannot be told (right after a compaction, before a reply)."""

    tokens: int | None
    context_window: int
    percent: float | None


class ModelRegistryView:
    """pi's ``ctx.modelRegistry`` as far as it makes sense in Python: looking models up
    (``getAll``, ``getAvailable``, ``find``) and requests through the session's model router
    (``streamSimple``, ``complete``), which resolves the credentials as for the session's own
    requests, providers registered by extensions included. The requests are the extension's
    own: not part of the session's transcript, and no ``*_provider_*`` extension event fires
    for them (as in pi, whose registry calls skip the session's hooks)."""

    def __init__(self, session: SessionHandle, stream: StreamCall | None = None) -> None:
        self._session = session
        self._stream = stream

    @asynccontextmanager
    async def stream_simple(
        self, model: Model, context: LlmContext, options: StreamOptions | None = None
    ) -> AsyncIterator[trio.MemoryReceiveChannel[AssistantMessageEvent]]:
        """``async with registry.stream_simple(model, context) as events:`` the response's
        events as they come (``options``: ``reasoning``, ``max_tokens``, ``session_id``...);
        the last is ``StreamDone`` or ``StreamError`` (a failure to set the request up is such
        an error event too, as pi's). Leaving the block early cancels the request."""
        stream = self._need_stream()
        chosen = StreamOptions() if options is None else attrs.evolve(options, hooks=None)
        send, receive = trio.open_memory_channel[AssistantMessageEvent](STREAM_BUFFER)

        async def produce() -> None:
            async with send:
                await stream(model, context, chosen, send)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce)
            async with receive:
                yield receive
            nursery.cancel_scope.cancel()

    async def complete(
        self, model: Model, context: LlmContext, options: StreamOptions | None = None
    ) -> AssistantMessage:
        """Run one request to its final assistant message; a failure is a message with stop
        reason ``error`` and its ``error_message`` (never an exception), as pi's."""
        final: AssistantMessage | None = None
        async with self.stream_simple(model, context, options) as events:
            async for event in events:
                if isinstance(event, StreamDone):
                    final = event.message
                elif isinstance(event, StreamError):
                    final = event.error
        if final is None:
            raise ExtensionApiError("the model stream ended without a final message")
        return final

    def _need_stream(self) -> StreamCall:
        if self._stream is None:
            raise ExtensionApiError("this session has no model router: it cannot make requests")
        return self._stream

    async def get_all(self) -> tuple[Model, ...]:
        """Every model of the registry, with or without credentials."""
        return await self._session.models("all")

    async def get_available(self) -> tuple[Model, ...]:
        """The models that have credentials."""
        return await self._session.models("available")

    async def find(self, provider: str, model_id: str) -> Model | None:
        """The registry's model ``provider/model_id``, or ``None``."""
        found = await self._session.models("all")
        return next((m for m in found if m.provider == provider and m.id == model_id), None)


class ExtensionContext:
    """``ctx`` of an event handler."""

    def __init__(
        self,
        *,
        session: SessionHandle,
        store: SessionStoreHandle,
        ui: ExtensionUI | None = None,
        system_prompt: str | None = None,
        mode: str = "print",
        project_trusted: bool = True,
        stream: StreamCall | None = None,
        scope: ModelScope | None = None,
        shutdown: ShutdownRequest | None = None,
    ) -> None:
        self._session = session
        self._scope = scope
        self._shutdown = shutdown
        self.model_registry = ModelRegistryView(session, stream)
        self.ui: ExtensionUI = ui or NoUI()
        self.session_manager = SessionView(store)
        self._system_prompt = system_prompt
        self._mode = mode
        self._project_trusted = project_trusted

    @property
    def mode(self) -> str:
        """How the session is driven (pi 1.6.0's ``ctx.mode``): ``tui`` (the terminal chat),
        ``rpc`` (RPC, the daemon's clients, the SDK with UI clients), ``json`` or ``print``."""
        return self._mode

    @property
    def scoped_models(self) -> tuple[ScopedModel, ...]:
        """pi's ``ctx.scopedModels``: the models ``--models`` / ``enabledModels`` scope the
        session to (what ``cycle_model`` walks), empty when there is no scope. Known once
        the transport resolved it after start-up: empty in ``session_start`` handlers."""
        return () if self._scope is None else self._scope.models

    def is_project_trusted(self) -> bool:
        """Whether the project's own files are trusted in this session (saved, temporary or
        command-line decisions alike): check it before reading project-local configuration."""
        return self._project_trusted

    @property
    def has_ui(self) -> bool:
        """Whether a client can answer dialogs."""
        return self.ui.has_ui

    @property
    def cwd(self) -> str:
        """The session's working directory."""
        return self.session_manager.cwd

    async def model(self) -> Model:
        """The selected model."""
        return (await self._session.state()).agent.model

    async def thinking_level(self) -> str:
        """The thinking level in effect (pi's ``ctx.thinkingLevel``)."""
        return (await self._session.state()).agent.thinking_level

    async def get_context_usage(self) -> ContextUsage | None:
        """How full the context is for the current model (``None`` when the model has no
        context window), as ``get_session_stats`` reports it."""
        usage = (await self._session.session_stats()).context_usage
        if usage is None:
            return None
        return ContextUsage(
            tokens=usage["tokens"], context_window=usage["contextWindow"], percent=usage["percent"]
        )

    async def is_idle(self) -> bool:
        """Whether no run is active."""
        return not (await self._session.state()).is_running

    async def has_pending_messages(self) -> bool:
        """Whether steering or follow-up messages are queued."""
        return (await self._session.state()).pending_message_count > 0

    def shutdown(self) -> None:
        """Ask the process to end gracefully (pi's ``ctx.shutdown()``): returns at once; the
        transport ends when the session is idle and every command read has its answer."""
        if self._shutdown is not None:
            self._shutdown.requested.set()

    async def abort(self) -> None:
        """Abort the current run (returns once the session is idle)."""
        await self._session.abort()

    async def get_system_prompt(self) -> str:
        """The system prompt in effect (as chained by ``before_agent_start`` handlers)."""
        if self._system_prompt is not None:
            await trio.lowlevel.checkpoint()
            return self._system_prompt
        return (await self._session.state()).agent.system_prompt

    async def compact(self, custom_instructions: str | None = None) -> CompactionResult:
        """Compact now (a run in progress is aborted first)."""
        return await self._session.compact(custom_instructions)


class CommandContext(ExtensionContext):
    """``ctx`` of a command handler: adds waiting for idle and tree navigation."""

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        await self._session.wait_for_idle()

    async def navigate_tree(
        self, target_id: str, *, summarize: bool = False, label: str | None = None
    ) -> NavigationResult:
        """Move the session's leaf to ``target_id`` (optionally summarising the branch left)."""
        return await self._session.navigate_tree(target_id, summarize=summarize, label=label)
