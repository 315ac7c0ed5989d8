"""The model router as transports start and query it: router, config, handle, faux provider."""

from __future__ import annotations

from pitrio.actors.model_router import FauxProvider, ModelRouterHandle, start_model_router
from pitrio.actors.model_router.actor import ModelRouter, RouterConfig

__all__ = ["FauxProvider", "ModelRouter", "ModelRouterHandle", "RouterConfig", "start_model_router"]
