"""The model router: model registry, provider adapters and the stream builder they share.

One :class:`ModelRouter` actor per process owns the registry; :class:`ModelRouterHandle` gives
typed access and runs streams in the caller's task. :func:`start_model_router` starts one with
the built-in faux models.
"""

from pitrio.actors.model_router.actor import (
    GetStreamFn,
    ListModels,
    ModelRouter,
    ModelRouterHandle,
    Register,
    Resolve,
    RouterCommand,
    start_model_router,
)
from pitrio.actors.model_router.providers.base import EventSender, StreamFn
from pitrio.actors.model_router.providers.faux import (
    FauxProvider,
    FauxReply,
    FauxRequest,
    FauxScript,
    FauxStep,
    FauxToolCall,
)
from pitrio.actors.model_router.providers.faux_rules import FixtureRules
from pitrio.actors.model_router.registry import (
    FAUX_API,
    FAUX_BASE_URL,
    FAUX_MODELS,
    FAUX_PROVIDER,
    ModelRegistry,
)
from pitrio.actors.model_router.stream_builder import (
    ABORTED_MESSAGE,
    StreamBuilder,
    StreamStateError,
    aborted_message,
    failure_message,
)
from pitrio.actors.model_router.usage import estimate_tokens, make_usage, with_cost

__all__ = [
    "ABORTED_MESSAGE",
    "FAUX_API",
    "FAUX_BASE_URL",
    "FAUX_MODELS",
    "FAUX_PROVIDER",
    "EventSender",
    "FauxProvider",
    "FauxReply",
    "FauxRequest",
    "FauxScript",
    "FauxStep",
    "FauxToolCall",
    "FixtureRules",
    "GetStreamFn",
    "ListModels",
    "ModelRegistry",
    "ModelRouter",
    "ModelRouterHandle",
    "Register",
    "Resolve",
    "RouterCommand",
    "StreamBuilder",
    "StreamFn",
    "StreamStateError",
    "aborted_message",
    "estimate_tokens",
    "failure_message",
    "make_usage",
    "start_model_router",
    "with_cost",
]
