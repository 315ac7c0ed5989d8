"""The differential harness's scenarios: every command, streaming, tools (and, from
``pi_scenarios_runs``, retries, compaction, signals and resume; from ``pi_scenarios_16``, what
pi 1.6.0 added)."""

from __future__ import annotations

from tests.interop.pi_scenarios_16 import KEEP_LITTLE, scenarios_16
from tests.interop.pi_scenarios_runs import process_scenarios, retry_scenarios
from tests.interop.pi_steps import (
    DEFAULT,
    PAUSED,
    PNG,
    SLOW,
    VISION,
    Cmd,
    Mark,
    Mock,
    Quiet,
    Raw,
    Scenario,
    Sleep,
    WaitEvent,
    cmd,
    prompt,
    text,
    tool,
)


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
            settings=KEEP_LITTLE,
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
                # Answered once the agent reads commands: pi reads the lines a slow start-up
                # left waiting together, and an abort_bash handled before its bash has started
                # (pi awaits the user_bash hook first) aborts nothing.
                cmd("get_state"),
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
                # One delta, then a pause the abort surely falls into.
                Mock({"default": text("a b", deltas=2, delay=3.0)}),
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
            # Replies with reasoning (and a signature where the vendor has one) that the next
            # requests replay, at a high level, with thinking off, then at the lowest level.
            "thinking_replay",
            [
                Mock(
                    {
                        "queue": [
                            text("first answer", thinking="Let me think."),
                            tool("read", {"path": "hello.txt"}, thinking="Reading it."),
                            text("done", thinking="Done."),
                        ]
                    }
                ),
                cmd("set_thinking_level", level="high"),
                *prompt("one"),
                *prompt("two"),
                cmd("set_thinking_level", level="off"),
                *prompt("three"),
                cmd("set_thinking_level", level="minimal"),
                *prompt("four"),
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
                Mock({"queue": [PAUSED, text("SUMMARY")]}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=(("assistantMessageEvent.type", "text_delta"),)),
                cmd("compact"),
                Quiet(0.3),
            ],
            settings=KEEP_LITTLE,
        )
    )
    add(
        Scenario(
            "new_session_while_streaming",
            [
                Mock({"default": PAUSED}),
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
                # Slower than SLOW: the command must answer while the reply still streams,
                # and on a loaded machine pi took longer than SLOW's 0.9 s to spawn bash.
                Mock(
                    {
                        "queue": [
                            text("one two three four five six", deltas=6, delay=0.6),
                            text("next"),
                        ]
                    }
                ),
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


SCENARIOS: list[Scenario] = [
    *_commands(),
    *_streaming(),
    *retry_scenarios(),
    *process_scenarios(),
    *scenarios_16(),
]
BY_NAME = {sc.name: sc for sc in SCENARIOS}
assert len(BY_NAME) == len(SCENARIOS), "scenario names must be unique"
