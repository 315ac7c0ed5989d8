"""Branch summaries for tree navigation (spec §3.9, pure parts of S93-S102)."""

from __future__ import annotations

import pytest

from pitrio.actors.model_router import FAUX_MODELS
from pitrio.actors.model_router.providers.faux_rules import summary_kind
from pitrio.actors.supervisor.branch_summary import (
    BRANCH_SUMMARY_PREAMBLE,
    NO_CONTENT_TO_SUMMARIZE,
    BranchSummarySettings,
    branch_response_text,
    build_branch_summary_request,
    collect_entries_for_branch_summary,
    finish_branch_summary,
    navigation_target,
    prepare_branch_entries,
    token_budget,
)
from pitrio.actors.supervisor.file_ops import FileOperations
from pitrio.errors import SummarizationError
from pitrio.messages.agent import BranchSummaryMessage, CompactionSummaryMessage
from pitrio.messages.entries import BranchSummaryEntry, MessageEntry, SessionEntry
from tests.actors.test_supervisor_support import (
    TS,
    Chain,
    assistant,
    call,
    failed,
    fixture_entries,
    scripted_reply,
    tool_result,
    user,
)

THINK = next(m for m in FAUX_MODELS if m.id == "faux-think")


def _tree() -> dict[str, SessionEntry]:
    """u1 a1 u2 a2 (main) and a side branch u3 a3 below a1."""
    chain = Chain().msg(user("first")).msg(assistant("one"))  # e0 e1
    chain.msg(user("second")).msg(assistant("two"))  # e2 e3
    entries = {e.id: e for e in chain.entries}
    side_user = MessageEntry(id="s0", parent_id="e1", timestamp=TS, message=user("side"))
    side_answer = MessageEntry(id="s1", parent_id="s0", timestamp=TS, message=assistant("s"))
    entries.update({"s0": side_user, "s1": side_answer})
    return entries


def test_settings() -> None:
    assert BranchSummarySettings() == BranchSummarySettings(reserve_tokens=16384, skip_prompt=False)
    parsed = BranchSummarySettings.from_json({"reserveTokens": 1000, "skipPrompt": True})
    assert parsed == BranchSummarySettings(reserve_tokens=1000, skip_prompt=True)
    assert token_budget(200_000, parsed) == 199_000
    assert token_budget(0, BranchSummarySettings()) == 128_000 - 16384


def test_collect_without_old_leaf() -> None:
    result = collect_entries_for_branch_summary(_tree(), None, "e0")
    assert (result.entries, result.common_ancestor_id) == ((), None)


def test_collect_abandoned_side_branch() -> None:
    result = collect_entries_for_branch_summary(_tree(), "s1", "e3")
    assert [e.id for e in result.entries] == ["s0", "s1"]
    assert result.common_ancestor_id == "e1"


def test_collect_when_the_target_is_on_the_old_branch() -> None:
    # S93/S95: going back to the root user message leaves everything after it.
    result = collect_entries_for_branch_summary(_tree(), "e3", "e0")
    assert [e.id for e in result.entries] == ["e1", "e2", "e3"]
    assert result.common_ancestor_id == "e0"
    assert collect_entries_for_branch_summary(_tree(), "e3", "e3").entries == ()


def test_prepare_skips_tool_results_and_keeps_summaries() -> None:
    chain = Chain().msg(user("go")).msg(assistant("r", calls=(call("read", path="a.py"),)))
    chain.msg(tool_result("content")).compaction("e0", "COMPACTED").label("e0")
    chain.branch_summary("EARLIER", details={"readFiles": ["old.py"], "modifiedFiles": ["m.py"]})
    chain.custom_message("note")
    prep = prepare_branch_entries(chain.entries, 0)
    assert [m.role for m in prep.messages] == [
        "user",
        "assistant",
        "compactionSummary",
        "branchSummary",
        "custom",
    ]
    assert prep.file_ops == FileOperations(
        read=frozenset({"a.py", "old.py"}), edited=frozenset({"m.py"})
    )


def test_prepare_ignores_file_lists_of_extension_summaries() -> None:
    chain = Chain().branch_summary("X", details={"readFiles": ["ext"]}, from_hook=True)
    assert prepare_branch_entries(chain.entries, 0).file_ops == FileOperations()


def test_budget_keeps_the_newest_messages() -> None:
    chain = Chain().msg(user("a" * 400)).msg(assistant("b" * 400)).msg(user("c" * 400))
    prep = prepare_branch_entries(chain.entries, 250)
    assert [m.role for m in prep.messages] == ["assistant", "user"]
    assert prep.total_tokens == 200


def test_budget_admits_a_summary_entry_below_ninety_percent() -> None:
    chain = Chain().compaction("x", "s" * 800).msg(user("q" * 400))  # 200 + 100 tokens
    prep = prepare_branch_entries(chain.entries, 250)  # 100 < 225: take the summary anyway
    assert [type(m) for m in prep.messages] == [CompactionSummaryMessage, type(user("q"))]
    chain = Chain().branch_summary("s" * 800).msg(user("q" * 920))  # 230 tokens >= 225
    prep = prepare_branch_entries(chain.entries, 250)
    assert [m.role for m in prep.messages] == ["user"]
    chain = Chain().branch_summary("s" * 400).msg(user("q" * 400))
    first = prepare_branch_entries(chain.entries, 0).messages[0]
    assert isinstance(first, BranchSummaryMessage)


def test_request() -> None:
    chain = Chain().msg(user("try A")).msg(assistant("done A"))
    prep = prepare_branch_entries(chain.entries, 0)
    request = build_branch_summary_request(prep)
    assert request is not None
    assert request.kind == "branch"
    assert request.system_prompt.startswith("You are a context summarization assistant")
    assert request.prompt.startswith(
        "<conversation>\n[User]: try A\n\n[Assistant]: done A\n</conversation>\n\n"
    )
    headings = [
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "### Done",
        "### In Progress",
        "### Blocked",
        "## Key Decisions",
        "## Next Steps",
    ]
    positions = [request.prompt.find(f"\n{h}\n") for h in headings]
    assert all(p > 0 for p in positions) and positions == sorted(positions)
    assert "## Critical Context" not in request.prompt
    assert summary_kind(request.prompt) == "Branch summary"
    # pi 1.6.0 (0.73.1: at most 2048 tokens, never reasoning): the model's default output
    # limit, the session's thinking level, and no prompt caching.
    assert request.max_tokens is None
    options = request.stream_options(THINK, "high")
    assert (options.reasoning, options.max_tokens, options.cache_retention) == (
        "high",
        None,
        "none",
    )
    assert request.stream_options(THINK, "off").reasoning is None


def test_custom_instructions() -> None:
    prep = prepare_branch_entries(Chain().msg(user("x")).entries, 0)
    focused = build_branch_summary_request(prep, "Say MARKER")
    assert focused is not None and focused.prompt.endswith("\n\nAdditional focus: Say MARKER")
    replaced = build_branch_summary_request(prep, "Say MARKER", replace_instructions=True)
    assert replaced is not None and replaced.prompt.endswith("</conversation>\n\nSay MARKER")
    ignored = build_branch_summary_request(prep, None, replace_instructions=True)
    assert ignored is not None and "## Goal" in ignored.prompt


def test_nothing_to_summarize() -> None:
    prep = prepare_branch_entries(Chain().label("x").entries, 0)
    assert build_branch_summary_request(prep) is None
    result = finish_branch_summary(prep, None)
    assert result.summary == NO_CONTENT_TO_SUMMARIZE
    assert result.details() == {"readFiles": [], "modifiedFiles": []}


def test_finish_appends_file_lists() -> None:
    chain = Chain().msg(assistant("w", calls=(call("write", path="out.txt"),)))
    result = finish_branch_summary(prepare_branch_entries(chain.entries, 0), "TEXT")
    assert result.summary == (
        BRANCH_SUMMARY_PREAMBLE + "TEXT\n\n<modified-files>\nout.txt\n</modified-files>"
    )
    assert result.modified_files == ("out.txt",)


def test_response_text() -> None:
    assert branch_response_text(assistant("sum")) == "sum"
    with pytest.raises(SummarizationError, match=r"^boom$"):
        branch_response_text(failed("boom"))
    with pytest.raises(SummarizationError, match=r"^Summarization failed$"):
        branch_response_text(assistant(None, stop="error"))


def test_navigation_target() -> None:
    tree = _tree()
    # S93: the root user message: leaf becomes its parent (none), text back to the editor.
    assert navigation_target(tree["e0"]).new_leaf_id is None
    assert navigation_target(tree["e0"]).editor_text == "first"
    # S94/S97: an assistant message becomes the leaf itself.
    assert navigation_target(tree["e1"]) == type(navigation_target(tree["e1"]))(new_leaf_id="e1")
    # S96: a later user message: leaf is its parent.
    assert navigation_target(tree["e2"]).new_leaf_id == "e1"
    custom = Chain().msg(user("q")).custom_message("injected").entries[1]
    target = navigation_target(custom)
    assert (target.new_leaf_id, target.editor_text) == ("e0", "injected")


RECORDED = [
    # (fixture, leaf before navigating, navigation target)
    ("tree_branch_summary", "4e327083", "be221998"),
    ("kitchen_sink", "e5d2a198", "6413fb11"),
]


@pytest.mark.parametrize(("name", "old_leaf", "target"), RECORDED)
def test_recorded_branch_summaries_are_reproduced(name: str, old_leaf: str, target: str) -> None:
    """pi's recorded branch summaries: same entries, request, text (through the recording
    model's rules), file lists, and the summary placed at the navigation's new leaf."""
    entries = fixture_entries(name)
    by_id = {e.id: e for e in entries}
    recorded = next(e for e in entries if isinstance(e, BranchSummaryEntry))
    collected = collect_entries_for_branch_summary(by_id, old_leaf, target)
    prep = prepare_branch_entries(collected.entries, token_budget(128000, BranchSummarySettings()))
    request = build_branch_summary_request(prep)
    assert request is not None
    result = finish_branch_summary(prep, scripted_reply(request))
    assert result.summary == recorded.summary
    assert result.details() == recorded.details
    assert navigation_target(by_id[target]).new_leaf_id == recorded.parent_id
