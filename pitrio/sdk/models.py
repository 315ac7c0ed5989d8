"""The model router as transports start and query it: router, config, handle, faux provider."""

from __future__ import annotations

from pitrio.actors.model_router import FauxProvider, ModelRouterHandle, start_model_router
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig
from pitrio.actors.model_router.catalogue import ambient_credential_sets


def oauth_login_providers() -> frozenset[str]:
    """The providers ``pitrio login`` signs in to."""
    from pitrio.actors.model_router.oauth import PROVIDER_NAMES

    return frozenset(PROVIDER_NAMES)


__all__ = [
    "FauxProvider",
    "ModelRouter",
    "ModelRouterHandle",
    "RouterConfig",
    "ambient_credential_sets",
    "oauth_login_providers",
    "start_model_router",
]
