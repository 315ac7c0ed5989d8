"""Python extensions: discovery, the ``setup(api)`` API, event dispatch, the UI protocol."""

from pitrio.actors.session.extensions.api import (
    EventBus,
    ExecResult,
    ExtensionAPI,
    PortHolder,
    SessionPort,
)
from pitrio.actors.session.extensions.context import (
    CommandContext,
    ExtensionApiError,
    ExtensionContext,
)
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
