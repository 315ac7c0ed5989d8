"""What one explored schedule left to look at: plain data, filled in by the runner."""

from __future__ import annotations

from typing import Any

import attrs


@attrs.define
class StepRecord:
    """One client step: whether it was sent, every answer it got, what escaped it."""

    index: int
    op: str
    sent: bool = False
    sent_after: int = 0
    """Events the client had seen when it sent the step."""
    answers: list[str] = attrs.field(factory=list)
    disposition: str | None = None
    """A prompt's acceptance (``started``, ``queued``, ``handled``)."""
    crashes: list[str] = attrs.field(factory=list)
    """Exceptions other than pitrio's errors that reached the client."""


@attrs.define
class Observation:
    """Everything the invariants check, for one scenario under one seed."""

    scenario: str
    seed: int
    strategy: str
    events: list[dict[str, Any]] = attrs.field(factory=list)
    """Every event the client stream delivered, as JSON (``_seq``: its sequence number)."""
    steps: list[StepRecord] = attrs.field(factory=list)
    timed_out: bool = False
    closed_at: int | None = None
    """How many events had arrived when the session was closed."""
    final_state: dict[str, Any] = attrs.field(factory=dict)
    live_context: list[Any] | None = None
    """The agent loop's messages at the end."""
    store_context: list[Any] | None = None
    """The store's projection at the end (what the next request would be built from)."""
    file_context: list[Any] | None = None
    """The projection of the current session's file, opened afresh after the close."""
    current_file: str | None = None
    files: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    """Each session file: its ``problems``, entry ``ids`` and ``parents`` in file order."""
    children_start: list[int] = attrs.field(factory=list)
    children_end: list[int] = attrs.field(factory=list)
    tasks_start: int = 0
    tasks_end: int = 0
    tasks_after_close: int = 0
    leaked: list[str] = attrs.field(factory=list)
    """The last session's handles still alive after the close and a collection."""
    crash: str | None = None
    """An exception that ended the whole run."""
    workdir: str = ""
    steps_run: int = 0
    landing: list[tuple[int, float]] = attrs.field(factory=list)
    """Per step, the scheduling points and mock seconds the seed had it wait after its
    trigger."""
