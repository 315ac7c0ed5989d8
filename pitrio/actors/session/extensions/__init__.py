"""Python extensions: discovery, the ``setup(api)`` API, event dispatch, the UI protocol.

The names below are imported on first access (module ``__getattr__``): a session without
extensions imports none of the host's modules (issue 38, cold start); a submodule imported
directly loads only itself and what it imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.api import (
        EventBus,
        ExecResult,
        ExtensionAPI,
        PortHolder,
        SessionPort,
    )
    from pitrio.actors.session.extensions.asks import ExtensionApiError
    from pitrio.actors.session.extensions.context import CommandContext, ExtensionContext
    from pitrio.actors.session.extensions.events import (
        BeforeAgentStartResult,
        BeforeCompactResult,
        CancelResult,
        CompactionOverride,
        ContextResult,
        InjectedMessage,
        InputResult,
        MessageEndResult,
        ToolCallResult,
        ToolResultPatch,
    )
    from pitrio.actors.session.extensions.loader import (
        ExtensionLoadError,
        ExtensionSource,
        LoadedExtensions,
        discover_extensions,
        load_extensions,
    )
    from pitrio.actors.session.extensions.registry import Extension, SourceInfo
    from pitrio.actors.session.extensions.runner import ExtensionRunner, ToolCallBlockedError
    from pitrio.actors.session.extensions.ui import (
        ClientUI,
        ExtensionUI,
        NoUI,
        PlanEntry,
        PlanError,
        UiResponse,
    )

_WHERE: dict[str, str] = {
    "BeforeAgentStartResult": "events",
    "BeforeCompactResult": "events",
    "CancelResult": "events",
    "ClientUI": "ui",
    "CommandContext": "context",
    "CompactionOverride": "events",
    "ContextResult": "events",
    "EventBus": "api",
    "ExecResult": "api",
    "Extension": "registry",
    "ExtensionAPI": "api",
    "ExtensionApiError": "asks",
    "ExtensionContext": "context",
    "ExtensionLoadError": "loader",
    "ExtensionRunner": "runner",
    "ExtensionSource": "loader",
    "ExtensionUI": "ui",
    "InjectedMessage": "events",
    "InputResult": "events",
    "LoadedExtensions": "loader",
    "MessageEndResult": "events",
    "NoUI": "ui",
    "PlanEntry": "ui",
    "PlanError": "ui",
    "PortHolder": "api",
    "SessionPort": "api",
    "SourceInfo": "registry",
    "ToolCallBlockedError": "runner",
    "ToolCallResult": "events",
    "ToolResultPatch": "events",
    "UiResponse": "ui",
    "discover_extensions": "loader",
    "load_extensions": "loader",
}


def __getattr__(name: str) -> Any:
    """The package's names, each from its module on first access."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pitrio import _attrs_cache

    with _attrs_cache.caching():  # the module's classes come from the method cache
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


__all__ = [
    "BeforeAgentStartResult",
    "BeforeCompactResult",
    "CancelResult",
    "ClientUI",
    "CommandContext",
    "CompactionOverride",
    "ContextResult",
    "EventBus",
    "ExecResult",
    "Extension",
    "ExtensionAPI",
    "ExtensionApiError",
    "ExtensionContext",
    "ExtensionLoadError",
    "ExtensionRunner",
    "ExtensionSource",
    "ExtensionUI",
    "InjectedMessage",
    "InputResult",
    "LoadedExtensions",
    "MessageEndResult",
    "NoUI",
    "PlanEntry",
    "PlanError",
    "PortHolder",
    "SessionPort",
    "SourceInfo",
    "ToolCallBlockedError",
    "ToolCallResult",
    "ToolResultPatch",
    "UiResponse",
    "discover_extensions",
    "load_extensions",
]
