"""Virtual models an extension registers (pi 1.6.0's ``registerVirtualModel``).

pitrio's own virtual models are ``models.json`` routing tables in the process's model router,
which every session shares. An extension's virtual model is different: its ``route`` is Python
code of one extension loaded into one session, so it lives in that session only
(:class:`SessionVirtualModels`, one per session, held by the extensions' ``PortHolder``). The
session lists it beside the router's models (``set_model``, ``get_available_models``,
``ctx.model_registry``), and the session's way to the router (:meth:`SessionVirtualModels.wrap`)
routes a request of it before anything else sees it: ``route(request, ctx)`` names a physical
model and thinking level, which the router then streams, so assistant messages record the
physical model, as pi's. See DESIGN-NOTES "Extension virtual models".
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

import attrs

from pitrio.actors.model_router import VIRTUAL_API, failure_message
from pitrio.actors.model_router.actor import infer_reason, previous_response
from pitrio.errors import PitrioError, unwrap_group
from pitrio.messages.agent import THINKING_LEVELS, AssistantMessage, ThinkingLevel
from pitrio.messages.model import LlmContext, Model, ModelCost, StreamOptions
from pitrio.messages.stream import EventSender, StreamError

RouteReason = Literal["user", "continuation", "retry", "direct"]
StreamCall = Callable[
    [Model, LlmContext, StreamOptions, EventSender],
    Awaitable[None],
]
Resolve = Callable[[str], Awaitable[Model]]
"""Finds a physical model by ``provider/id`` (the router's ``resolve``)."""


class VirtualModelError(PitrioError):
    """A virtual model registration or route that cannot be used."""


@attrs.frozen(kw_only=True)
class ModelRouteRequest:
    """What ``route`` is asked (pi's ``ModelRouteRequest``, without router state)."""

    model: Model
    """The selected virtual model."""
    thinking_level: ThinkingLevel
    reason: RouteReason
    previous: Model | None = None
    """The physical model of the latest response that did not fail, when the router knows it."""
    messages: Sequence[Any] = ()
    """The request's conversation (LLM messages)."""


@attrs.frozen(kw_only=True)
class ModelRoute:
    """Where one request goes: a physical model (or its ``provider/id``) and thinking level."""

    model: Model | str
    thinking_level: ThinkingLevel = "off"


RouteFn = Callable[[ModelRouteRequest, Any], "ModelRoute | Awaitable[ModelRoute]"]


@attrs.frozen(kw_only=True)
class ExtensionVirtualModel:
    """A virtual model as an extension declares it (pi's ``ExtensionVirtualModel``)."""

    provider: str
    id: str
    name: str
    route: RouteFn
    thinking_levels: tuple[ThinkingLevel, ...] = ("off",)
    context_window: int = 0
    max_tokens: int = 0
    input: tuple[Literal["text", "image"], ...] = ("text", "image")

    def catalog_model(self) -> Model:
        """The catalog entry sessions select (api ``pi-virtual``: never streamed itself)."""
        levels = set(self.thinking_levels)
        reasoning = any(level != "off" for level in levels)
        mapping: dict[str, str | None] | None = None
        if reasoning:  # each level offered maps to itself, the others to null (unsupported)
            mapping = {
                str(level): (str(level) if level in levels else None)
                for level in THINKING_LEVELS[1:]
            }
        return Model(
            id=self.id,
            name=self.name,
            api=VIRTUAL_API,
            provider=self.provider,
            base_url="",
            reasoning=reasoning,
            input=self.input,
            cost=ModelCost(),
            context_window=self.context_window,
            max_tokens=self.max_tokens,
            thinking_level_map=mapping or None,
        )


@attrs.define
class _Registered:
    definition: ExtensionVirtualModel
    model: Model
    extension_path: str


class SessionVirtualModels:
    """One session's extension virtual models, and the routing of their requests."""

    def __init__(self) -> None:
        self._models: dict[str, _Registered] = {}
        self._context: Callable[[], Any] = lambda: None

    def bind(self, context: Callable[[], Any]) -> None:
        """How a ``ctx`` for ``route`` is made (the extension host's factory)."""
        self._context = context

    def register(self, definition: ExtensionVirtualModel, extension_path: str) -> None:
        """Add (or replace) ``definition``; raises :class:`VirtualModelError` when another
        extension registered the same ``provider/id``."""
        if not definition.provider or not definition.id:
            raise VirtualModelError("A virtual model needs a provider and an id")
        if not callable(definition.route):
            raise VirtualModelError(f"Virtual model {definition.provider}/{definition.id}: route")
        model = definition.catalog_model()
        owner = self._models.get(model.ref)
        if owner is not None and owner.extension_path != extension_path:
            raise VirtualModelError(
                f'Virtual model "{model.ref}" is already registered by extension '
                f'"{owner.extension_path}"'
            )
        self._models[model.ref] = _Registered(definition, model, extension_path)

    def unregister(self, provider: str, model_id: str, extension_path: str) -> None:
        """Remove a virtual model the extension at ``extension_path`` registered."""
        ref = f"{provider}/{model_id}"
        found = self._models.get(ref)
        if found is not None and found.extension_path == extension_path:
            del self._models[ref]

    def models(self) -> tuple[Model, ...]:
        """The catalog entries, in registration order."""
        return tuple(found.model for found in self._models.values())

    def wrap(self, stream: StreamCall, resolve: Resolve) -> StreamCall:
        """``stream`` with this session's virtual models routed first (others pass through)."""

        async def routed(
            model: Model,
            context: LlmContext,
            options: StreamOptions,
            send: EventSender,
        ) -> None:
            found = self._models.get(model.ref) if model.api == VIRTUAL_API else None
            if found is None:
                await stream(model, context, options, send)
                return
            try:
                physical, level = await self._route(found, model, context, options, resolve)
            except Exception as exc:  # a failing route is the request's failure, as pi's
                text = str(unwrap_group(exc)) or type(exc).__name__
                await send.send(StreamError(reason="error", error=failure_message(model, text)))
                return
            reasoning = None if level == "off" else level
            await stream(physical, context, attrs.evolve(options, reasoning=reasoning), send)

        return routed

    async def _route(
        self,
        found: _Registered,
        model: Model,
        context: LlmContext,
        options: StreamOptions,
        resolve: Resolve,
    ) -> tuple[Model, ThinkingLevel]:
        previous = previous_response(context)
        request = ModelRouteRequest(
            model=model,
            thinking_level=options.reasoning or "off",
            reason="continuation" if infer_reason(context) == "continuation" else "user",
            previous=None if previous is None else await _resolved(resolve, previous),
            messages=tuple(context.messages),
        )
        outcome = found.definition.route(request, self._context())
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if not isinstance(outcome, ModelRoute):
            raise VirtualModelError(f"the route of {model.ref} returned no ModelRoute")
        target = outcome.model
        physical = target if isinstance(target, Model) else await resolve(target)
        if physical.api == VIRTUAL_API:
            raise VirtualModelError(f"the route of {model.ref} chose a virtual model")
        return physical, outcome.thinking_level


async def _resolved(resolve: Resolve, message: AssistantMessage) -> Model | None:
    try:
        return await resolve(f"{message.provider}/{message.model}")
    except PitrioError:
        return None


__all__ = [
    "ExtensionVirtualModel",
    "ModelRoute",
    "ModelRouteRequest",
    "SessionVirtualModels",
    "VirtualModelError",
]
