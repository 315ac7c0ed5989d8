"""The ``--models`` scope of RPC mode and the terminal chat: model patterns resolved against
the router's available models (pi 1.6.0's ``scopedModels``), with a warning for each pattern
that names no usable model."""

from __future__ import annotations

from collections.abc import Sequence

from pitrio.errors import PitrioError
from pitrio.sdk.models import ModelRouterHandle
from pitrio.sdk.session import ScopedModel


async def resolve_scope(
    router: ModelRouterHandle, patterns: Sequence[str], source: str = "--models"
) -> tuple[tuple[ScopedModel, ...], list[str]]:
    """``source``'s model patterns as available models (and warnings for the others)."""
    if not patterns:
        return (), []  # no listing to make (most starts)
    available = {(m.provider, m.id) for m in await router.available_models()}
    scoped: list[ScopedModel] = []
    warnings: list[str] = []
    for pattern in patterns:
        try:
            model, level = await router.resolve_pattern(pattern)
        except PitrioError as exc:
            warnings.append(f"Warning: {source} {pattern}: {exc}")
            continue
        if (model.provider, model.id) not in available:
            warnings.append(f"Warning: {source} {pattern}: no credentials for {model.provider}")
            continue
        if all(s.model != model for s in scoped):
            scoped.append(ScopedModel(model, level))
    return tuple(scoped), warnings
