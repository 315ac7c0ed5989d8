"""The model router: model registry, credentials, provider adapters, virtual models.

One :class:`ModelRouter` actor per process owns the registry (faux models, the built-in
catalogue, the user's ``models.json``), the credentials and the HTTP connection pool;
:class:`ModelRouterHandle` gives typed access and runs streams in the caller's task.
:func:`start_model_router` starts one.
"""

from typing import TYPE_CHECKING

from pitrio.actors.model_router import catalogue as _catalogue
from pitrio.actors.model_router.actor import (
    Availability,
    GetStreamFn,
    ListAvailable,
    ListModels,
    ModelRouter,
    ModelRouterHandle,
    Problems,
    Register,
    Resolve,
    ResolvePattern,
    Route,
    RouterCommand,
    RouterConfig,
    start_model_router,
)
from pitrio.actors.model_router.auth_file import save_api_key
from pitrio.actors.model_router.catalogue import VIRTUAL_API
from pitrio.actors.model_router.credentials import Credentials
from pitrio.actors.model_router.diagnostics import http_status, retry_after_ms
from pitrio.actors.model_router.models_json import VirtualModelSpec, parse_models_json
from pitrio.actors.model_router.providers.base import (
    EventSender,
    HttpSettings,
    ProviderSettings,
    StreamFn,
    provider_settings,
)
from pitrio.actors.model_router.providers.faux import (
    FauxProvider,
    FauxReply,
    FauxRequest,
    FauxScript,
    FauxStep,
    FauxToolCall,
)
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

if TYPE_CHECKING:  # served by __getattr__ below
    from pitrio.actors.model_router.providers.faux_rules import FixtureRules
    from pitrio.actors.model_router.virtual import (
        STATE_CUSTOM_TYPE,
        RouteRequest,
        RouteResult,
        VirtualModelState,
        state_entry_data,
        state_from_entry_data,
    )

__all__ = [
    "ABORTED_MESSAGE",
    "CATALOGUE",
    "FAUX_API",
    "FAUX_BASE_URL",
    "FAUX_MODELS",
    "FAUX_PROVIDER",
    "STATE_CUSTOM_TYPE",
    "VIRTUAL_API",
    "Availability",
    "Credentials",
    "EventSender",
    "FauxProvider",
    "FauxReply",
    "FauxRequest",
    "FauxScript",
    "FauxStep",
    "FauxToolCall",
    "FixtureRules",
    "GetStreamFn",
    "HttpSettings",
    "ListAvailable",
    "ListModels",
    "ModelRegistry",
    "ModelRouter",
    "ModelRouterHandle",
    "Problems",
    "ProviderSettings",
    "Register",
    "Resolve",
    "ResolvePattern",
    "Route",
    "RouteRequest",
    "RouteResult",
    "RouterCommand",
    "RouterConfig",
    "StreamBuilder",
    "StreamFn",
    "StreamStateError",
    "VirtualModelSpec",
    "VirtualModelState",
    "aborted_message",
    "estimate_tokens",
    "failure_message",
    "http_status",
    "make_usage",
    "parse_models_json",
    "provider_settings",
    "retry_after_ms",
    "save_api_key",
    "start_model_router",
    "state_entry_data",
    "state_from_entry_data",
    "with_cost",
]


_LATER = {
    **dict.fromkeys(
        (
            "STATE_CUSTOM_TYPE",
            "RouteRequest",
            "RouteResult",
            "VirtualModelState",
            "state_entry_data",
            "state_from_entry_data",
        ),
        "virtual",
    ),
    "FixtureRules": "providers.faux_rules",
}
"""Names served on first access, by the module (under this package) that defines them."""


def __getattr__(name: str) -> object:
    """``CATALOGUE``, read from the catalogue's data on first access (see :mod:`.catalogue`);
    the virtual models' names (:mod:`.virtual`) and the faux provider's fixture rules
    (:mod:`.providers.faux_rules`), their modules imported on first access (a start has no
    virtual model and no fixture: cold start, issue 38)."""
    if name == "CATALOGUE":
        return _catalogue.models()
    module = _LATER.get(name)
    if module is not None:
        import importlib

        from pitrio import _attrs_cache

        with _attrs_cache.caching():  # its classes from the attrs method cache
            value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
