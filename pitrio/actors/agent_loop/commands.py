"""The agent loop's commands and the facts it reports (typed messages of its inbox).

:class:`AgentCommand` is everything the inbox takes; each command carries the
:class:`~pitrio.actors._actor.Reply` it is answered on. :class:`RunFacts`, :class:`LoopFacts`
and :class:`RunEndFacts` are what the loop tells the session about a run without a copy of the
transcript.
"""

from __future__ import annotations

from typing import Any

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop.hooks import LoopHooks, LoopOptions
from pitrio.actors.agent_loop.state import AgentState
from pitrio.messages.agent import AgentMessage, AssistantMessage, ThinkingLevel
from pitrio.messages.delta_run import UpdateItem
from pitrio.messages.events import AgentEvent
from pitrio.messages.model import Model


class Keep:
    """The type of :data:`KEEP`: a setting left as it is (where ``None`` means "none")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "KEEP"


KEEP = Keep()


@attrs.frozen
class RunResult:
    """How a run ended: its number (1, 2, ... per agent) and the messages it added."""

    run: int
    messages: tuple[AgentMessage, ...]


@attrs.frozen
class Prompt:
    """Start a run with these prompts; answered with its :class:`RunResult` when it ends."""

    messages: tuple[AgentMessage, ...]
    reply: Reply[RunResult]


@attrs.frozen
class Continue:
    """Continue from the transcript (spec §2.5); answered when the run ends."""

    reply: Reply[RunResult]


@attrs.frozen
class Steer:
    """Queue a steering message."""

    message: AgentMessage
    reply: Reply[None]


@attrs.frozen
class FollowUp:
    """Queue a follow-up message."""

    message: AgentMessage
    reply: Reply[None]


@attrs.frozen
class ClearQueues:
    """Empty the steering and/or follow-up queue; answered with what was removed."""

    steering: bool
    follow_up: bool
    reply: Reply[tuple[AgentMessage, ...]]


@attrs.frozen
class Abort:
    """Abort the active run (no-op when idle); answered once the agent is idle."""

    reply: Reply[None]


@attrs.frozen
class WaitForIdle:
    """Answered once no run is active."""

    reply: Reply[None]


@attrs.frozen
class GetState:
    """Ask for an :class:`AgentState` snapshot."""

    reply: Reply[AgentState]


@attrs.frozen
class RunFacts:
    """What the supervisor's checks read from the agent around a run, without the copy of
    the transcript an :class:`AgentState` makes (twice a turn: per-turn cost stays flat)."""

    model: Model
    last_assistant: AssistantMessage | None
    """The transcript's last assistant message."""
    has_queued: bool
    """Whether a steering or follow-up message waits."""


@attrs.frozen
class LoopFacts:
    """What the loop publishes for its handles (see ``pitrio.actors.latest``): the model and
    the transcript's last assistant message, which the check before every prompt reads."""

    model: Model
    last_assistant: AssistantMessage | None
    thinking_level: str = "off"
    """The loop's thinking level (the bash tool gives it to commands as pi's
    ``PI_REASONING_LEVEL``)."""
    system_changes: int = attrs.field(default=0, eq=False)
    """A count the loop raises at every change of its transcript that may change what the
    transcript's system messages declare: a system message appended, or any change other
    than appending. While it stays the same, a replay of the transcript's system messages
    gives what it gave (the session's prompt-section check reads no state for it). A
    version, not a fact: not compared."""


@attrs.frozen
class GetRunFacts:
    """Ask for the :class:`RunFacts`."""

    reply: Reply[RunFacts]


@attrs.frozen
class RunEndFacts:
    """Sent to a subscriber that asked for it right before each ``agent_end``: the
    :class:`RunFacts` as the low-level run ended. The session decides what follows a run from
    them without asking (a round trip before every ``agent_end``, issue 7)."""

    facts: RunFacts


@attrs.frozen(kw_only=True)
class Configure:
    """Change settings; ``None`` leaves a setting as it is. Takes effect at the next run."""

    system_prompt: str | None = None
    model: Model | None = None
    thinking_level: ThinkingLevel | None = None
    options: LoopOptions | None = None
    hooks: LoopHooks | None = None
    forced_system_prompt: str | Keep | None = KEEP
    """A prompt that replaces the transcript's for the next runs (an extension's
    ``before_agent_start``), ``None`` to stop forcing one, :data:`KEEP` to leave it."""
    reply: Reply[None]


@attrs.frozen
class SetMessages:
    """Replace the transcript (``append``: add to it instead)."""

    messages: tuple[AgentMessage, ...]
    append: bool
    reply: Reply[None]


@attrs.frozen
class ReplaceMessage:
    """Put ``new`` where ``old`` (the same object) is in the transcript (an extension's
    ``message_end`` replacement); answered with whether it was found."""

    old: AgentMessage
    new: AgentMessage
    reply: Reply[bool]


@attrs.frozen
class Reset:
    """Clear transcript, streaming state, error and both queues."""

    reply: Reply[None]


@attrs.frozen
class UpdateBatch:
    """Streamed ``message_update`` events of one response, in emission order, sent as one
    item to a subscriber that asked for batches (issue 38: a hand-over per delta was the
    largest cost of a long stream).

    Contract: ``events`` holds one or more consecutive ``message_update`` events and nothing
    else, at most :data:`~pitrio.actors.agent_loop.run.UPDATE_BATCH` of them; what the loop
    emits between them (``message_start``, ``message_end``, tool events, ...) goes out as its
    own item, after the batch before it. A batch is whatever the loop took from the provider
    at one wake-up: it never waits for more, so a lone delta goes out as a batch of one.
    A run of deltas the provider read at once is one item of it
    (:class:`~pitrio.messages.delta_run.DeltaRun`), expanded by whoever needs the updates
    one by one."""

    events: tuple[UpdateItem, ...]


LoopItem = AgentEvent | RunEndFacts | UpdateBatch
"""What a batched subscription (:meth:`AgentLoopHandle.subscribe_batched`) receives."""


@attrs.define
class SentCount:
    """Events the loop has sent one subscriber (a :class:`RunEndFacts` counts as one, a
    batch as its events): how far the loop has got, whatever the subscriber took yet.
    Written by the loop's task only; read by the subscriber."""

    value: int = 0


@attrs.frozen
class LoopFeed:
    """A batched subscription: the channel and the loop's count of events sent on it."""

    events: trio.MemoryReceiveChannel[LoopItem]
    sent: SentCount


@attrs.frozen
class Subscribe:
    """Open an event channel of ``capacity`` for a new subscriber (``run_facts``: with a
    :class:`RunEndFacts` before each ``agent_end``; ``batches``: streamed updates as
    :class:`UpdateBatch` items, and the reply is a :class:`LoopFeed`)."""

    capacity: int
    reply: Reply[Any]
    run_facts: bool = False
    batches: bool = False


AgentCommand = (
    Prompt
    | Continue
    | Steer
    | FollowUp
    | ClearQueues
    | Abort
    | WaitForIdle
    | GetState
    | GetRunFacts
    | Configure
    | SetMessages
    | Reset
    | ReplaceMessage
    | Subscribe
)
