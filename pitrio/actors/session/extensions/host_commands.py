"""The extension host's commands (``DESIGN.md`` §2: ``Emit``, ``RunCommand``, ``Ask``/``Answer``).

Typed messages of :class:`~pitrio.actors.session.extensions.host.ExtensionHost`'s inbox. A
command that runs handlers carries the cancel scope its task runs in (see
:meth:`~pitrio.actors.session.extensions.host_handle.ExtensionHostHandle`): the caller cancels it
when the caller itself is cancelled, so handlers are cancelled with the run that awaited them,
as they were when they ran in the caller's task.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop.hooks import (
    AfterToolCallContext,
    BeforeToolCallContext,
    TurnContext,
)
from pitrio.actors.session.extensions.asks import (
    Accepted as Accepted,
)
from pitrio.actors.session.extensions.asks import (
    Disposition as Disposition,
)
from pitrio.actors.session.extensions.asks import (
    InputSource,
    Lifecycle,
    UiAnswer,
)
from pitrio.actors.session.extensions.events import (
    CacheWarmingDecisionEvent,
    DiscoveredPaths,
    ResourcesDiscoverEvent,
    SessionBeforeTreeEvent,
    SessionTreeEvent,
    UserBashEvent,
)
from pitrio.actors.session.extensions.runner import ExtensionRunner
from pitrio.actors.session.extensions.ui import UiResponse
from pitrio.actors.supervisor.compaction import CompactionPreparation
from pitrio.messages.agent import AgentMessage, CustomMessage
from pitrio.messages.content import ImageContent
from pitrio.messages.entries import CompactionEntry, SessionEntry
from pitrio.messages.events import AgentEvent, ExtensionUiRequest


@attrs.frozen
class UiAsk:
    """Emit a dialog request; ``reply`` gets the client's answer."""

    request: ExtensionUiRequest
    reply: Reply[UiResponse]


@attrs.frozen
class UiForget:
    """A dialog timed out: a late answer is to be ignored."""

    id: str


@attrs.frozen
class Work:
    """What a handler-running command shares: its answer and the scope its task runs in."""

    reply: Reply[Any]
    scope: trio.CancelScope


@attrs.frozen
class Emit:
    """An agent event for the handlers (before subscribers); answered with the event to emit
    (a ``message_end`` may carry a replacement message)."""

    event: AgentEvent
    work: Work


@attrs.frozen
class Input:
    """The ``input`` handlers for a prompt in the funnel."""

    text: str
    images: tuple[ImageContent, ...]
    source: InputSource
    work: Work


@attrs.frozen
class RunCommand:
    """Run the extension command ``/name args`` beside everything else; ``accepted`` and
    ``settled`` (the prompt's) are answered when its handler returns."""

    name: str
    args: str
    accepted: Reply[Accepted]
    settled: Reply[None]


@attrs.frozen
class BeforeAgentStart:
    """``before_agent_start``: answered with the custom messages handlers added; ``message``:
    the custom message that starts the run (pi 1.6.0's ``messageType: "custom"``)."""

    text: str
    images: tuple[Any, ...]
    work: Work
    message: CustomMessage | None = None


@attrs.frozen
class BeforeCompact:
    """``session_before_compact``: ``True`` cancels, a result replaces the summary."""

    preparation: CompactionPreparation
    path: tuple[SessionEntry, ...]
    instructions: str | None
    work: Work


@attrs.frozen
class AfterCompact:
    """``session_compact``, once the entry is in the file."""

    entry: CompactionEntry
    from_extension: bool
    work: Work


@attrs.frozen
class BeforeTree:
    """``session_before_tree``: answered with the handlers' result (``None``: none)."""

    event: SessionBeforeTreeEvent
    work: Work


@attrs.frozen
class AfterTree:
    """``session_tree``, once the navigation's context is installed."""

    event: SessionTreeEvent
    work: Work


@attrs.frozen
class DiscoverResources:
    """``resources_discover``, sent through the notification queue (so it follows the
    ``session_start`` handlers queued before it); ``reply`` gets the paths."""

    event: ResourcesDiscoverEvent
    reply: Reply[DiscoveredPaths]


@attrs.frozen
class TransformContext:
    """The ``context`` handlers over the messages of a request."""

    messages: list[AgentMessage]
    work: Work


@attrs.frozen
class ToolCall:
    """The ``tool_call`` handlers, once the session's pump has caught up."""

    context: BeforeToolCallContext
    work: Work


@attrs.frozen
class ToolResult:
    """The ``tool_result`` handlers."""

    context: AfterToolCallContext
    work: Work


@attrs.frozen
class TurnBoundary:
    """The loop is between turns: the ``turn_end`` boundary; answered with whether the loop
    should stop (the session then continues from the re-projected context)."""

    context: TurnContext
    work: Work


@attrs.frozen
class SettleBoundary:
    """``agent_before_settle`` for a run ending with ``outcome``: answered with (continue
    requested, can continue)."""

    outcome: str
    work: Work


@attrs.frozen
class WarmingDecision:
    """``cache_warming_decision``: answered with the action to take."""

    event: CacheWarmingDecisionEvent
    work: Work


@attrs.frozen
class UserBash:
    """The ``user_bash`` handlers for a user's shell command: answered with the handlers'
    :class:`~.events.UserBashResult` or ``None``; a failed handler is the answer's error."""

    event: UserBashEvent
    work: Work


@attrs.frozen
class ProviderStage:
    """A stage of a provider request for its handlers (``stage`` is the event's name): the
    headers (changed in place), the payload (answered with the one to send), an answer's
    status and headers, a stream event."""

    stage: str
    payload: Any
    work: Work


@attrs.frozen
class SetBasePrompt:
    """The session rebuilt the system prompt before any message: the base that
    ``before_agent_start`` handlers chain from."""

    prompt: str


def queue_notification(
    registry: ExtensionRunner,
    channel: trio.MemorySendChannel[tuple[str, Any]],
    event: str,
    payload: Any,
) -> None:
    """Queue a notification-only event for the host's notification task, without waiting (an
    inbox may call it); nothing when no handler wants it; a full queue drops it, reported."""
    if not registry.has(event):
        return
    try:
        channel.send_nowait((event, payload))
    except trio.WouldBlock:
        registry.report("<runtime>", event, "notification queue full; event dropped")


HostCommand = (
    UiAsk
    | UiAnswer
    | UiForget
    | Lifecycle
    | Emit
    | Input
    | RunCommand
    | BeforeAgentStart
    | BeforeCompact
    | AfterCompact
    | BeforeTree
    | AfterTree
    | TransformContext
    | ToolCall
    | ToolResult
    | TurnBoundary
    | SettleBoundary
    | WarmingDecision
    | SetBasePrompt
    | UserBash
    | ProviderStage
)

WorkCommand = (
    Emit
    | Input
    | BeforeAgentStart
    | BeforeCompact
    | AfterCompact
    | BeforeTree
    | AfterTree
    | TransformContext
    | ToolCall
    | ToolResult
    | TurnBoundary
    | SettleBoundary
    | WarmingDecision
    | UserBash
    | ProviderStage
)
"""The commands whose handlers run in a task of the host, answered through their ``work``."""

__all__ = [
    "AfterCompact",
    "AfterTree",
    "BeforeAgentStart",
    "BeforeCompact",
    "BeforeTree",
    "DiscoverResources",
    "Emit",
    "HostCommand",
    "Input",
    "Lifecycle",
    "ProviderStage",
    "RunCommand",
    "SetBasePrompt",
    "SettleBoundary",
    "ToolCall",
    "ToolResult",
    "TransformContext",
    "TurnBoundary",
    "UiAnswer",
    "UiAsk",
    "UiForget",
    "UserBash",
    "WarmingDecision",
    "Work",
    "WorkCommand",
    "queue_notification",
]
