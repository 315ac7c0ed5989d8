"""The differential harness's scenarios of what pi 1.6.0 added to RPC.

The commands ``get_entries`` (with and without ``since``), ``get_tree``, ``clear_queue``,
``get_available_thinking_levels``; ``bash`` with ``excludeFromContext``; the thinking level
``max``; a prompt and an abort during a manual compaction; ``get_last_assistant_text`` after an
aborted, a failed and a tool-only reply; a manual compaction and an overflow in a session too
short to compact.
"""

from __future__ import annotations

from tests.interop.pi_steps import (
    DEFAULT,
    NO_PROVIDER_RETRY,
    PAUSED,
    VISION,
    Cmd,
    Mark,
    Mock,
    Quiet,
    Scenario,
    WaitEvent,
    cmd,
    error,
    prompt,
    settled_prompt,
    text,
    tool,
)

MAXED = {
    **VISION,
    "id": "mock-max",
    "name": "Mock Max",
    "thinkingLevelMap": {"minimal": None, "xhigh": "xhigh", "max": "max"},
    "promptCache": {"short": 300},
    "inputLimits": {"maxRequestBytes": 1000000},
}
"""A reasoning model that maps ``max`` (pi 1.6.0's models.json fields, issue 34)."""

THREADED = {
    "id": "mock-threads",
    "name": "Mock Threads",
    "input": ["text"],
    "contextWindow": 128000,
    "maxTokens": 16384,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "compat": {"supportsMessageThreads": True},
}
"""A model whose endpoint takes Anthropic message threads (``compat``; pi 1.6.0 turns them on
by default only on api.anthropic.com). Other APIs ignore the key."""

WARMED = {
    "id": "mock-warm",
    "name": "Mock Warm",
    "input": ["text"],
    "contextWindow": 128000,
    "maxTokens": 16384,
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 10000},
    "promptCache": {"short": 12},
}
"""A model whose prompt cache lives 12 s (a refresh every 2 s) and whose cache writes cost
$0.01 a token: warming the mock's 100-token prompt pays for itself even while idle."""

MARKERS = 'echo "AI_AGENT=$AI_AGENT PI_CODING_AGENT=$PI_CODING_AGENT"'

# pi 1.6.0 compacts nothing while the session is shorter than keepRecentTokens (20,000 by
# default: "Nothing to compact"); the scenarios that mean a compaction to happen keep little.
KEEP_LITTLE = {"compaction": {"keepRecentTokens": 1}}
DELTA = (("assistantMessageEvent.type", "text_delta"),)
# A summary that takes long enough for a command to land while the compaction runs.
SLOW_SUMMARY = text("SUMMARY", first_delay=1.5)


def scenarios_16() -> list[Scenario]:
    """The scenarios of pi 1.6.0's new commands and behaviours."""
    s: list[Scenario] = []
    add = s.append
    add(
        Scenario(
            # On the anthropic-messages vendor: the first request creates a thread, the second
            # continues it with only the new turn (the mock answers as the model asked for, or
            # the reply would be a fallback's, which is never continued).
            "anthropic_threads",
            [
                Mock({"model": "mock-threads", "default": text("ok")}),
                cmd("set_model", provider="mock", modelId="mock-threads"),
                *prompt("one"),
                *prompt("two"),
                cmd("get_messages"),
            ],
            extra_models=(THREADED,),
        )
    )
    add(
        Scenario(
            # cacheWarming (default idle): 2 s after the request the same request goes again
            # with a one-token cap, its usage recorded as a cache_warm usage entry and
            # announced; a model change then ends warming before the next refresh.
            "cache_warming",
            [
                Mock({"default": text("ok")}),
                cmd("set_model", provider="mock", modelId="mock-warm"),
                *prompt("one"),
                WaitEvent("entry_appended", where=(("entry.type", "usage"),), timeout=10.0),
                cmd("set_model", provider="mock", modelId="mock-vision"),
                cmd("get_entries"),
            ],
            extra_models=(WARMED,),
        )
    )
    add(
        Scenario(
            # The process markers pi's command line sets, seen by a user bash command and by
            # the model's bash tool (AI_AGENT=pi, PI_CODING_AGENT=true).
            "process_markers",
            [
                Mock({"queue": [tool("bash", {"command": MARKERS}), text("seen")]}),
                cmd("bash", command=MARKERS),
                *prompt("markers"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "get_entries",
            [
                Mock({"queue": [tool("read", {"path": "hello.txt"}), text("read it")]}),
                cmd("get_entries"),  # an empty session
                *prompt("one"),
                DEFAULT,
                *prompt("two"),
                cmd("get_entries"),
                Mark("middle", "get_entries"),
                Cmd({"type": "get_entries"}, use_mark="middle"),
                cmd("get_entries", since="nosuch00"),
            ],
        )
    )
    add(
        Scenario(
            "get_tree",
            [
                DEFAULT,
                cmd("get_tree"),  # an empty session
                *prompt("one"),
                *prompt("two"),
                cmd("set_session_name", name="a tree"),
                cmd("get_tree"),
            ],
        )
    )
    add(
        Scenario(
            "clear_queue",
            [
                Mock({"queue": [PAUSED, text("after")]}),
                cmd("clear_queue"),  # nothing queued
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=DELTA),
                cmd("steer", message="steer one"),
                cmd("follow_up", message="follow one"),
                cmd("prompt", message="follow two", streamingBehavior="followUp"),
                cmd("clear_queue"),
                WaitEvent("agent_settled"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "available_thinking_levels",
            [
                DEFAULT,
                cmd("get_available_thinking_levels"),  # a model without reasoning
                cmd("set_model", provider="mock", modelId="mock-vision"),
                cmd("get_available_thinking_levels"),
                cmd("set_thinking_level", level="max"),
                cmd("get_state"),
                cmd("cycle_thinking_level"),
                cmd("set_model", provider="mock", modelId="mock-model"),
                cmd("set_thinking_level", level="max"),
                cmd("get_state"),
            ],
            extra_models=(VISION,),
        )
    )
    add(
        Scenario(
            # A model whose thinkingLevelMap maps max (and xhigh, and leaves minimal out):
            # pi 1.6.0 offers max for it; set_thinking_level max keeps max (issue 34).
            "available_thinking_levels_max",
            [
                DEFAULT,
                cmd("set_model", provider="mock", modelId="mock-max"),
                cmd("get_available_thinking_levels"),
                cmd("set_thinking_level", level="max"),
                cmd("get_state"),
                cmd("cycle_thinking_level"),
                cmd("cycle_thinking_level"),
                cmd("get_available_models"),
            ],
            extra_models=(MAXED,),
        )
    )
    add(
        Scenario(
            "thinking_max",
            [
                DEFAULT,
                cmd("set_thinking_level", level="max"),
                cmd("get_state"),
                *prompt("think hard"),
                cmd("get_messages"),
            ],
            settings={"defaultModel": "mock-vision"},
            extra_models=(VISION,),
        )
    )
    add(
        Scenario(
            "bash_exclude_from_context",
            [
                DEFAULT,
                cmd("bash", command="echo kept"),
                cmd("bash", command="echo hidden", excludeFromContext=True),
                cmd("get_messages"),
                *prompt("what ran?"),
                cmd("get_messages"),
            ],
        )
    )
    add(
        Scenario(
            "prompt_during_manual_compaction",
            [
                DEFAULT,
                *prompt("one"),
                *prompt("two"),
                Mock({"queue": [SLOW_SUMMARY]}),
                Cmd({"type": "compact"}, wait=False),
                WaitEvent("compaction_start"),
                cmd("prompt", message="during"),
                cmd("steer", message="steer during"),
                WaitEvent("compaction_end"),
                Quiet(0.3),
                cmd("get_messages"),
            ],
            settings=KEEP_LITTLE,
        )
    )
    add(
        Scenario(
            "abort_manual_compaction",
            [
                DEFAULT,
                *prompt("one"),
                *prompt("two"),
                Mock({"queue": [SLOW_SUMMARY]}),
                Cmd({"type": "compact"}, wait=False),
                WaitEvent("compaction_start"),
                cmd("abort"),
                WaitEvent("compaction_end"),
                Quiet(0.3),
                cmd("get_state"),
                cmd("get_messages"),
            ],
            settings=KEEP_LITTLE,
        )
    )
    add(
        Scenario(
            "last_assistant_text_skips",
            [
                DEFAULT,
                *prompt("one"),
                cmd("get_last_assistant_text"),
                # An aborted reply (one delta, then a pause the abort falls into).
                Mock({"default": text("a b", deltas=2, delay=3.0)}),
                Cmd({"type": "prompt", "message": "long"}),
                WaitEvent("message_update", where=DELTA),
                cmd("abort"),
                cmd("get_last_assistant_text"),
                # A failed reply.
                Mock({"default": error("bad_request")}),
                *prompt("fails"),
                cmd("get_last_assistant_text"),
                # A reply that only calls a tool, aborted while the tool runs (no text).
                Mock({"default": text("ok"), "queue": [tool("bash", {"command": "sleep 3"})]}),
                Cmd({"type": "prompt", "message": "tool"}),
                WaitEvent("tool_execution_start"),
                cmd("abort"),
                cmd("get_last_assistant_text"),
                *prompt("last"),
                cmd("get_last_assistant_text"),
            ],
            settings=NO_PROVIDER_RETRY,
        )
    )
    add(
        Scenario(
            # A manual compaction of a session shorter than keepRecentTokens (the default).
            "compact_too_small",
            [DEFAULT, *prompt("one"), cmd("compact"), cmd("get_messages")],
        )
    )
    add(
        Scenario(
            # The overflow of a session too short to compact: pi 1.6.0 omits the failed
            # attempt (a context_edit) and compacts nothing.
            "overflow_too_small",
            [
                DEFAULT,
                *settled_prompt("one"),
                Mock({"queue": [error("context_length")]}),
                Cmd({"type": "prompt", "message": "two"}),
                WaitEvent("agent_settled"),
                Quiet(0.3),
                cmd("get_messages"),
            ],
            settings=NO_PROVIDER_RETRY,
        )
    )
    return s
