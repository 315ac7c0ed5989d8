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


def __getattr__(name: str) -> Any:
    """A name of the SDK (``pitrio.sdk.agent.__all__``), its module imported on first use
    (PEP 562). The import system asks this module for a submodule's name before importing
    it (``from pitrio import telemetry``): such a name is refused at once, without loading
    the SDK, and so is any private one."""
    from importlib.util import find_spec

    if name.startswith("_") or find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(f"module 'pitrio' has no attribute {name!r}")
    from pitrio.sdk import agent

    if name not in agent.__all__:
        raise AttributeError(f"module 'pitrio' has no attribute {name!r}")
    value = getattr(agent, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the SDK's included (which loads it)."""
    from pitrio.sdk import agent

    return sorted({*globals(), *agent.__all__})
