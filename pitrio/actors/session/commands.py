"""The session actor's commands and the values they answer with (``DESIGN.md`` §2).

Typed messages of :class:`~pitrio.actors.session.actor.SessionActor`'s inbox; the typed
:class:`~pitrio.actors.session.handle.SessionHandle` builds them. Two of the extension host's
commands (``UiAnswer``, ``Lifecycle``) come to the session, which hands them to its host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop import AgentState
from pitrio.actors.mcp.state import McpServerState
from pitrio.actors.session.cache_warming import WarmingMode
from pitrio.actors.session.emitter import Sink

# Accepted and Disposition answer the extension host's RunCommand too; they live in the light
# asks module (no host, events or runner imported) and are re-exported here with the other
# prompt types.
from pitrio.actors.session.extensions.asks import Accepted as Accepted
from pitrio.actors.session.extensions.asks import Disposition as Disposition
from pitrio.actors.session.extensions.asks import InputSource, Lifecycle, UiAnswer
from pitrio.actors.session.fanout import Sequenced
from pitrio.actors.session.operations import NavigationResult
from pitrio.actors.session_store.command_stamp import CommandStamp
from pitrio.actors.supervisor.branch_summary import BranchSummarySettings
from pitrio.actors.supervisor.compaction import CompactionSettings
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage
from pitrio.messages.content import ImageContent
from pitrio.messages.entries import CompactionResult

if TYPE_CHECKING:
    from pitrio.actors.session.target import SessionTarget
    from pitrio.actors.session.user_bash import BashResult  # named: a bash command's answer

StreamingBehavior = Literal["steer", "followUp"]


class SessionBusyError(PitrioError):
    """A prompt arrived while a run is active and said neither steer nor follow-up."""


@attrs.frozen(kw_only=True)
class SessionSettings:
    """Settings the session layer reads (spec §8.2)."""

    retry: RetrySettings = attrs.field(factory=RetrySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    branch_summary: BranchSummarySettings = attrs.field(factory=BranchSummarySettings)
    default_thinking_level: str | None = None
    shell_path: str | None = None
    shell_command_prefix: str | None = None
    auto_resize_images: bool = True
    """``images.autoResize``: a prompt's images are fitted within the inline limits."""
    block_images: bool = False
    """``images.blockImages``: no image reaches a model (a text stands for each)."""
    cache_warming: WarmingMode = "idle"
    """``cacheWarming`` of the agent dir's settings (pi 1.6.0's default: ``idle``)."""
    cache_retention: Literal["none", "short", "long"] | None = None
    """The process's prompt caching (``$PITRIO_CACHE_RETENTION``, pi's ``PI_CACHE_RETENTION``)
    for requests that do not set their own: the tier whose lifetime warming plans with."""


@attrs.frozen(kw_only=True)
class SessionState:
    """A snapshot of the session (``get_state``)."""

    agent: AgentState
    is_running: bool
    is_retrying: bool
    retry_attempt: int
    steering: tuple[str, ...]
    follow_up: tuple[str, ...]
    session_id: str
    session_file: str | None
    is_compacting: bool = False
    auto_compaction_enabled: bool = True
    auto_retry_enabled: bool = True
    session_name: str | None = None
    write_error: str | None = None
    """Why the session turned read-only (its file could not be written), if it did."""
    is_settling: bool = False
    """The run's last ``agent_end`` is out and it only settles now: a plain prompt sent now
    runs right after the settle instead of being refused."""
    mcp_servers: tuple[McpServerState, ...] = ()
    """Each configured MCP server's state (``get_state``'s ``mcpServers``, a pitrio field)."""

    @property
    def pending_message_count(self) -> int:
        """Queued steer plus follow-up messages."""
        return len(self.steering) + len(self.follow_up)


# -- commands ------------------------------------------------------------------------------


@attrs.frozen
class Prompt:
    """A user prompt. ``accepted`` is answered when it is accepted (started, queued or handled
    by an extension), with the ``seq`` of the last event emitted by then (a transport's
    response barrier) and that disposition; ``settled`` when its run settles (or at once,
    when it was only queued or handled)."""

    text: str
    images: tuple[ImageContent, ...]
    streaming_behavior: StreamingBehavior | None
    accepted: Reply[Accepted]
    settled: Reply[None]
    expand: bool = True
    """Extension commands, ``/skill:`` and templates apply (``False`` for an extension's
    ``send_user_message``)."""
    source: InputSource = "interactive"
    stamp: CommandStamp | None = None
    """The client's command id, written with the prompt's user message entry."""


@attrs.frozen
class Queue:
    """Queue a steering or follow-up message (works while idle too); answered with its id,
    which the ``message_start`` delivering it carries as ``queueId``, or ``None`` when an
    extension's ``input`` handler took it (pi 1.6.0's ``handled``). ``filtered``: the
    handlers have seen it already."""

    text: str
    images: tuple[ImageContent, ...]
    kind: StreamingBehavior
    reply: Reply[str | None]
    source: InputSource = "interactive"
    filtered: bool = False
    stamp: CommandStamp | None = None
    """The client's command id, written with the queued message's entry when delivered."""


@attrs.frozen
class ClearQueue:
    """Empty both queues; answered with the removed texts (steering, follow-up)."""

    reply: Reply[tuple[tuple[str, ...], tuple[str, ...]]]


@attrs.frozen
class Abort:
    """Abort the active run; answered once the session is idle. ``detach``: what the run
    still does is neither reported nor recorded (pi 0.73.1's session replacements; 1.6.0
    settles the run first, and pitrio's runtime does too: an SDK caller's option now)."""

    reply: Reply[None]
    detach: bool = False


@attrs.frozen
class WaitForIdle:
    """Answered once no run is active."""

    reply: Reply[None]


@attrs.frozen
class GetState:
    """Ask for a :class:`SessionState`."""

    reply: Reply[SessionState]


@attrs.frozen
class Subscribe:
    """Open an event stream (each event with its ``seq``)."""

    capacity: int
    reply: Reply[trio.MemoryReceiveChannel[Sequenced]]


@attrs.frozen
class SubscribeInto:
    """Deliver every event from now on into the caller's channel (closed when delivery ends)."""

    capacity: int
    send: trio.MemorySendChannel[Sequenced]
    reply: Reply[None]
    runs: bool = False
    """Whether a run of streamed deltas comes as one ``SequencedRun`` (see the outlet)."""


@attrs.frozen
class SubscribeSink:
    """Call ``sink`` with every event from now on (see :class:`EventOutlet`'s sinks)."""

    sink: Sink
    reply: Reply[None]


@attrs.frozen
class Invoke:
    """Run ``operation(actor)`` in the actor's task and answer with its result (or error).

    The typed handle methods build these: each is one of the actor's own methods, so the
    actor's state is still touched only by the actor."""

    operation: Callable[[SessionTarget], Awaitable[Any]]
    reply: Reply[Any]


@attrs.frozen
class Bash:
    """Run a user shell command (one at a time); answered with its :class:`BashResult`.
    ``exclude_from_context`` is recorded as given (``None``: not said); ``stream_id`` tags
    its ``bash_execution_update`` events (pi 1.6.0: the RPC command's id)."""

    command: str
    exclude_from_context: bool | None
    reply: Reply[BashResult]
    stream_id: str | None = None


@attrs.frozen
class Navigate:
    """Tree navigation (refused while a run or a compaction is active)."""

    target_id: str
    summarize: bool
    custom_instructions: str | None
    replace_instructions: bool
    label: str | None
    reply: Reply[NavigationResult]


@attrs.frozen
class Compact:
    """Manual compaction: abort a run first, then summarize; answered with the result."""

    custom_instructions: str | None
    reply: Reply[CompactionResult]


@attrs.frozen
class PumpState:
    """What the event pump has processed: the index of the turn in progress (-1 before the
    first) and the entry ids asked for (``None`` for a message not recorded)."""

    turn_index: int
    entry_ids: tuple[str | None, ...]


@attrs.frozen
class PumpBarrier:
    """Answered once the event pump has processed every agent event sent so far, with the
    entry ids ``messages`` were recorded as (what the extension host's hooks wait for)."""

    messages: tuple[AgentMessage, ...]
    reply: Reply[PumpState]


@attrs.frozen
class Stamped:
    """Another command applied for a client command id: the entries it appends (in the
    actor's task and the tasks it starts) carry ``stamp`` (exactly-once commands)."""

    command: Any
    stamp: CommandStamp


SessionCommand = (
    Prompt
    | Stamped
    | Queue
    | ClearQueue
    | Abort
    | WaitForIdle
    | GetState
    | Subscribe
    | SubscribeInto
    | SubscribeSink
    | Invoke
    | Compact
    | Bash
    | Navigate
    | UiAnswer
    | PumpBarrier
    | Lifecycle
)
