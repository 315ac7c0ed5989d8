"""pitrio: pi's agent session runtime as trio actors. This module is the public SDK.

``open_agent`` starts the actors of one agent (model router, tool executor, agent loop) and the
session recorder in a nursery, and yields an :class:`Agent` handle. Leaving the ``async with``
stops them all. :func:`create_session` does the same for a whole session (pi's
``AgentSession``) and yields an :class:`AgentSession`.

    async with pitrio.open_agent(model="faux/echo", persist=False) as agent:
        events = agent.subscribe()
        await agent.prompt("hello")

The handles, options and errors the transports drive actors with (a session's handle, the
daemon's host, the model router, the stores) are in :mod:`pitrio.sdk`, one small module per
kind; transports import nothing of ``pitrio.actors`` (``DESIGN.md`` §1).

The names below live in :mod:`pitrio.sdk.agent`, imported when one is first used: importing
``pitrio`` or any of its modules runs this file first, and a process that needs none of them
(the console script before it forks its session parser, ``pitrio --help``) does not pay for
the whole runtime's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The names served below (pitrio.sdk.agent's __all__), for type checkers.
    from pitrio.sdk.agent import *  # noqa: F403

__all__ = [
    "DEFAULT_MODEL",
    "Agent",
    "AgentSession",
    "FauxProvider",
    "FauxReply",
    "FauxToolCall",
    "PitrioError",
    "Sequenced",
    "SessionOptions",
    "create_session",
    "default_faux",
    "open_agent",
]

# Served from pitrio.sdk.agent: its __all__, what this module's namespace held when it
# imported the SDK itself (a test holds the two equal). Only these: the import system asks
# this module for a submodule's name (``from pitrio import telemetry``) before importing it,
# and that must not load the SDK.
_SDK_NAMES = frozenset(
    [
        "DEFAULT_MODEL",
        "DEFAULT_THINKING_LEVEL",
        "FAUX_SCRIPT_ENV",
        "FIXTURE_TOKENS_PER_SECOND",
        "Agent",
        "AgentEvent",
        "AgentLoop",
        "AgentLoopHandle",
        "AgentMessage",
        "AgentSession",
        "AgentSessionEvent",
        "AgentState",
        "AgentTool",
        "CompactionResult",
        "FauxProvider",
        "FauxReply",
        "FauxToolCall",
        "FixtureRules",
        "ImageContent",
        "LoopOptions",
        "Model",
        "ModelRouterHandle",
        "PitrioError",
        "Sequenced",
        "SessionHeader",
        "SessionOptions",
        "SessionRecorder",
        "SessionWriter",
        "StartedSession",
        "StreamingBehavior",
        "ToolExecutor",
        "ToolExecutorHandle",
        "UiResponse",
        "clamp_thinking_level",
        "collapse_groups",
        "create_session",
        "default_faux",
        "new_header",
        "open_agent",
        "session_dir",
        "session_file_name",
        "start_model_router",
        "start_session",
        "user_message",
    ]
)


def __getattr__(name: str) -> Any:
    """One of the SDK's names, its module imported on first use (PEP 562)."""
    if name not in _SDK_NAMES:
        raise AttributeError(f"module 'pitrio' has no attribute {name!r}")
    from pitrio.sdk import agent

    value = getattr(agent, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the SDK's included."""
    return sorted({*globals(), *_SDK_NAMES})
