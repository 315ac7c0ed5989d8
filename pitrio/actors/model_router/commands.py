"""The commands the ModelRouter actor takes (typed messages; :class:`~.actor.ModelRouterHandle`
builds them)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from pitrio.actors._actor import Reply
from pitrio.actors.model_router.providers.base import StreamFn
from pitrio.messages.agent import ThinkingLevel
from pitrio.messages.model import Model

if TYPE_CHECKING:  # only named: routing is imported when a virtual model is routed
    from pitrio.actors.model_router.virtual import RouteRequest, RouteResult


@attrs.frozen
class Resolve:
    """Find the model named ``ref`` (``provider/id`` or an unambiguous bare id)."""

    ref: str
    reply: Reply[Model]


@attrs.frozen
class ResolvePattern:
    """Find the model and thinking level named by ``provider/id[:thinking]``."""

    pattern: str
    reply: Reply[tuple[Model, ThinkingLevel | None]]


@attrs.frozen
class ListModels:
    """List every registered model, in registration order."""

    reply: Reply[tuple[Model, ...]]


@attrs.frozen
class ListAvailable:
    """List the models that can be used now (their provider has credentials)."""

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


@attrs.frozen
class Availability:
    """Why ``model`` cannot be used now (``None``: it can)."""

    model: Model
    reply: Reply[str | None]


@attrs.frozen
class Route:
    """Route one request of virtual ``model`` to a physical model."""

    model: Model
    request: RouteRequest
    reply: Reply[RouteResult]


@attrs.frozen
class Problems:
    """Configuration problems found so far (bad ``models.json``, refused ``auth.json``)."""

    reply: Reply[tuple[str, ...]]


@attrs.frozen
class RegisterProvider:
    """Add a provider and its models from a ``models.json`` provider block (an extension's
    ``register_provider``); answered with the refs of the models it added."""

    name: str
    config: dict[str, Any]
    source: str
    reply: Reply[tuple[str, ...]]


@attrs.frozen
class UnregisterProvider:
    """Remove a provider's models; answered with their refs."""

    name: str
    reply: Reply[tuple[str, ...]]


RouterCommand = (
    RegisterProvider
    | UnregisterProvider
    | Resolve
    | ResolvePattern
    | ListModels
    | ListAvailable
    | Register
    | GetStreamFn
    | Availability
    | Route
    | Problems
)
"""Every command the ModelRouter accepts."""


__all__ = [
    "Availability",
    "GetStreamFn",
    "ListAvailable",
    "ListModels",
    "Problems",
    "Register",
    "RegisterProvider",
    "Resolve",
    "ResolvePattern",
    "Route",
    "RouterCommand",
    "UnregisterProvider",
]
