"""The ModelRouter actor (one per process) and its handle.

The actor owns the :class:`~pitrio.actors.model_router.registry.ModelRegistry` and the provider
adapters. It does not run streams: :meth:`ModelRouterHandle.stream` asks it for the stream
function and then runs that function in the caller's own task, so a stream lives in the run's
task tree and an abort (the run's cancel scope) stops it at its next checkpoint. Actors own
registries and configuration; streams and tool bodies belong to the run.
"""

from __future__ import annotations

import attrs
import trio

from pitrio.actors._actor import Actor, Handle, Reply
from pitrio.actors.model_router.providers.base import EventSender, StreamFn
from pitrio.actors.model_router.providers.faux import FauxProvider
from pitrio.actors.model_router.registry import FAUX_MODELS, ModelRegistry
from pitrio.actors.model_router.stream_builder import failure_message
from pitrio.errors import unwrap_group
from pitrio.messages.model import LlmContext, Model, StreamOptions
from pitrio.messages.stream import StreamError


@attrs.frozen
class Resolve:
    """Find the model named ``ref`` (``provider/id`` or an unambiguous bare id)."""

    ref: str
    reply: Reply[Model]


@attrs.frozen
class ListModels:
    """List every registered model, in registration order."""

    reply: Reply[tuple[Model, ...]]


@attrs.frozen
class Register:
    """Register ``model``; ``stream_fn``, if given, serves its API from now on."""

    model: Model
    stream_fn: StreamFn | None
    reply: Reply[None]


@attrs.frozen
class GetStreamFn:
    """Get the stream function serving ``model``'s API."""

    model: Model
    reply: Reply[StreamFn]


RouterCommand = Resolve | ListModels | Register | GetStreamFn
"""Every command the ModelRouter accepts."""


class ModelRouter(Actor[RouterCommand]):
    """Owns the model registry and the provider adapters; answers look-ups."""

    def __init__(self, registry: ModelRegistry | None = None, *, capacity: int = 64) -> None:
        super().__init__(name="model-router", capacity=capacity)
        self.registry = registry if registry is not None else ModelRegistry()

    async def handle(self, command: RouterCommand) -> None:
        """Answer one command; registry errors go back to the caller, never crash the actor."""
        registry = self.registry
        try:
            match command:
                case Resolve(ref=ref, reply=reply):
                    reply.set(registry.resolve(ref))
                case ListModels(reply=reply):
                    reply.set(registry.list())
                case Register(model=model, stream_fn=stream_fn, reply=reply):
                    registry.register(model, stream_fn)
                    reply.set(None)
                case GetStreamFn(model=model, reply=reply):
                    reply.set(registry.stream_fn(model))
        except Exception as exc:
            command.reply.fail(exc)


class ModelRouterHandle(Handle[RouterCommand]):
    """Typed access to the ModelRouter, plus :meth:`stream`, which runs in the caller's task."""

    async def resolve(self, ref: str) -> Model:
        """The model named ``ref``; raises :class:`~pitrio.errors.UnknownModelError`."""
        return await self.ask(lambda reply: Resolve(ref, reply))

    async def list_models(self) -> tuple[Model, ...]:
        """Every registered model, in registration order."""
        return await self.ask(ListModels)

    async def register(self, model: Model, stream_fn: StreamFn | None = None) -> None:
        """Register ``model`` (and, if given, the stream function of its API)."""
        await self.ask(lambda reply: Register(model, stream_fn, reply))

    async def stream_fn(self, model: Model) -> StreamFn:
        """The stream function serving ``model``; raises ``UnknownModelError`` if none does."""
        return await self.ask(lambda reply: GetStreamFn(model, reply))

    async def stream(
        self, model: Model, context: LlmContext, options: StreamOptions, send: EventSender
    ) -> None:
        """Stream one response of ``model`` on ``send``, in the calling task.

        The stream contract holds whatever happens: if no provider serves the model, or the
        provider raises despite the contract, a final ``error`` event (stop reason ``error``,
        ``error_message`` the exception's text) is sent. Cancellation is not converted: it
        propagates, and nothing more is sent after it (the canceller builds the aborted
        message, see :func:`~pitrio.actors.model_router.stream_builder.aborted_message`).
        A provider must not raise after it has sent its final event.
        """
        try:
            stream_fn = await self.stream_fn(model)
            await stream_fn(model, context, options, send)
        except Exception as exc:
            text = str(unwrap_group(exc)) or type(exc).__name__
            await send.send(StreamError(reason="error", error=failure_message(model, text)))


async def start_model_router(
    nursery: trio.Nursery, faux: FauxProvider | None = None
) -> ModelRouterHandle:
    """Start a ModelRouter in ``nursery`` with the built-in faux models wired to ``faux``.

    A fresh :class:`FauxProvider` (echoing, no delay) is used when ``faux`` is not given.
    """
    registry = ModelRegistry()
    provider = faux if faux is not None else FauxProvider()
    registry.register_all(FAUX_MODELS, provider.stream)
    address = await nursery.start(ModelRouter(registry).run)
    return ModelRouterHandle(address)
