"""The commands the Supervisor actor takes (typed messages; its handle builds them), the nursery
a requester lends for a step (:mod:`.lent`, re-exported) and what the session does after one.

Imported by the handle when it first sends one (a retry, a compaction, a branch summary, a
changed setting): a plain turn sends none, so a start does not import this module (issue 38)."""

from __future__ import annotations

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.session_store.command_stamp import CommandStamp
from pitrio.actors.supervisor.actor.lent import Lent
from pitrio.actors.supervisor.branch_summary import BranchSummaryResult
from pitrio.actors.supervisor.compaction import CompactionCheck
from pitrio.actors.supervisor.decisions import (
    BeforeSettle,
    Compact,
    Continue,
    End,
    PostRunDecision,
    Retry,
    RunEnded,
)
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.events import AutoRetryEnd
from pitrio.messages.model import Model

Step = End | Continue | BeforeSettle
"""What the session does after a step: settle, continue the loop, or run the boundary."""


@attrs.frozen
class Decide:
    """A low-level run ended: decide what follows (the decision's events are the caller's to
    emit, after its ``agent_end``)."""

    ended: RunEnded
    reply: Reply[PostRunDecision]


@attrs.frozen
class Observe:
    """A user message started (``message is None``) or an assistant message ended; answered
    with the event to emit after it (a retry sequence's success), if any."""

    message: AssistantMessage | None
    reply: Reply[AutoRetryEnd | None]


@attrs.frozen
class CarryOut:
    """Carry out a retry or an automatic compaction decided after a low-level run."""

    action: Retry | Compact
    failed_entry_id: str | None
    """The entry of the failed response to omit from the context, if it was recorded."""
    run_scope: trio.CancelScope
    lent: Lent
    reply: Reply[Step]


@attrs.frozen
class BeforePrompt:
    """The compaction check before a prompt runs (pi's preflight), compacting if needed."""

    check: CompactionCheck
    last_entry_id: str | None
    lent: Lent
    reply: Reply[None]


@attrs.frozen
class RunAborted:
    """The run was aborted: a started retry sequence ends as cancelled."""

    reply: Reply[None]


@attrs.frozen
class AbortRetry:
    """Cancel a pending retry back-off (the run then settles)."""

    reply: Reply[None]


@attrs.frozen
class ManualCompact:
    """``compact``: summarize the branch now (no run is active)."""

    custom_instructions: str | None
    lent: Lent
    reply: Reply[CompactionResult]
    stamp: CommandStamp | None = None
    """The client command id its compaction entry carries (exactly-once commands)."""


@attrs.frozen
class SummarizeBranch:
    """Summarize the entries a navigation leaves (no run is active)."""

    entries: tuple[SessionEntry, ...]
    model: Model
    custom_instructions: str | None
    replace_instructions: bool
    lent: Lent
    reply: Reply[BranchSummaryResult]


@attrs.frozen
class Configure:
    """Turn automatic retry or compaction on or off (``None``: unchanged)."""

    retry_enabled: bool | None
    compaction_enabled: bool | None
    reply: Reply[None]


SupervisorCommand = (
    Decide
    | Observe
    | CarryOut
    | BeforePrompt
    | RunAborted
    | AbortRetry
    | ManualCompact
    | SummarizeBranch
    | Configure
)


__all__ = [
    "AbortRetry",
    "BeforePrompt",
    "CarryOut",
    "Configure",
    "Decide",
    "Lent",
    "ManualCompact",
    "Observe",
    "RunAborted",
    "Step",
    "SummarizeBranch",
    "SupervisorCommand",
]
