"""The scenario language of the differential harness, and the scenarios.

A scenario is a list of steps run in order against one agent: script the mock LLM, send a
command (and wait for its response), send raw bytes, wait for an event, wait until the output is
quiet, send a signal, close stdin. The same steps drive real pi and pitrio; the comparer then
looks at what each wrote. ``WaitEvent`` counts the events that arrived since the last line sent.
"""

from __future__ import annotations

import base64
import signal
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
    message's ``entryId``.
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


def cmd(type_: str, **fields: Any) -> Cmd:
    """A command waiting for its response."""
    return Cmd({"type": type_, **fields})


DEFAULT = Mock({"default": text("ok")})
NO_PROVIDER_RETRY = {"retry": {"provider": {"maxRetries": 0}, "baseDelayMs": 50}}
SLOW = text("one two three four five six", deltas=6, delay=0.15)
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


def _commands() -> list[Scenario]:
    """Every command on its success path and its error path (breadth first).

    Commands that leave nothing behind share a process (pi's start costs ~1 s of CPU).
    """
    s: list[Scenario] = []
    add = s.append
    add(
        Scenario(
            "idle_queries",
            [
                DEFAULT,
                cmd("get_state"),
                cmd("get_messages"),
                cmd("get_commands"),
                cmd("get_last_assistant_text"),
                cmd("get_fork_messages"),
                cmd("get_session_stats"),
                cmd("abort"),
                cmd("abort_retry"),
                cmd("abort_bash"),
                cmd("cycle_thinking_level"),
                cmd("export_html"),
                cmd("compact"),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "request_defaults",
            [DEFAULT, *prompt("hi")],
            settings={"defaultModel": "mock-vision"},
            extra_models=(VISION,),
            openai_compat=False,
        )
    )
    add(
        Scenario(
            "get_state_no_session",
            [DEFAULT, cmd("get_state"), cmd("get_session_stats")],
            args=("--no-session",),
        )
    )
    add(
        Scenario(
            "idle_errors",
            [
                DEFAULT,
                cmd("prompt"),
                cmd("set_model", provider="mock", modelId="nope"),
                cmd("fork", entryId="nope"),
                cmd("set_session_name", name="   "),
                cmd("steer"),
                cmd("set_thinking_level"),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "raw_lines",
            [
                DEFAULT,
                Cmd({"type": "get_state", "id": 42}),
                Cmd({"type": "get_state"}, no_id=True, expect_command="get_state"),
                Raw(b'{"id":"u1","type":"no_such_command"}\n', responses=1),
                Raw(b"not json\n", 1),
                Raw(b"\n", 1),
                Raw(b"[1,2]\n", 1),
                Raw(b'{"type":"get_state","id":"crlf"}\r\n', 1),
                Raw(b'{"type":"get_state","id":"extra","unknownField":1}\n', 1),
            ],
        )
    )
    add(
        Scenario(
            "settings_commands",
            [
                DEFAULT,
                cmd("set_steering_mode", mode="all"),
                cmd("set_follow_up_mode", mode="all"),
                cmd("set_auto_compaction", enabled=False),
                cmd("set_auto_retry", enabled=False),
                cmd("set_thinking_level", level="high"),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "prompt_turns",
            [
                Mock({"default": text("alpha beta gamma", deltas=3)}),
                *prompt("one"),
                *prompt("two"),
                cmd("get_messages"),
                cmd("get_state"),
                cmd("get_session_stats"),
                cmd("get_last_assistant_text"),
                cmd("get_fork_messages"),
                cmd("set_session_name", name="  my name  "),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "steer_idle",
            [
                DEFAULT,
                cmd("steer", message="later"),
                cmd("get_state"),
                *prompt("now"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "follow_up_idle",
            [
                DEFAULT,
                cmd("follow_up", message="after"),
                cmd("get_state"),
                *prompt("now"),
                Quiet(0.5),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "new_session",
            [
                DEFAULT,
                *prompt("hi"),
                cmd("new_session"),
                cmd("get_state"),
                cmd("get_messages"),
                cmd("new_session", parentSession="/x/parent.jsonl"),
                *prompt("hi"),
            ],
        )
    )
    add(
        Scenario(
            "models",
            [
                DEFAULT,
                cmd("get_available_models"),
                cmd("cycle_model"),
                cmd("cycle_model"),
                cmd("set_model", provider="mock", modelId="mock-vision"),
                cmd("get_state"),
            ],
            extra_models=(VISION,),
        )
    )
    add(
        Scenario(
            "thinking_levels",
            [
                DEFAULT,
                cmd("set_thinking_level", level="high"),
                cmd("get_state"),
                cmd("set_thinking_level", level="bogus"),
                cmd("cycle_thinking_level"),
                cmd("cycle_thinking_level"),
                cmd("get_state"),
                *prompt("think"),
            ],
            settings={"defaultModel": "mock-vision"},
            extra_models=(VISION,),
        )
    )
    add(
        Scenario(
            "compact_manual",
            [
                DEFAULT,
                *prompt("one"),
                *prompt("two"),
                Mock({"queue": [text("SUMMARY of the talk")]}),
                cmd("compact", customInstructions="be short"),
                cmd("get_messages"),
                cmd("compact"),
                cmd("get_session_stats"),
            ],
        )
    )
    add(
        Scenario(
            "bash_ok",
            [
                DEFAULT,
                cmd("bash", command="echo hi; echo err >&2; exit 3"),
                cmd("get_messages"),
                *prompt("after"),
            ],
        )
    )
    add(Scenario("bash_missing_command", [DEFAULT, cmd("bash")]))
    add(
        Scenario(
            "abort_bash_running",
            [
                DEFAULT,
                Cmd({"type": "bash", "command": "sleep 5", "id": "b1"}, wait=False),
                Sleep(0.4),
                cmd("abort_bash"),
                WaitEvent("response", where=(("id", "b1"),)),
            ],
        )
    )
    add(
        Scenario("export_html", [DEFAULT, *prompt("hi"), cmd("export_html", outputPath="out.html")])
    )
    add(
        Scenario(
            "switch_session_missing",
            [DEFAULT, cmd("switch_session", sessionPath="nothere.jsonl"), cmd("get_state")],
        )
    )
    add(
        Scenario(
            "clone", [DEFAULT, *prompt("hi"), cmd("clone"), cmd("get_state"), cmd("get_messages")]
        )
    )
    add(
        Scenario(
            "set_steering_mode_invalid",
            [DEFAULT, cmd("set_steering_mode", mode="sometimes"), cmd("get_state")],
        )
    )
    add(Scenario("set_auto_retry_no_enabled", [DEFAULT, cmd("set_auto_retry"), cmd("get_state")]))
    add(Scenario("clone_empty", [DEFAULT, cmd("clone"), cmd("get_state")]))
    add(
        Scenario(
            "new_session_no_session",
            [DEFAULT, *prompt("hi"), cmd("new_session"), cmd("get_state")],
            args=("--no-session",),
        )
    )
    add(
        Scenario(
            "switch_session_back",
            [
                DEFAULT,
                *prompt("first"),
                Mark("first_file", "get_state"),
                cmd("new_session"),
                *prompt("second"),
                Cmd({"type": "switch_session"}, use_mark="first_file"),
                cmd("get_messages"),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "fork_ok",
            [
                DEFAULT,
                *prompt("first"),
                *prompt("second"),
                Mark("fork", "get_fork_messages"),
                Cmd({"type": "fork"}, use_mark="fork"),
                cmd("get_messages"),
                cmd("get_state"),
            ],
        )
    )
    return s


def _streaming() -> list[Scenario]:
    """Tools, steering and follow-up during a stream and during tools, abort, thinking, images."""
    s: list[Scenario] = []
    add = s.append
    add(
        Scenario(
            "tools",
            [
                Mock(
                    {
                        "queue": [
                            tool("read", {"path": "hello.txt"}),
                            text("done"),
                            tool("bash", {"command": "echo hi"}),
                            text("done"),
                            tool("nosuch", {"x": 1}),
                            text("done"),
                            tool("read", {"nopath": 1}),
                            text("done"),
                        ]
                    }
                ),
                *prompt("read"),
                *prompt("bash"),
                *prompt("unknown"),
                *prompt("bad args"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "tool_write_edit",
            [
                Mock(
                    {
                        "queue": [
                            tool("write", {"path": "new.txt", "content": "a\nb\n"}),
                            tool(
                                "edit",
                                {"path": "new.txt", "edits": [{"oldText": "b", "newText": "c"}]},
                            ),
                            text("done"),
                        ]
                    }
                ),
                *prompt("go"),
            ],
        )
    )
    add(
        Scenario(
            "prompt_while_streaming",
            [
                Mock({"default": SLOW}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("prompt", message="again"),
                WaitEvent("agent_end"),
            ],
        )
    )
    add(
        Scenario(
            "steer_streaming",
            [
                Mock({"queue": [SLOW, text("steered")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("steer", message="change"),
                WaitEvent("agent_end"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "prompt_steer_behavior",
            [
                Mock({"queue": [SLOW, text("steered")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("prompt", message="change", streamingBehavior="steer"),
                WaitEvent("agent_end"),
            ],
        )
    )
    add(
        Scenario(
            "follow_up_streaming",
            [
                Mock({"queue": [SLOW, text("followed")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("follow_up", message="more"),
                WaitEvent("agent_end"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "steer_during_tool",
            [
                Mock(
                    {
                        "queue": [
                            tool("bash", {"command": "sleep 0.6; echo slept"}),
                            text("after steer"),
                            text("x"),
                        ]
                    }
                ),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("tool_execution_start"),
                cmd("steer", message="steer now"),
                cmd("follow_up", message="and later"),
                WaitEvent("agent_end"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "steering_all_mode",
            [
                Mock({"queue": [SLOW, text("both")]}),
                cmd("set_steering_mode", mode="all"),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("steer", message="s1"),
                cmd("steer", message="s2"),
                WaitEvent("agent_end"),
            ],
        )
    )
    add(
        Scenario(
            "abort_streaming",
            [
                Mock({"default": text("a b c d e f g h", deltas=8, delay=0.2)}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("abort"),
                cmd("get_state"),
                cmd("get_messages"),
                Mock({"default": text("ok")}),
                *prompt("again"),
            ],
        )
    )
    add(
        Scenario(
            "abort_during_tool",
            [
                Mock({"queue": [tool("bash", {"command": "sleep 5"}), text("never")]}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("tool_execution_start"),
                Sleep(0.2),
                cmd("abort"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "image_prompt",
            [
                DEFAULT,
                *prompt("see", images=[{"type": "image", "data": PNG, "mimeType": "image/png"}]),
            ],
            settings={"defaultModel": "mock-vision"},
            extra_models=(VISION,),
        )
    )
    add(
        Scenario(
            "image_text_only_model",
            [
                DEFAULT,
                *prompt("see", images=[{"type": "image", "data": PNG, "mimeType": "image/png"}]),
            ],
        )
    )
    add(
        Scenario(
            "compact_while_streaming",
            [
                Mock({"queue": [SLOW, text("SUMMARY")]}),
                *prompt("one"),
                Mock({"queue": [SLOW, text("SUMMARY")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("compact"),
                Quiet(0.3),
            ],
        )
    )
    add(
        Scenario(
            "new_session_while_streaming",
            [
                Mock({"default": SLOW}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("new_session"),
                Quiet(0.3),
                cmd("get_state"),
            ],
        )
    )
    add(
        Scenario(
            "bash_while_streaming",
            [
                Mock({"queue": [SLOW, text("next")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("bash", command="echo during"),
                WaitEvent("agent_end"),
                *prompt("after"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "finish_length", [Mock({"default": text("cut", finish_reason="length")}), *prompt("go")]
        )
    )
    return s


def _retries() -> list[Scenario]:
    """HTTP 500/429, exhausted, disabled, aborted; overflow and threshold compaction."""
    s: list[Scenario] = []
    add = s.append
    st = NO_PROVIDER_RETRY
    add(
        Scenario(
            "retry_500_then_ok",
            [
                Mock({"queue": [error("server_error"), error("server_error"), text("ok")]}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("auto_retry_end"),
                WaitEvent("agent_end", n=3),
                cmd("get_messages"),
            ],
            settings=st,
        )
    )
    add(
        Scenario(
            "retry_429_then_ok",
            [
                Mock({"queue": [error("rate_limit"), text("ok")]}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("auto_retry_end"),
                WaitEvent("agent_end", n=2),
            ],
            settings=st,
        )
    )
    add(
        Scenario(
            "retry_exhausted",
            [
                Mock({"default": error("server_error")}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("auto_retry_end"),
                Quiet(0.3),
                cmd("get_messages"),
            ],
            settings={"retry": {"provider": {"maxRetries": 0}, "baseDelayMs": 20, "maxRetries": 2}},
        )
    )
    add(
        Scenario(
            "retry_disabled",
            [Mock({"default": error("server_error")}), *prompt("go"), Quiet(0.3)],
            settings={"retry": {"enabled": False, "provider": {"maxRetries": 0}}},
        )
    )
    add(
        Scenario(
            "retry_aborted",
            [
                Mock({"default": error("server_error")}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("auto_retry_start"),
                cmd("abort_retry"),
                WaitEvent("auto_retry_end"),
                Quiet(0.3),
                cmd("get_state"),
            ],
            settings={"retry": {"provider": {"maxRetries": 0}, "baseDelayMs": 3000}},
        )
    )
    add(
        Scenario(
            "retry_abort_command",
            [
                Mock({"default": error("server_error")}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("auto_retry_start"),
                cmd("abort"),
                Quiet(0.3),
            ],
            settings={"retry": {"provider": {"maxRetries": 0}, "baseDelayMs": 3000}},
        )
    )
    add(
        Scenario(
            "retry_provider_default",
            [
                Mock({"queue": [error("server_error"), error("server_error"), text("ok")]}),
                *prompt("go"),
                Quiet(0.3),
            ],
        )
    )
    add(
        Scenario(
            "error_400",
            [Mock({"default": error("bad_request")}), *prompt("go"), Quiet(0.3)],
            settings=st,
        )
    )
    add(
        Scenario(
            "overflow_compaction",
            [
                DEFAULT,
                *prompt("one"),
                *prompt("two"),
                Mock({"queue": [error("context_length"), text("SUMMARY"), text("after")]}),
                Cmd({"type": "prompt", "message": "three"}),
                WaitEvent("compaction_end"),
                WaitEvent("agent_end", n=2),
                cmd("get_messages"),
            ],
            settings=st,
        )
    )
    add(
        Scenario(
            "overflow_repeated",
            [
                DEFAULT,
                *prompt("one"),
                *prompt("two"),
                Mock(
                    {"queue": [error("context_length"), text("SUMMARY"), error("context_length")]}
                ),
                Cmd({"type": "prompt", "message": "three"}),
                WaitEvent("compaction_end", n=2),
                Quiet(0.3),
            ],
            settings=st,
        )
    )
    big = {"prompt_tokens": 120000, "completion_tokens": 10}
    add(
        Scenario(
            "threshold_compaction",
            [
                Mock({"default": text("ok"), "queue": [text("ok", usage=big), text("SUMMARY")]}),
                Cmd({"type": "prompt", "message": "one"}),
                WaitEvent("compaction_end"),
                Quiet(0.3),
                *prompt("two"),
                cmd("get_messages"),
                cmd("get_session_stats"),
            ],
            settings=st,
        )
    )
    add(
        Scenario(
            "prompt_during_threshold_compaction",
            [
                Mock(
                    {
                        "default": text("ok"),
                        "queue": [text("ok", usage=big), text("SUMMARY", first_delay=1.0)],
                    }
                ),
                Cmd({"type": "prompt", "message": "one"}),
                WaitEvent("compaction_start"),
                cmd("prompt", message="two"),
                WaitEvent("compaction_end"),
                Quiet(0.5),
            ],
            settings=st,
        )
    )
    return s


def _process() -> list[Scenario]:
    """Signals, EOF, and the resume of each agent's files by the other."""
    s: list[Scenario] = []
    add = s.append
    add(Scenario("eof_idle", [DEFAULT, cmd("get_state"), CloseStdin(), WaitExit()]))
    add(
        Scenario(
            "sigterm_idle", [DEFAULT, cmd("get_state"), Signal(int(signal.SIGTERM)), WaitExit()]
        )
    )
    add(
        Scenario("sighup_idle", [DEFAULT, cmd("get_state"), Signal(int(signal.SIGHUP)), WaitExit()])
    )
    add(
        Scenario("sigint_idle", [DEFAULT, cmd("get_state"), Signal(int(signal.SIGINT)), WaitExit()])
    )
    add(
        Scenario(
            "sigterm_streaming",
            [
                Mock({"default": SLOW}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                Signal(int(signal.SIGTERM)),
                WaitExit(),
            ],
        )
    )
    talk = [
        Mock(
            {
                "queue": [
                    text("first answer"),
                    tool("read", {"path": "hello.txt"}),
                    text("read done"),
                ]
            }
        ),
        *prompt("one"),
        *prompt("two"),
        cmd("set_session_name", name="resumed"),
        cmd("set_thinking_level", level="off"),
    ]
    after = [
        DEFAULT,
        cmd("get_state"),
        cmd("get_messages"),
        cmd("get_fork_messages"),
        *prompt("three"),
        cmd("get_session_stats"),
    ]
    add(Scenario("resume_pi_file", after, prelude=talk, prelude_agent="pi"))
    add(Scenario("resume_pitrio_file", after, prelude=talk, prelude_agent="pitrio"))
    compacted = [*talk, Mock({"queue": [text("SUMMARY")]}), cmd("compact")]
    retried: list[Step] = [
        Mock({"queue": [error("server_error"), text("after retry")]}),
        Cmd({"type": "prompt", "message": "one"}),
        WaitEvent("auto_retry_end"),
        WaitEvent("agent_end", n=2),
    ]
    add(
        Scenario(
            "resume_pi_retried",
            after,
            prelude=retried,
            prelude_agent="pi",
            settings=NO_PROVIDER_RETRY,
        )
    )
    add(
        Scenario(
            "resume_pitrio_retried",
            after,
            prelude=retried,
            prelude_agent="pitrio",
            settings=NO_PROVIDER_RETRY,
        )
    )
    add(Scenario("resume_pi_compacted", after, prelude=compacted, prelude_agent="pi"))
    add(Scenario("resume_pitrio_compacted", after, prelude=compacted, prelude_agent="pitrio"))
    return s


SCENARIOS: list[Scenario] = [*_commands(), *_streaming(), *_retries(), *_process()]
BY_NAME = {sc.name: sc for sc in SCENARIOS}
assert len(BY_NAME) == len(SCENARIOS), "scenario names must be unique"
