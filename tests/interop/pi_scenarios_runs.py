"""The differential harness's scenarios of retries, compaction, signals, EOF and resume."""

from __future__ import annotations

import signal

from tests.interop.pi_scenarios_16 import KEEP_LITTLE
from tests.interop.pi_steps import (
    DEFAULT,
    NO_PROVIDER_RETRY,
    PAUSED,
    CloseStdin,
    Cmd,
    Mock,
    Quiet,
    Scenario,
    Signal,
    Step,
    WaitEvent,
    WaitExit,
    cmd,
    error,
    prompt,
    settled_prompt,
    text,
    tool,
)


def retry_scenarios() -> list[Scenario]:
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
            # What a 500 leads to, whatever retries it: some vendors' clients repeat it quietly
            # (pi's Bedrock client), most through auto-retry, and Codex not at all in pi 1.6.0
            # (no provider retries by default, and its error text is not one the agent
            # retries): the run's settle ends each way.
            "retry_requests",
            [
                Mock({"queue": [error("server_error"), text("ok")]}),
                Cmd({"type": "prompt", "message": "go"}),
                WaitEvent("agent_settled"),
                Quiet(0.5),
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
            settings={**st, **KEEP_LITTLE},
        )
    )
    add(
        Scenario(
            "overflow_repeated",
            [
                DEFAULT,
                # Each run settled before the next prompt: the wait for the third run's settle
                # below counts lines read since its prompt (see settled_prompt).
                *settled_prompt("one"),
                *settled_prompt("two"),
                # The recovery's compaction cuts a split turn: two summary calls (history, then
                # the turn's prefix, one after the other in 1.6.0), then the retry overflows too.
                Mock(
                    {
                        "queue": [
                            error("context_length"),
                            text("SUMMARY"),
                            text("PREFIX"),
                            error("context_length"),
                        ]
                    }
                ),
                Cmd({"type": "prompt", "message": "three"}),
                WaitEvent("agent_settled"),
                Quiet(0.3),
            ],
            settings={**st, **KEEP_LITTLE},
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
            settings={**st, **KEEP_LITTLE},
        )
    )
    # pi 1.6.0's compaction.modelOverrides: the mock model's own reserve (40000 of its 128000
    # window: compaction above 88000) compacts a context the ordinary 16384 (above 111616)
    # leaves; an entry whose key differs in case is not the model's.
    for name, ref, compacts in (
        ("threshold_compaction_model_override", "mock/mock-model", True),
        ("threshold_model_override_other_key", "mock/Mock-Model", False),
    ):
        override = {"modelOverrides": {ref: {"reserveTokens": 40000}}}
        mid = {"prompt_tokens": 100000, "completion_tokens": 10}
        add(
            Scenario(
                name,
                [
                    Mock(
                        {"default": text("ok"), "queue": [text("ok", usage=mid), text("SUMMARY")]}
                    ),
                    Cmd({"type": "prompt", "message": "one"}),
                    WaitEvent("compaction_end" if compacts else "agent_settled"),
                    Quiet(0.3),
                    *prompt("two"),
                    cmd("get_messages"),
                ],
                settings={**st, "compaction": {**KEEP_LITTLE["compaction"], **override}},
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
            settings={**st, **KEEP_LITTLE},
        )
    )
    return s


def process_scenarios() -> list[Scenario]:
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
                Mock({"default": PAUSED}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                Signal(int(signal.SIGTERM)),
                WaitExit(),
            ],
        )
    )
    add(
        Scenario(
            "eof_streaming",
            [
                Mock({"default": PAUSED}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                CloseStdin(),
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
    for agent in ("pi", "pitrio"):
        add(
            Scenario(
                f"resume_{agent}_compacted",
                after,
                prelude=compacted,
                prelude_agent=agent,
                settings=KEEP_LITTLE,
            )
        )
    return s
