"""Whether the attached session is busy, from its frames, without any I/O.

A session is busy from ``agent_start`` (or a retry's start) to ``agent_settled``, from
``compaction_start`` to ``compaction_end``, and while a prompt this client sent has no response
yet. A prompt can be accepted without a run (an extension command, an ``input`` hook): when its
response comes and no run was seen, :attr:`RunState.probe` asks the shell to send
``get_state``, whose response comes after every event emitted so far and so settles the
question. The client shows its prompt marker and ends at end of input only when the session is
not busy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

RUN_STARTS = ("agent_start", "auto_retry_start")


@attrs.define
class RunState:
    """The run state of one session as this client knows it."""

    running: bool = False
    """Between the start of a run and its ``agent_settled``."""
    compacting: bool = False
    """Between ``compaction_start`` and ``compaction_end``: a compaction inside a run, or one
    of its own (``/compact``), which no ``agent_settled`` ends."""
    pending: str | None = None
    """The id of the prompt (or of the ``get_state`` after it) awaiting its response."""
    probe: bool = False
    """A ``get_state`` is to be sent (see the module's docstring); the shell clears it."""
    pending_command: dict[str, Any] | None = None
    """The prompt ``pending`` names, as sent (with its id)."""
    resend: dict[str, Any] | None = None
    """A prompt to send again, with the same id, on the new connection: its answer went
    down with the old one. The daemon applies an id once (exactly-once commands), so it runs
    if it never arrived and is answered, not run again, if it did. The shell clears it."""
    last_seq: int = 0
    """The last event seen: where a resumed connection starts."""
    stream: str | None = None
    """The daemon's stream epoch of the session (a resume names it)."""

    @property
    def busy(self) -> bool:
        """Whether a run or a prompt of ours is in flight."""
        return self.running or self.compacting or self.pending is not None or self.probe

    def sent(self, request_id: str, command: Mapping[str, Any] | None = None) -> None:
        """A prompt (``command``, as sent) or the probe went out with ``request_id``."""
        self.pending = request_id
        self.pending_command = None if command is None else dict(command)
        self.probe = False

    def feed(self, frame: Mapping[str, Any]) -> None:
        """Take one frame of the session socket."""
        kind = frame.get("type")
        seq = frame.get("seq")
        if kind == "attached":
            self.stream = frame.get("stream")
            self.last_seq = max(self.last_seq, int(frame.get("seq") or 0))
            self.running = bool(frame.get("isStreaming"))
            if self.pending_command is not None:  # its answer went down with the old connection
                self.resend = self.pending_command
            elif self.pending is not None:  # the probe's: ask again
                self.pending, self.probe = None, True
            return
        if isinstance(seq, int) and kind != "response":
            self.last_seq = max(self.last_seq, seq)
        if kind in RUN_STARTS:
            self.running = True
        elif kind == "compaction_start":
            self.compacting = True
        elif kind == "compaction_end":
            self.compacting = False
        elif kind == "agent_settled":
            self.running = False
        elif kind == "response" and self.pending is not None and frame.get("id") == self.pending:
            self.pending = self.pending_command = None
            if frame.get("inProgress"):  # a resent prompt the daemon is still accepting
                self.probe = True
            elif frame.get("command") == "get_state":
                data = frame.get("data") or {}
                self.running = self.running or bool(data.get("isStreaming"))
                self.compacting = self.compacting or bool(data.get("isCompacting"))
            elif frame.get("success") and not self.running:
                self.probe = True
