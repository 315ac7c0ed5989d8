"""Compaction policy: estimates, threshold, cut point, preparation, summary requests, the
automatic decision (spec §3.8, S40-S75), validated against pi's recorded compactions."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from pitrio.actors.model_router import FAUX_MODELS
from pitrio.actors.model_router.providers.faux_rules import summary_kind
from pitrio.actors.supervisor._entries import path_to, project_path
from pitrio.actors.supervisor.compaction import (
    ALREADY_COMPACTED,
    NO_PRIOR_HISTORY,
    NOTHING_TO_COMPACT,
    OVERFLOW_RECOVERY_FAILED,
    TRUNCATION_RECOVERY_FAILED,
    CompactionCheck,
    CompactionSettings,
    CompactNow,
    NoCompaction,
    OverflowRecoveryFailed,
    auto_compaction_decision,
    build_summary_request,
    build_turn_prefix_request,
    calculate_context_tokens,
    compaction_failure_message,
    context_usage,
    estimate_context_tokens,
    estimate_projected_context_tokens,
    estimate_tokens,
    find_cut_point,
    finish_compaction,
    is_same_model,
    last_assistant_usage,
    latest_compaction_ms,
    manual_compaction_refusal,
    plan_summary,
    prepare_compaction,
    response_text,
    serialize_conversation,
    serialize_messages,
    should_compact,
    threshold_between_turns,
)
from pitrio.actors.supervisor.file_ops import FileOperations, format_file_lists
from pitrio.errors import SummarizationError
from pitrio.messages.agent import (
    AgentMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from pitrio.messages.codec import from_json, to_json
from pitrio.messages.content import ImageContent, TextContent, ThinkingContent
from pitrio.messages.entries import (
    CompactionEntry,
    MessageEntry,
    SessionEntry,
    ThinkingLevelChangeEntry,
)
from tests.actors.test_supervisor_support import (
    TS,
    Chain,
    assistant,
    bash,
    call,
    failed,
    fixture_entries,
    scripted_reply,
    tool_result,
    transcript_events,
    usage,
    user,
)

THINK = next(m for m in FAUX_MODELS if m.id == "faux-think")
PLAIN = next(m for m in FAUX_MODELS if m.id == "faux-1")
SETTINGS = CompactionSettings()


# --- settings --------------------------------------------------------------------------------


def test_settings_defaults_and_json() -> None:
    expected = CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=20000)
    assert expected == SETTINGS
    parsed = CompactionSettings.from_json(
        {"enabled": False, "reserveTokens": 16800, "keepRecentTokens": 60}
    )
    assert parsed == CompactionSettings(enabled=False, reserve_tokens=16800, keep_recent_tokens=60)
    assert CompactionSettings.from_json({"keepRecentTokens": "60"}) == SETTINGS


# --- token estimation (§3.8.2, S51-S55) ------------------------------------------------------


def test_s51_s52_context_tokens() -> None:
    assert calculate_context_tokens(usage(1000, 500, 200, 100)) == 1800
    assert calculate_context_tokens(usage(1000, 500, 200, 100, total=1800)) == 1800
    assert calculate_context_tokens(usage(1, 1, 1, 1, total=7)) == 7  # totalTokens wins
    assert calculate_context_tokens(usage()) == 0


def test_s53_s54_s55_last_assistant_usage() -> None:
    chain = Chain().msg(user("a")).msg(assistant(use=usage(input=100)))
    chain.msg(user("b")).msg(assistant(use=usage(input=200)))
    assert last_assistant_usage(chain.entries) == usage(input=200)
    chain.msg(assistant(None, stop="aborted", use=usage(input=999)))
    chain.msg(failed("boom", use=usage(input=998)))
    assert last_assistant_usage(chain.entries[:2]) == usage(input=100)
    assert last_assistant_usage(chain.entries) == usage(input=200)
    assert last_assistant_usage(Chain().msg(user("x")).entries) is None


def test_estimate_per_message_kind() -> None:
    assert estimate_tokens(user("12345")) == 2
    assert estimate_tokens(user("1234", images=3)) == 1  # user images are not counted
    assert estimate_tokens(UserMessage(content="abcdefgh", timestamp=0)) == 2
    # thinking 4 + text 4 + "read" 4 + '{"path":"a"}' 12 = 24 chars
    message = assistant("abcd", thinking="efgh", calls=(call("read", path="a"),))
    assert estimate_tokens(message) == 6
    result = ToolResultMessage(
        tool_call_id="c",
        tool_name="read",
        content=(TextContent(text="abcd"), ImageContent(data="x", mime_type="image/png")),
        is_error=False,
        timestamp=0,
    )
    assert estimate_tokens(result) == (4 + 4800) // 4
    custom = CustomMessage(custom_type="t", content="abcdefghi", display=True, timestamp=0)
    assert estimate_tokens(custom) == 3
    assert estimate_tokens(bash("ls", "a\nb")) == 2
    assert estimate_tokens(BranchSummaryMessage(summary="x" * 9, from_id="r", timestamp=0)) == 3
    summary = CompactionSummaryMessage(summary="x" * 8, tokens_before=1, timestamp=0)
    assert estimate_tokens(summary) == 2


def test_estimate_counts_utf16_units() -> None:
    assert estimate_tokens(user("😀😀")) == 1  # 4 UTF-16 units
    assert estimate_tokens(user("ééééé")) == 2


def test_estimate_context_tokens_anchors_on_last_usage() -> None:
    messages: list[AgentMessage] = [
        user("x" * 40),
        assistant("y", use=usage(total=500)),
        user("z" * 40),
        failed("boom", use=usage(total=9999)),
    ]
    estimate = estimate_context_tokens(messages)
    assert (estimate.tokens, estimate.usage_tokens, estimate.trailing_tokens) == (510, 500, 10)
    assert estimate.last_usage_index == 1
    none = estimate_context_tokens([user("x" * 40), failed("e")])
    assert (none.tokens, none.last_usage_index) == (10, None)


# --- threshold (S56, S57, DESIGN §5.2) -------------------------------------------------------


def test_s56_threshold() -> None:
    settings = CompactionSettings(reserve_tokens=10000)
    assert should_compact(95000, 100000, settings)
    assert not should_compact(89000, 100000, settings)
    assert not should_compact(90000, 100000, settings)  # strictly greater


def test_s57_disabled_never_compacts() -> None:
    assert not should_compact(95000, 100000, CompactionSettings(enabled=False))


@pytest.mark.parametrize("window", [0, -1])
def test_unknown_window_never_triggers(window: int) -> None:
    assert not should_compact(10**9, window, SETTINGS)


# --- cut point (§3.8.4, S58-S61, DESIGN §5.3) ------------------------------------------------


def test_s58_cut_lands_on_a_user_or_assistant_message() -> None:
    chain = Chain()
    for i in range(10):
        chain.msg(user("u" * 4000)).msg(assistant("a" * 4000, use=usage(total=1000 * (i + 1))))
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 2500)
    kept = chain.entries[cut.first_kept_entry_index]
    assert isinstance(kept, MessageEntry)
    assert kept.message.role in ("user", "assistant")
    assert 0 < cut.first_kept_entry_index < len(chain.entries)


def test_s59_no_valid_cut_point_returns_start() -> None:
    chain = Chain().model_change().msg(tool_result("r")).custom()
    cut = find_cut_point(chain.entries, 1, 3, 10)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (1, -1, False)


def test_s60_everything_fits() -> None:
    chain = Chain()
    for _ in range(5):
        chain.msg(user("hello")).msg(assistant("hi"))
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 50000)
    assert (cut.first_kept_entry_index, cut.is_split_turn) == (0, False)


def test_s61_split_turn() -> None:
    chain = Chain().msg(user("start"))
    chain.msg(assistant("ok")).msg(user("big task"))  # e1, e2 = turn start
    for i in range(6):
        chain.msg(assistant("a" * 4000, calls=(call("read", f"c{i}", path=f"f{i}"),)))
        chain.msg(tool_result("r" * 4000, f"c{i}"))
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 3000)
    kept = chain.entries[cut.first_kept_entry_index]
    assert isinstance(kept, MessageEntry) and kept.message.role == "assistant"
    assert cut.is_split_turn
    assert cut.turn_start_index == 2


def test_cut_keeps_non_message_entries_right_before_it() -> None:
    chain = Chain().msg(user("old")).msg(assistant("old"))  # e0 e1
    chain.model_change().label("e0").custom()  # e2 e3 e4
    chain.msg(user("x" * 400)).msg(assistant("y"))  # e5 e6
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 50)
    assert cut.first_kept_entry_index == 2
    # pi's quirk, kept for fidelity: the kept part starts with a settings entry, not a user
    # message, so the turn before it counts as the prefix of a "split" turn.
    assert (cut.is_split_turn, cut.turn_start_index) == (True, 0)


def test_cut_does_not_reach_back_over_a_compaction() -> None:
    chain = Chain().msg(user("old")).msg(assistant("old"))  # e0 e1
    chain.compaction("e0").custom()  # e2 e3
    chain.msg(user("x" * 400))  # e4
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 50)
    assert cut.first_kept_entry_index == 3


def test_custom_messages_and_branch_summaries_count_toward_kept_tokens() -> None:
    # DESIGN §5.3: both reach the model, so both count. pi counts them as 0 and would keep
    # everything here (its walk never reaches 50 tokens).
    chain = Chain().msg(user("q")).msg(assistant("a"))  # e0 e1
    chain.custom_message("c" * 400)  # e2: 100 tokens
    chain.msg(user("q")).msg(assistant("a"))  # e3 e4
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 50)
    assert cut.first_kept_entry_index == 2
    chain = Chain().msg(user("q")).msg(assistant("a")).branch_summary("s" * 400)
    chain.msg(user("q"))
    cut = find_cut_point(chain.entries, 0, len(chain.entries), 50)
    assert cut.first_kept_entry_index == 2


def test_entries_that_do_not_reach_the_model_do_not_count() -> None:
    chain = Chain().msg(user("q")).msg(assistant("a"))  # e0 e1
    chain.msg(bash("cat big", "x" * 4000, excluded=True))  # e2 (!! command)
    chain.msg(user("q"))  # e3
    assert find_cut_point(chain.entries, 0, 4, 50).first_kept_entry_index == 0
    chain = Chain().msg(user("q")).msg(failed("x", use=usage()))  # e0 e1
    chain.msg(user("big" * 400)).msg(assistant("a")).edit("e2", None)  # e2 e3 e4: e2 omitted
    assert find_cut_point(chain.entries, 0, 5, 50).first_kept_entry_index == 0
    chain = Chain().msg(user("q")).msg(assistant("a")).msg(user("short")).edit("e2", "w" * 400)
    assert find_cut_point(chain.entries, 0, 4, 50).first_kept_entry_index == 2


def test_bash_and_custom_message_start_turns() -> None:
    chain = Chain().msg(user("q")).msg(assistant("a")).msg(bash("ls", "x"))  # e0 e1 e2
    chain.msg(assistant("b" * 400))  # e3
    cut = find_cut_point(chain.entries, 0, 4, 50)
    assert (cut.first_kept_entry_index, cut.turn_start_index, cut.is_split_turn) == (3, 2, True)


# --- preparation (§3.8.5) --------------------------------------------------------------------


def test_prepare_refuses_when_already_compacted_or_empty() -> None:
    chain = Chain().msg(user("q")).msg(assistant("a")).compaction("e0")
    assert prepare_compaction(chain.entries, SETTINGS) is None
    assert manual_compaction_refusal(chain.entries) == ALREADY_COMPACTED
    assert prepare_compaction([], SETTINGS) is None
    assert manual_compaction_refusal([]) == NOTHING_TO_COMPACT


def test_prepare_session_without_messages() -> None:
    # pi 1.6.0 refuses `compact` before any message: "Nothing to compact (session too small)"
    # (0.73.1 kept the first entry and summarized nothing).
    chain = Chain().model_change()
    level = ThinkingLevelChangeEntry(id="t", parent_id="e0", timestamp=TS, thinking_level="off")
    chain.add(level)
    assert prepare_compaction(chain.entries, SETTINGS) is None
    assert manual_compaction_refusal(chain.entries) == NOTHING_TO_COMPACT


def test_prepare_a_session_that_fits_the_kept_budget_is_nothing_to_compact() -> None:
    # pi 1.6.0: when every message is kept, nothing is summarized, so nothing is compacted.
    chain = Chain().model_change().msg(user("one")).msg(assistant("ok"))
    assert prepare_compaction(chain.entries, SETTINGS) is None
    assert manual_compaction_refusal(chain.entries) == NOTHING_TO_COMPACT
    # One message more than the budget keeps: the first turn is summarized.
    chain.msg(user("x" * 400)).msg(assistant("two"))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    assert prep.first_kept_entry_id == "e3"
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]


def test_prepare_leaves_system_messages_out_of_the_summary() -> None:
    # pi 1.6.0: a system message is prompt state, never summarized; a session of one system
    # message and a kept turn is nothing to compact.
    system = SystemMessage(content="", sections={"preamble": "P"}, timestamp=1)
    chain = Chain().msg(system).msg(user("one")).msg(assistant("ok"))
    assert prepare_compaction(chain.entries, SETTINGS) is None
    chain.msg(user("x" * 400)).msg(assistant("two"))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]


def test_prepare_resummarizes_previous_kept_entries() -> None:
    chain = Chain().msg(user("one")).msg(assistant("one"))  # e0 e1
    chain.msg(user("two")).msg(assistant("two"))  # e2 e3
    chain.compaction("e2", "PREV", details={"readFiles": ["a"], "modifiedFiles": ["b"]})  # e4
    chain.msg(user("x" * 400)).msg(assistant("three", calls=(call("read", path="c"),)))  # e5 e6
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    assert prep.first_kept_entry_id == "e5"
    assert prep.previous_summary == "PREV"
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]  # e2, e3
    assert prep.file_ops == FileOperations(read=frozenset({"a"}), edited=frozenset({"b"}))
    assert prep.file_ops.file_lists() == (("a",), ("b",))


def test_prepare_ignores_file_lists_supplied_by_an_extension() -> None:
    chain = Chain().msg(user("one")).msg(assistant("one"))
    chain.compaction("e0", details={"readFiles": ["ext"]}, from_hook=True)
    chain.msg(user("two"))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=1))
    assert prep is not None and prep.file_ops == FileOperations()


def test_prepare_unknown_previous_first_kept_starts_after_the_compaction() -> None:
    chain = Chain().msg(user("one")).msg(assistant("one")).compaction("gone")  # e0 e1 e2
    chain.msg(user("u" * 400)).msg(assistant("a" * 400))  # e3 e4
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    assert prep.first_kept_entry_id == "e4"
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]
    assert prep.messages_to_summarize == ()


def test_prepare_skips_omitted_messages_and_uses_the_given_context() -> None:
    chain = Chain().msg(user("one")).msg(failed("503")).edit("e1", None)  # e0 e1 e2
    chain.msg(assistant("x" * 400)).msg(user("q" * 400))  # e3 e4
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]  # e0, e3
    given = prepare_compaction(
        chain.entries, CompactionSettings(keep_recent_tokens=50), context_messages=[user("abcd")]
    )
    assert given is not None and given.tokens_before == 1


def test_tokens_before_after_an_omitted_overflow_is_estimated_whole_as_pi_1_6() -> None:
    # pi 1.6.0's overflow compaction: the overflowing reply is omitted by a context edit, so
    # the last measured usage no longer describes the context and tokensBefore estimates
    # every message, the system message (replayed once, patches merged) included.
    system = SystemMessage(content="", sections={"preamble": "p" * 400}, timestamp=1)
    patch = SystemMessage(content="", sections={"preamble": "q" * 40}, timestamp=2)
    chain = Chain().msg(system).msg(user("one")).msg(assistant("ok", use=usage(total=900)))
    chain.msg(patch).msg(user("u" * 400))  # e3 e4
    chain.msg(failed("context_length_exceeded", use=usage(total=700))).edit("e5", None)
    settings = CompactionSettings(keep_recent_tokens=50)
    prep = prepare_compaction(chain.entries, settings)
    assert prep is not None
    # The replayed prompt counts once with the patch's section (40 chars), not 400 + 40.
    whole = 10 + 1 + 1 + 100
    assert prep.tokens_before == whole
    messages = project_path(chain.entries)
    assert estimate_projected_context_tokens(chain.entries, messages) == whole
    # Without the edit the usage of the last measured reply anchors the estimate.
    unedited = Chain().msg(system).msg(user("one")).msg(assistant("ok", use=usage(total=900)))
    unedited.msg(user("u" * 400))
    prep = prepare_compaction(unedited.entries, settings)
    assert prep is not None and prep.tokens_before == 900 + 100


def test_a_kept_aborted_reply_is_cut_as_a_split_turn_as_pi_1_6() -> None:
    # pi 1.6.0's compact during a stream: the run is aborted first and its partial reply kept,
    # so the branch ends with it. With a budget it alone fills, the cut lands on it (the
    # harness's compact_while_streaming): its prompt is the split turn's prefix, the turns
    # before are the history, and the aborted reply's usage anchors nothing.
    chain = Chain().msg(user("one")).msg(assistant("ok", use=usage(total=110)))  # e0 e1
    chain.msg(user("long")).msg(assistant("a ", stop="aborted", use=usage(total=50)))  # e2 e3
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=1))
    assert prep is not None
    assert (prep.first_kept_entry_id, prep.is_split_turn) == ("e3", True)
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]
    assert prep.tokens_before == 110 + 1 + 1  # "long" and "a " estimated after the usage


def test_latest_compaction_ms() -> None:
    chain = Chain().msg(user("q")).compaction("e0", ts="2026-11-29T18:54:30.624Z")
    assert latest_compaction_ms(chain.entries) == 1795978470624
    assert latest_compaction_ms(chain.entries[:1]) is None


# --- projection used for tokensBefore (S62-S65) ----------------------------------------------


def _pairs(chain: Chain, *names: str) -> Chain:
    for name in names:
        chain.msg(user(name)).msg(assistant(name))
    return chain


def test_s62_s63_s64_s65_projection() -> None:
    plain = _pairs(Chain(), "1", "2")
    assert len(project_path(plain.entries)) == 4
    one = _pairs(Chain(), "1", "2").compaction("e2", "SUM")
    _pairs(one, "3")
    messages = project_path(one.entries)
    assert len(messages) == 5
    assert isinstance(messages[0], CompactionSummaryMessage) and messages[0].summary == "SUM"
    two = _pairs(Chain(), "1", "2").compaction("e2", "FIRST")
    _pairs(two, "3").compaction("e5", "SECOND")
    _pairs(two, "4")
    messages = project_path(two.entries)
    assert len(messages) == 5
    assert isinstance(messages[0], CompactionSummaryMessage) and messages[0].summary == "SECOND"
    whole = _pairs(Chain(), "1", "2").compaction("e0")
    assert len(project_path(whole.entries)) == 5


# --- serialisation (S72-S74) -----------------------------------------------------------------


def test_s72_long_tool_result_is_truncated() -> None:
    text = "x" * 5000
    out = serialize_conversation([tool_result(text)])  # type: ignore[list-item]
    assert out.startswith("[Tool result]: " + "x" * 2000)
    assert out.endswith("\n\n[... 3000 more characters truncated]")
    assert out == "[Tool result]: " + "x" * 2000 + "\n\n[... 3000 more characters truncated]"


def test_s73_short_tool_result_is_kept() -> None:
    text = "y" * 1500
    assert serialize_conversation([tool_result(text)]) == "[Tool result]: " + text  # type: ignore[list-item]


def test_s74_user_and_assistant_text_is_never_truncated() -> None:
    text = "z" * 5000
    out = serialize_conversation([user(text), assistant(text)])
    assert out == f"[User]: {text}\n\n[Assistant]: {text}"


def test_serialisation_format() -> None:
    message = assistant(
        "first",
        thinking="hmm",
        calls=(
            call("read", "c1", path="a.txt", offset=1.0),
            call("edit", "c2", path="é.py", edits=[{"old": "x", "new": 'y"'}]),
        ),
    )
    out = serialize_conversation(
        [
            UserMessage(content="plain", timestamp=0),
            UserMessage(content=(TextContent(text="a"), TextContent(text="b")), timestamp=0),
            UserMessage(content="", timestamp=0),
            message,
            assistant(None),
            tool_result(""),  # type: ignore[list-item]
        ]
    )
    assert out == (
        "[User]: plain\n\n[User]: ab\n\n[Assistant thinking]: hmm\n\n[Assistant]: first\n\n"
        '[Assistant tool calls]: read(path="a.txt", offset=1); '
        'edit(path="é.py", edits=[{"old":"x","new":"y\\""}])'
    )


def test_serialise_agent_messages_as_the_model_sees_them() -> None:
    out = serialize_messages(
        [
            CustomMessage(custom_type="t", content="note", display=False, timestamp=0),
            bash("ls", "", excluded=True),
            BranchSummaryMessage(summary="B", from_id="x", timestamp=0),
        ]
    )
    assert out.startswith("[User]: note\n\n[User]: The following is a summary of a branch")


# --- summary requests (§3.8.6) ---------------------------------------------------------------

COMPACTION_HEADINGS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
)


def _in_order(text: str, headings: tuple[str, ...]) -> bool:
    positions = [text.find(f"\n{h}\n") for h in headings]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


def _prep(previous: str | None = None, split: bool = False) -> Any:
    chain = Chain().msg(user("first question")).msg(assistant("first answer"))
    if previous is not None:
        chain.compaction("e0", previous)
    chain.msg(user("do it"))
    if split:
        chain.msg(assistant("step", calls=(call("write", path="out.txt", content="x"),)))
        chain.msg(tool_result("done", name="write"))
    chain.msg(assistant("a" * 400))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None
    return prep


def test_initial_request() -> None:
    prep = _prep()
    request = build_summary_request(prep)
    assert request.kind == "initial"
    assert request.system_prompt.startswith("You are a context summarization assistant")
    assert request.prompt.startswith(
        "<conversation>\n[User]: first question\n\n[Assistant]: first answer\n</conversation>\n\n"
    )
    assert "<previous-summary>" not in request.prompt
    assert _in_order(request.prompt, COMPACTION_HEADINGS)
    assert request.max_tokens is None  # the model's default (pi 1.6.0; 0.73.1: 80 % of the reserve)
    assert summary_kind(request.prompt) == "Compaction summary"


def test_update_request_carries_the_previous_summary() -> None:
    prep = _prep(previous="## Goal\nold")
    request = build_summary_request(prep, "Keep the colour.")
    assert request.kind == "update"
    assert "</conversation>\n\n<previous-summary>\n## Goal\nold\n</previous-summary>\n\n" in (
        request.prompt
    )
    assert _in_order(request.prompt.split("</previous-summary>")[1], COMPACTION_HEADINGS)
    assert request.prompt.endswith("\n\nAdditional focus: Keep the colour.")
    assert summary_kind(request.prompt) == "Updated compaction summary"


def test_turn_prefix_request() -> None:
    prep = _prep(split=True)
    assert prep.is_split_turn
    request = build_turn_prefix_request(prep)
    assert request.kind == "turn_prefix"
    assert request.max_tokens is None  # the model's default (pi 1.6.0; 0.73.1: half the reserve)
    assert _in_order(
        request.prompt, ("## Original Request", "## Early Progress", "## Context for Suffix")
    )
    assert "## Critical Context" not in request.prompt
    assert summary_kind(request.prompt) == "Turn-prefix summary"


def test_split_turn_plan_and_result() -> None:
    prep = _prep(split=True)
    plan = plan_summary(prep, "focus")
    assert plan.history is not None and plan.turn_prefix is not None
    assert plan.history.prompt.endswith("Additional focus: focus")
    assert "Additional focus" not in plan.turn_prefix.prompt
    result = finish_compaction(prep, plan, "HISTORY", "PREFIX")
    assert result.summary == (
        "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
        "\n\n<modified-files>\nout.txt\n</modified-files>"
    )
    assert result.details == {"readFiles": [], "modifiedFiles": ["out.txt"]}
    assert result.first_kept_entry_id == prep.first_kept_entry_id


def test_split_turn_with_no_history_uses_the_literal() -> None:
    chain = Chain().msg(user("task")).msg(assistant("a" * 400))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None and prep.is_split_turn and not prep.messages_to_summarize
    plan = plan_summary(prep)
    assert plan.history is None and plan.turn_prefix is not None
    result = finish_compaction(prep, plan, None, "P")
    assert result.summary.startswith(NO_PRIOR_HISTORY + "\n\n---\n\n")


def test_prepare_leaves_system_messages_out_of_the_summaries() -> None:
    # pi 1.6.0: a system message is prompt state, not conversation (the compaction entry
    # carries it as its checkpoint): it is summarized in neither part.
    system = SystemMessage(content="", sections={"preamble": "p" * 400}, timestamp=1)
    chain = Chain().model_change().msg(system).msg(user("task")).msg(assistant("a" * 400))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None and prep.is_split_turn
    assert prep.messages_to_summarize == ()  # the system message alone is no history
    assert [m.role for m in prep.turn_prefix_messages] == ["user"]
    assert plan_summary(prep).history is None  # "No prior history.", no history request
    chain.msg(user("x" * 400)).msg(assistant("two"))
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=50))
    assert prep is not None and not prep.is_split_turn
    assert [m.role for m in prep.messages_to_summarize] == ["user", "assistant"]


def test_response_text() -> None:
    reply = attrs.evolve(
        assistant("a", thinking="t", calls=(call("x"),)),
        content=(TextContent(text="a"), ThinkingContent(thinking="t"), TextContent(text="b")),
    )
    assert response_text(reply) == "a\nb"
    with pytest.raises(SummarizationError, match=r"^Summarization failed: 503 busy$") as info:
        response_text(failed("503 busy"))
    assert info.value.retryable
    with pytest.raises(SummarizationError, match=r"^Turn prefix summarization failed: Unknown"):
        response_text(assistant(None, stop="error"), failure="Turn prefix summarization failed")


def test_s75_s76_reasoning_follows_the_session_level() -> None:
    # [0.73 Δ] pi 0.73.1 passes the session's thinking level (0.58 always asked for "high").
    request = build_summary_request(_prep())
    options = request.stream_options(THINK, "high", api_key="k")
    assert (options.reasoning, options.max_tokens, options.api_key) == ("high", None, "k")
    assert request.stream_options(THINK, "off").reasoning is None
    assert request.stream_options(PLAIN, "high", api_key="k").reasoning is None
    assert request.stream_options(PLAIN, "high", api_key="k").api_key == "k"


def test_summary_calls_write_no_prompt_cache_and_route_by_their_own_id() -> None:
    # pi 1.6.0's completeSummarization: cacheRetention "none", and a routing id that is not
    # the session's (the caller's, here "r-1").
    options = build_summary_request(_prep()).stream_options(THINK, "high", session_id="r-1")
    assert (options.cache_retention, options.session_id) == ("none", "r-1")


def test_uuid7_is_a_version_7_uuid_that_grows_with_time() -> None:
    import uuid as uuidlib

    from pitrio.actors.supervisor.actor.compactor import uuid7

    first = uuidlib.UUID(uuid7())
    assert (first.version, first.variant) == (7, uuidlib.RFC_4122)
    ids = {uuid7() for _ in range(50)}
    assert len(ids) == 50  # the random bits differ within one millisecond
    # The first 48 bits are Unix milliseconds: now, give or take the test's run time.
    import time

    millis = first.int >> 80
    assert abs(millis - time.time_ns() // 1_000_000) < 60_000


def test_request_context() -> None:
    context = build_summary_request(_prep()).context(123)
    assert context.tools == ()
    (message,) = context.messages
    assert isinstance(message, UserMessage) and message.timestamp == 123


def test_failure_messages() -> None:
    assert compaction_failure_message("overflow", "x") == "Context overflow recovery failed: x"
    assert compaction_failure_message("threshold", "x") == "Auto-compaction failed: x"
    assert compaction_failure_message("manual", "x") == "Compaction failed: x"


# --- file operations (§3.8.7) ----------------------------------------------------------------


def test_file_operations() -> None:
    ops = FileOperations().with_messages(
        [
            assistant(
                "x",
                calls=(
                    call("read", path="b.txt"),
                    call("read", path="a.txt"),
                    call("read", path="w.txt"),
                    call("write", path="w.txt"),
                    call("edit", path="e.txt"),
                    call("bash", path="ignored"),
                    call("read", path=3),
                ),
            ),
            user("read path=x"),
        ]
    )
    assert ops.file_lists() == (("a.txt", "b.txt"), ("e.txt", "w.txt"))
    ops = ops.with_details({"readFiles": ["r"], "modifiedFiles": ["m", 5]})
    assert ops.details() == {
        "readFiles": ["a.txt", "b.txt", "r"],
        "modifiedFiles": ["e.txt", "m", "w.txt"],
    }
    assert format_file_lists([], []) == ""
    assert format_file_lists(["a"], []) == "\n\n<read-files>\na\n</read-files>"
    assert format_file_lists([], ["m", "n"]) == "\n\n<modified-files>\nm\nn\n</modified-files>"


# --- the automatic decision (§3.8.9, S41-S45) ------------------------------------------------

OVERFLOW = "prompt is too long: 250000 tokens > 128000 maximum"


def _check(message: Any, **kwargs: Any) -> CompactionCheck:
    defaults: dict[str, Any] = {"context_window": 200_000, "same_model": True, "settings": SETTINGS}
    return CompactionCheck(message=message, **{**defaults, **kwargs})


def test_s41_overflow_recovery_once() -> None:
    message = failed(OVERFLOW)
    first = auto_compaction_decision(_check(message))
    assert first == CompactNow(reason="overflow", will_retry=True, failed=message)
    second = auto_compaction_decision(_check(message, overflow_recovery_attempted=True))
    assert isinstance(second, OverflowRecoveryFailed)
    assert to_json(second.event) == {
        "type": "compaction_end",
        "reason": "overflow",
        "aborted": False,
        "willRetry": False,
        "errorMessage": OVERFLOW_RECOVERY_FAILED,
    }


def test_s42_usage_older_than_the_latest_compaction_is_ignored() -> None:
    old = assistant("x", ts=1000, use=usage(total=10**6))
    check = _check(old, latest_compaction_ms=1000, skip_aborted=False)
    assert auto_compaction_decision(check) == NoCompaction()


def test_s43_error_uses_the_last_successful_usage() -> None:
    ok = assistant("x", ts=1000, use=usage(total=190_000))
    error = failed("529 overloaded", ts=2000)
    check = _check(error, context_messages=[user("q"), ok, error])
    assert auto_compaction_decision(check) == CompactNow(
        reason="threshold", will_retry=False, tokens=190_000
    )


def test_s44_error_without_any_usage() -> None:
    error = failed("529 overloaded")
    assert auto_compaction_decision(_check(error, context_messages=[user("q"), error])) == (
        NoCompaction()
    )


def test_s45_only_usage_predates_the_compaction() -> None:
    kept = assistant("x", ts=1000, use=usage(total=190_000))
    error = failed("529 overloaded", ts=3000)
    summary = CompactionSummaryMessage(summary="s", tokens_before=1, timestamp=2000)
    check = _check(error, context_messages=[summary, kept, error], latest_compaction_ms=2000)
    assert auto_compaction_decision(check) == NoCompaction()


def test_threshold_from_the_response_usage() -> None:
    below = assistant("x", use=usage(total=183_616))
    above = assistant("x", use=usage(total=183_617))
    assert auto_compaction_decision(_check(below)) == NoCompaction()
    assert auto_compaction_decision(_check(above)) == CompactNow(
        reason="threshold", will_retry=False, tokens=183_617
    )
    assert auto_compaction_decision(_check(above, context_window=0)) == NoCompaction()


def test_disabled_or_aborted_or_stale() -> None:
    assert (
        auto_compaction_decision(
            _check(failed(OVERFLOW), settings=CompactionSettings(enabled=False))
        )
        == NoCompaction()
    )
    aborted = assistant(None, stop="aborted", use=usage(total=10**6))
    assert auto_compaction_decision(_check(aborted)) == NoCompaction()
    assert isinstance(auto_compaction_decision(_check(aborted, skip_aborted=False)), CompactNow)
    stale = failed(OVERFLOW, ts=10)
    assert auto_compaction_decision(_check(stale, latest_compaction_ms=10)) == NoCompaction()


def test_overflow_from_another_model_is_not_recovered() -> None:
    message = failed(OVERFLOW, provider="other")
    assert not is_same_model(message, PLAIN)
    assert is_same_model(failed(OVERFLOW), PLAIN)
    assert not is_same_model(failed(OVERFLOW), None)
    assert auto_compaction_decision(_check(message, same_model=False)) == NoCompaction()


def test_silent_overflow_compacts_without_retry() -> None:
    message = assistant("x", use=usage(input=210_000, total=210_100))
    decision = auto_compaction_decision(_check(message))
    assert decision == CompactNow(reason="overflow", will_retry=False)
    # Not limited by the recovery latch: nothing is retried.
    assert auto_compaction_decision(_check(message, overflow_recovery_attempted=True)) == decision


def test_length_truncation_recovery() -> None:
    # Input truncated to fill the window (no output) is a context overflow in pi 1.6.0
    # (isContextOverflow case 3): its failed recovery gives the overflow text.
    message = assistant(None, stop="length", use=usage(input=199_000))
    assert auto_compaction_decision(_check(message)) == CompactNow(
        reason="overflow", will_retry=True, failed=message
    )
    again = auto_compaction_decision(_check(message, overflow_recovery_attempted=True))
    assert isinstance(again, OverflowRecoveryFailed)
    assert again.event.error_message == OVERFLOW_RECOVERY_FAILED
    # A length stop below the model's output limit is the truncation (isRecoverableLength).
    short = assistant("x", stop="length", use=usage(input=10, output=5, total=15))
    assert auto_compaction_decision(_check(short)) == NoCompaction()
    assert auto_compaction_decision(_check(short, max_tokens=8)) == CompactNow(
        reason="overflow", will_retry=True, failed=short
    )
    again = auto_compaction_decision(_check(short, max_tokens=8, overflow_recovery_attempted=True))
    assert isinstance(again, OverflowRecoveryFailed)
    assert again.event.error_message == TRUNCATION_RECOVERY_FAILED


def test_threshold_between_turns() -> None:
    messages: list[AgentMessage] = [
        user("q"),
        assistant("x", ts=5000, use=usage(total=190_000)),
        user("y" * 400),
    ]
    assert threshold_between_turns(messages, 200_000, SETTINGS) == 190_100
    assert threshold_between_turns(messages, 300_000, SETTINGS) is None
    assert threshold_between_turns(messages, 200_000, SETTINGS, latest_compaction=5000) is None
    assert threshold_between_turns([user("q")], 10, SETTINGS) is None


def test_context_usage() -> None:
    chain = Chain().msg(user("q")).msg(assistant("a", use=usage(total=5000)))
    messages = project_path(chain.entries)
    report = context_usage(chain.entries, messages, 10_000)
    assert report is not None and (report.tokens, report.percent) == (5000, 50.0)
    assert context_usage(chain.entries, messages, 0) is None
    chain.compaction("e0").msg(user("again"))
    report = context_usage(chain.entries, project_path(chain.entries), 10_000)
    assert report is not None and (report.tokens, report.percent) == (None, None)
    chain.msg(assistant("b", use=usage(total=700)))
    report = context_usage(chain.entries, project_path(chain.entries), 10_000)
    assert report is not None and report.tokens == 700


def test_context_usage_after_an_omission_is_estimated_as_pi_1_6() -> None:
    # A context edit after the last measured response: its usage no longer describes the
    # context, so every message is estimated (pi 1.6.0's estimateProjectedContextTokens).
    chain = Chain().msg(user("q" * 400)).msg(assistant("a" * 40, use=usage(total=5000)))
    chain.msg(user("again")).msg(failed("503 overloaded")).edit("e3", None)
    messages = project_path(chain.entries)
    report = context_usage(chain.entries, messages, 10_000)
    assert report is not None
    assert report.tokens == sum(estimate_tokens(m) for m in messages) == 100 + 10 + 2
    # A response after the edit measures the context again.
    chain.msg(assistant("ok", use=usage(total=6000)))
    report = context_usage(chain.entries, project_path(chain.entries), 10_000)
    assert report is not None and report.tokens == 6000


def test_context_usage_ignores_omitted_and_all_zero_responses_after_a_compaction() -> None:
    chain = Chain().msg(user("q")).compaction("e0").msg(user("again"))
    chain.msg(assistant("zero", use=usage()))  # e3: no usable usage
    chain.msg(assistant("omitted", use=usage(total=900))).edit("e4", None)
    report = context_usage(chain.entries, project_path(chain.entries), 10_000)
    assert report is not None and (report.tokens, report.percent) == (None, None)


# --- pi's recorded compactions ---------------------------------------------------------------

RECORDED = [
    ("compaction_manual", "219c84da", 16384),
    ("compaction_manual", "a655cb33", 16384),
    ("compaction_threshold", "343541a2", 16800),
    ("compaction_overflow", "da3546ec", 16384),
    ("kitchen_sink", "75a845f6", 16384),
]


@pytest.mark.parametrize(("name", "entry_id", "reserve"), RECORDED)
def test_recorded_compactions_are_reproduced(name: str, entry_id: str, reserve: int) -> None:
    """The cut point, tokensBefore, file lists and - through the recording model's rules - the
    summary text of each compaction pi wrote come out of the entries before it."""
    entries = fixture_entries(name)
    by_id = {e.id: e for e in entries}
    recorded = by_id[entry_id]
    assert isinstance(recorded, CompactionEntry)
    path = path_to(by_id, recorded.parent_id)
    settings = CompactionSettings(keep_recent_tokens=60, reserve_tokens=reserve)
    prep = prepare_compaction(path, settings)
    assert prep is not None
    plan = plan_summary(prep)
    history = scripted_reply(plan.history) if plan.history else None
    prefix = scripted_reply(plan.turn_prefix) if plan.turn_prefix else None
    result = finish_compaction(prep, plan, history, prefix)
    assert result.first_kept_entry_id == recorded.first_kept_entry_id
    assert result.tokens_before == recorded.tokens_before
    assert result.details == recorded.details
    assert result.summary == recorded.summary


def test_recorded_threshold_triggers_exactly_where_pi_compacted() -> None:
    entries = fixture_entries("compaction_threshold")
    settings = CompactionSettings(keep_recent_tokens=60, reserve_tokens=16800)
    triggered = []
    for entry in entries:
        if isinstance(entry, MessageEntry) and entry.message.role == "assistant":
            check = CompactionCheck(
                message=entry.message,
                context_window=20000,  # faux-small
                same_model=True,
                settings=settings,
            )
            if isinstance(auto_compaction_decision(check), CompactNow):
                triggered.append(entry.id)
    # The last response comes after the compaction and is small again.
    assert triggered == ["18ca05ee"]


def test_recorded_overflow_is_recovered_and_context_edit_changes_nothing() -> None:
    entries = fixture_entries("compaction_overflow")
    by_id = {e.id: e for e in entries}
    error = by_id["9ee9ab48"]
    assert isinstance(error, MessageEntry)
    check = CompactionCheck(
        message=error.message,  # type: ignore[arg-type]
        context_window=128000,
        same_model=True,
        settings=CompactionSettings(keep_recent_tokens=60),
    )
    assert auto_compaction_decision(check) == CompactNow(
        reason="overflow",
        will_retry=True,
        failed=error.message,  # type: ignore[arg-type]
    )
    # pitrio omits the failed response with a context edit before compacting (DESIGN §5.6);
    # the cut stays the one pi 0.73.1 recorded. The estimate is pi 1.6.0's: after the edit
    # the last usage (0.73.1's 2108) no longer describes the context, so every message
    # is estimated from its characters.
    path = [*path_to(by_id, "9ee9ab48"), *Chain().edit("9ee9ab48", None).entries]
    prep = prepare_compaction(path, CompactionSettings(keep_recent_tokens=60))
    assert prep is not None
    whole = sum(estimate_tokens(m) for m in project_path(path))
    assert (prep.first_kept_entry_id, prep.tokens_before) == ("12c5757d", whole)
    assert whole == 74


def _rebuild(events: list[dict[str, Any]], upto: int) -> list[SessionEntry]:
    """The entries a transcript's session held: model and level changes, then each message."""
    chain = Chain().model_change()
    level = ThinkingLevelChangeEntry(id="tl", parent_id="e0", timestamp=TS, thinking_level="off")
    chain.add(level)
    for event in events[:upto]:
        if event.get("type") == "message_end":
            chain.msg(from_json(event["message"], AgentMessage))
    return chain.entries


def test_manual_compact_transcript() -> None:
    """pi's RPC `manual_compact` (recorded with 0.73.1): the first compaction, with every
    message inside the 60 kept tokens, is "Nothing to compact" in pi 1.6.0 (0.73.1 wrote an
    empty summary); from the recorded first compaction on, the second is reproduced, then
    "Already compacted"."""
    events = transcript_events("manual_compact")
    results = [i for i, e in enumerate(events) if e.get("type") == "compaction_end"]
    settings = CompactionSettings(keep_recent_tokens=60)
    entries = _rebuild(events, results[0])
    assert prepare_compaction(entries, settings) is None
    assert manual_compaction_refusal(entries) == NOTHING_TO_COMPACT

    first = events[results[0]]["result"]
    chain = Chain()
    chain.entries = list(entries)
    chain.compaction(entries[0].id, first["summary"], details=first["details"])
    for event in events[results[0] : results[1]]:
        if event.get("type") == "message_end":
            chain.msg(from_json(event["message"], AgentMessage))
    prep = prepare_compaction(chain.entries, settings)
    assert prep is not None
    plan = plan_summary(prep, "Keep the colour.")
    assert plan.history is None and plan.turn_prefix is not None
    second = finish_compaction(prep, plan, None, scripted_reply(plan.turn_prefix))
    recorded = events[results[1]]["result"]
    assert (second.summary, second.tokens_before) == (recorded["summary"], recorded["tokensBefore"])

    chain.compaction(second.first_kept_entry_id, second.summary)
    assert prepare_compaction(chain.entries, settings) is None
    assert events[results[2]]["errorMessage"] == "Compaction failed: " + manual_compaction_refusal(
        chain.entries
    )


def test_overflow_compaction_transcript() -> None:
    """The recorded overflow (0.73.1) came after two short turns, all inside the 60 kept
    tokens: pi 1.6.0 has nothing to compact there and recovers nothing (0.73.1 compacted with
    an empty summary). With a smaller budget the failed attempt, omitted, is passed over."""
    events = transcript_events("overflow_compaction")
    at = next(i for i, e in enumerate(events) if e.get("type") == "compaction_end")
    entries = _rebuild(events, at)
    failed_entry = entries[-1]
    assert isinstance(failed_entry, MessageEntry)
    chain = Chain()
    chain.entries = list(entries)
    chain.edit(failed_entry.id, None)
    assert prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=60)) is None
    prep = prepare_compaction(chain.entries, CompactionSettings(keep_recent_tokens=5))
    assert prep is not None
    # The budget is reached at the last prompt; all that follows it is the omitted attempt,
    # so the cut moves past the prompt and the whole visible context is summarized.
    assert prep.first_kept_entry_id == failed_entry.id
    assert [m.role for m in prep.messages_to_summarize] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    assert prep.is_split_turn and [m.role for m in prep.turn_prefix_messages] == ["user"]


async def test_a_split_turns_summary_calls_run_history_first_one_after_the_other() -> None:
    # pi 1.6.0 awaits the history's summary before it asks for the turn prefix's (they ran
    # concurrently before, and a server answering in arrival order swapped the two texts).
    import trio
    import trio.testing

    from pitrio.actors.supervisor.actor.compactor import summarize
    from pitrio.messages.stream import StreamDone

    asked: list[str] = []
    routes: list[str | None] = []
    release = trio.Event()

    async def stream(model: Any, context: Any, options: Any, send: Any) -> None:
        prompt = context.messages[0].content[0].text
        kind = "prefix" if "only the opening of a single turn" in prompt else "history"
        asked.append(kind)
        routes.append(options.session_id)
        if kind == "history":
            await release.wait()  # the prefix call must not start meanwhile
        await send.send(StreamDone(reason="stop", message=assistant(kind.upper())))

    async with trio.open_nursery() as nursery:
        done: list[Any] = []

        async def run() -> None:
            done.append(await summarize(stream, PLAIN, _prep(split=True), None))

        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        assert asked == ["history"]
        release.set()
    assert asked == ["history", "prefix"]
    assert done[0].summary.startswith("HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX")
    # Each call has a routing id of its own (pi: a fresh uuidv7 per summary call).
    assert len(set(routes)) == 2 and all(routes)
