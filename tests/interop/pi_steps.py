"""The scenario language of the differential harness (steps, scenarios, mock answers).

A scenario is a list of steps run in order against one agent: script the mock LLM, send a
command (and wait for its response), send raw bytes, wait for an event, wait until the output is
quiet, send a signal, close stdin. The same steps drive real pi and pitrio; the comparer then
looks at what each wrote. ``WaitEvent`` counts the events that arrived since the last line sent.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

USAGE = {"prompt_tokens": 100, "completion_tokens": 10}


@dataclass(frozen=True)
class Mock:
    """Replace parts of the mock's script: ``default``, ``rules``, ``queue``."""

    config: dict[str, Any]


@dataclass(frozen=True)
class Cmd:
    """Send one command (an ``id`` is added unless given or ``no_id``), wait for its response."""

    cmd: dict[str, Any]
    wait: bool = True
    no_id: bool = False
    expect_command: str = ""
    use_mark: str = ""


@dataclass(frozen=True)
class Mark:
    """Send ``command`` and keep a value of its response for a later ``Cmd(use_mark=name)``.

    ``get_state`` keeps ``sessionFile`` (as ``sessionPath``), ``get_fork_messages`` the first
    message's ``entryId``, ``get_entries`` the id of the middle entry (as ``since``).
    """

    name: str
    command: str


@dataclass(frozen=True)
class Raw:
    """Send raw bytes; wait for ``responses`` responses."""

    data: bytes
    responses: int = 0


@dataclass(frozen=True)
class WaitEvent:
    """Wait for the ``n``-th event of ``type`` with the fields ``where`` since the last send."""

    type: str
    n: int = 1
    where: tuple[tuple[str, Any], ...] = ()
    timeout: float = 45.0

    def matches(self, obj: dict[str, Any]) -> bool:
        """Whether ``obj`` has every field of ``where`` (dotted paths)."""
        for path, want in self.where:
            cur: Any = obj
            for part in path.split("."):
                cur = cur.get(part) if isinstance(cur, dict) else None
            if cur != want:
                return False
        return True


@dataclass(frozen=True)
class WaitRequests:
    """Wait until the mock has answered ``n`` requests in all."""

    n: int


@dataclass(frozen=True)
class Quiet:
    """Read until nothing arrived for ``seconds``."""

    seconds: float = 0.3


@dataclass(frozen=True)
class Sleep:
    """Read for ``seconds`` (only where no event marks the moment)."""

    seconds: float


@dataclass(frozen=True)
class Signal:
    """Send a signal to the agent."""

    signum: int


@dataclass(frozen=True)
class CloseStdin:
    """Close the agent's stdin (EOF)."""


@dataclass(frozen=True)
class WaitExit:
    """Wait for the agent to exit."""

    timeout: float = 10.0


Step = (
    Mock
    | Mark
    | Cmd
    | Raw
    | WaitEvent
    | WaitRequests
    | Quiet
    | Sleep
    | Signal
    | CloseStdin
    | WaitExit
)


@dataclass(frozen=True)
class Scenario:
    """A named list of steps and the sandbox it runs in."""

    name: str
    steps: list[Step]
    settings: dict[str, Any] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    context_window: int = 128000
    extra_models: tuple[dict[str, Any], ...] = ()
    prelude: list[Step] | None = None
    prelude_agent: str = "pi"
    settle: float = 0.3
    openai_compat: bool = True
    # A session file (with ``$SANDBOX`` for the sandbox's path) copied into the sandbox's
    # sessions folder and resumed with ``--session`` (a transcript written by another agent).
    resume: str = ""


def text(t: str = "ok", deltas: int = 1, **kw: Any) -> dict[str, Any]:
    """A mock text answer with fixed usage."""
    return {"kind": "text", "text": t, "deltas": deltas, "usage": USAGE, **kw}


def tool(name: str, arguments: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """A mock tool-call answer."""
    return {
        "kind": "tool_call",
        "name": name,
        "arguments": arguments,
        "id": "call_fixed1",
        "usage": USAGE,
        **kw,
    }


def error(preset: str, **kw: Any) -> dict[str, Any]:
    """A mock HTTP error answer."""
    return {"kind": "error", "preset": preset, **kw}


def prompt(message: str, **extra: Any) -> list[Step]:
    """Send a prompt and wait for the run's ``agent_end``."""
    return [Cmd({"type": "prompt", "message": message, **extra}), WaitEvent("agent_end")]


def settled_prompt(message: str) -> list[Step]:
    """Send a prompt and wait for the run's ``agent_settled``: before a later step waits for
    another run's ``agent_settled`` (a wait counts the lines read since the last command, and
    this run's settle, still unread when its ``agent_end`` was, would count for the next)."""
    return [Cmd({"type": "prompt", "message": message}), WaitEvent("agent_settled")]


def cmd(type_: str, **fields: Any) -> Cmd:
    """A command waiting for its response."""
    return Cmd({"type": type_, **fields})


DEFAULT = Mock({"default": text("ok")})
NO_PROVIDER_RETRY = {"retry": {"provider": {"maxRetries": 0}, "baseDelayMs": 50}}
SLOW = text("one two three four five six", deltas=6, delay=0.15)
# One delta, then a pause that a command or a signal sent after the first delta surely falls
# into: how much of the reply came before it is then the same in every run.
PAUSED = text("a b", deltas=2, delay=3.0)
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6300010000050001d0d3ff6d0000000049454e44ae426082"
    )
).decode()
VISION = {
    "id": "mock-vision",
    "name": "Mock Vision",
    "reasoning": True,
    "input": ["text", "image"],
    "contextWindow": 128000,
    "maxTokens": 16384,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
}
