"""What a scenario is: a model script, tools, settings and client steps placed against events.

Pure data (no trio): the runner (:mod:`.runner`) plays it. A :class:`Step` is one client
command; it waits for its trigger (the ``nth`` event of type ``after``, or another step's
answer, or the start), then for a number of scheduling points the seed picks between 0 and
``jitter`` (and mock time between 0 and ``spread`` seconds), then sends its command. Each step
runs in a task of its own, so the steps of a scenario race each other as two clients would.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

import attrs

from pitrio.actors.model_router import FauxProvider
from pitrio.actors.tool_executor import AgentTool

Op = Literal[
    "prompt",
    "steer",
    "follow_up",
    "abort",
    "compact",
    "abort_retry",
    "new_session",
    "switch_session",
    "fork",
    "navigate",
    "foreign_append",
]
"""What a step sends. ``prompt`` returns at settle (or when queued); ``foreign_append`` is a
second writer (another pi process) appending a line to the session file; ``navigate`` moves
to the first user message with a branch summary (``summarize``)."""


@attrs.frozen(kw_only=True)
class Step:
    """One client command and where it lands."""

    op: Op
    text: str = ""
    after: str | None = None
    """Wait for this event type (``None``: do not wait for an event)."""
    nth: int = 1
    """...for its ``nth`` occurrence."""
    after_step: int | None = None
    """Wait for the answer of this step (by index) first."""
    jitter: int = 0
    """The seed picks 0..jitter scheduling points to wait after the trigger."""
    spread: float = 0.0
    """The seed picks 0..spread seconds of (mock) time to wait after the trigger."""
    behavior: str | None = None
    """A prompt's ``streaming_behavior`` (``steer``, ``followUp``)."""


@attrs.frozen(kw_only=True)
class Scenario:
    """A named script: the model's replies, tools, settings and the client steps."""

    name: str
    description: str
    model: Callable[[], FauxProvider]
    """A fresh scripted model for each schedule."""
    steps: Sequence[Step]
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    """The agent dir's ``settings.json``."""
    tools: Callable[[], Sequence[AgentTool]] = tuple
    """Fresh in-process tools for each schedule."""
    files: Mapping[str, str] = attrs.field(factory=dict)
    """Files written into the working directory first."""
    model_id: str = "faux/faux-1"
    budget: float = 600.0
    """Mock seconds the scenario may take; a step still unanswered then is a finding."""
    mcp_servers: Mapping[str, Callable[[Callable[[], Awaitable[None]]], Any]] = attrs.field(
        factory=dict
    )
    """In-process MCP servers by name: each factory gets the server's ``die`` (which ends
    it as a crashed process would: its connection closes mid-call) and returns an
    ``mcp`` ``MCPServer``. Served over memory streams, so the seed controls their timing."""
    generate: Callable[[random.Random], Sequence[Step]] | None = None
    """Steps chosen by the seed instead of ``steps`` (a random client)."""

    def steps_for(self, seed: int) -> Sequence[Step]:
        """The steps played under ``seed``."""
        if self.generate is None:
            return self.steps
        return self.generate(random.Random(f"steps:{seed}"))
