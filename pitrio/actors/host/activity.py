"""What one hosted session's events say about its activity: whether a run is in progress, how
many messages wait in its queues, and the daemon's log lines about its runs.

:class:`Activity` is the hosted session's own helper (one per session, kept across restarts of
its tree), fed by the session's relay in the task that emits each event. The relay hands it
every event but the deltas (``message_update``, most events of a run), which say nothing here.
A run's start and settle are told to the host's subscribers (``session_busy`` /
``session_idle``); the accounts of the run are :class:`~.runs.RunLedger`'s, written to the log
as it returns them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from pitrio.actors.host.runs import LogEvent, RunLedger
from pitrio.logs import event as log_event
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.content import TextContent
from pitrio.messages.events import (
    AgentSessionEvent,
    AgentSettled,
    AgentStart,
    MessageEnd,
    QueueUpdate,
    ToolExecutionEnd,
)

if TYPE_CHECKING:
    from pitrio.actors.host.context import HostEvent

log = logging.getLogger("pitrio.host")

_LEVELS = {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class Activity:
    """A hosted session's run in progress, queued messages and run log (see the module doc)."""

    __slots__ = ("_emit", "_session_id", "queued", "running", "runs")

    def __init__(self, session_id: str, emit: Callable[[HostEvent], None]) -> None:
        self._session_id = session_id
        self._emit = emit  # to the host's subscribers
        self.running = False
        """A run is in progress: from its ``agent_start`` to its ``agent_settled``."""
        self.queued = 0
        """Steering and follow-up messages waiting (the last ``queue_update``'s count)."""
        self.runs = RunLedger(session_id)
        """What the log says about this session's runs (kept across restarts)."""

    def observe(self, event: AgentSessionEvent, now: float) -> None:
        """Take in one event the session emitted at ``now`` (never a ``message_update``)."""
        if isinstance(event, AgentStart) and not self.running:
            self.running = True
            self._emit({"type": "session_busy", "sessionId": self._session_id})
            _write(self.runs.start(now))
        elif isinstance(event, AgentSettled):
            self.running = False
            self._emit({"type": "session_idle", "sessionId": self._session_id})
            _write(self.runs.settled(now))
        elif isinstance(event, QueueUpdate):
            self.queued = len(event.steering) + len(event.follow_up)
        elif isinstance(event, MessageEnd) and isinstance(event.message, AssistantMessage):
            _write(self.runs.response(event.message))
        elif isinstance(event, ToolExecutionEnd) and event.is_error:
            text = " ".join(b.text for b in event.result.content if isinstance(b, TextContent))
            _write(self.runs.tool_failed(event.tool_name, event.tool_call_id, text))

    def ended(self) -> None:
        """The session's tree ended: no run is in progress any more (no ``session_idle``)."""
        self.running = False


def _write(entry: LogEvent | None) -> None:
    if entry is not None:
        level, name, fields = entry
        log_event(log, name, _LEVELS[level], **fields)
