"""``session_before_tree`` and ``session_tree`` around a tree navigation (pi 1.6.0,
issue 35 item 5): a handler cancels it, supplies the branch summary (used only when one was
asked for), overrides the summary's instructions and the label, and hears of the move after
the new branch's context is installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pitrio.actors.session.extensions.events import SessionBeforeTreeEvent, SessionTreeEvent
from pitrio.messages.agent import AssistantMessage, UserMessage
from pitrio.messages.entries import BranchSummaryEntry, MessageEntry
from tests.actors.test_session_extensions import Harness, agent_dir, session_with

__all__ = ["agent_dir"]  # the fixture, used by name


async def _two_exchanges(h: Harness) -> tuple[list[MessageEntry], str | None]:
    """Prompts "one" and "two"; their four message entries (the system message's left
    out) and the leaf."""
    await h.session.prompt("one")
    await h.session.prompt("two")
    await h.drain()
    entries = [
        e
        for e in await h.session.store.entries()
        if isinstance(e, MessageEntry) and e.message.role in ("user", "assistant")
    ]
    return entries, await h.session.store.leaf_id()


def _recording(answer: Any) -> tuple[Any, list[Any]]:
    """A setup whose handlers record both events; ``session_before_tree`` returns ``answer``."""
    seen: list[Any] = []

    def setup(api: Any) -> None:
        def before(event: Any, ctx: Any) -> Any:
            seen.append(event)
            return answer

        def after(event: Any, ctx: Any) -> None:
            seen.append(event)

        api.on("session_before_tree", before)
        api.on("session_tree", after)

    return setup, seen


async def test_before_tree_sees_the_preparation_and_may_cancel(
    tmp_path: Path, agent_dir: Path
) -> None:
    setup, seen = _recording({"cancel": True})
    async with session_with(tmp_path, setup) as h:
        (_user1, _reply1, user2, reply2), leaf = await _two_exchanges(h)
        result = await h.session.handle.navigate_tree(user2.id, label="here")
        leaf_after = await h.session.store.leaf_id()
        labels = await h.session.store.labels()
    assert result.cancelled and not result.aborted and result.editor_text is None
    assert leaf_after == leaf == reply2.id  # nothing moved, nothing labelled
    assert labels == {}
    assert len(seen) == 1  # no session_tree for a cancelled navigation
    (event,) = seen
    assert isinstance(event, SessionBeforeTreeEvent)
    prep = event.preparation
    assert (prep.target_id, prep.old_leaf_id, prep.common_ancestor_id) == (
        user2.id,
        reply2.id,
        user2.id,  # the target lies on the branch left: it is the common ancestor
    )
    assert [e.id for e in prep.entries_to_summarize] == [reply2.id]
    assert prep.user_wants_summary is False
    assert (prep.label, prep.custom_instructions, prep.replace_instructions) == (
        "here",
        None,
        False,
    )


async def test_a_supplied_summary_is_written_without_a_model_call(
    tmp_path: Path, agent_dir: Path
) -> None:
    usage = {"input": 7, "output": 3, "totalTokens": 10}
    summary = {"summary": "told by the extension", "details": {"k": 1}, "usage": usage}
    answer = {"summary": summary, "label": "x"}
    setup, seen = _recording(answer)
    async with session_with(tmp_path, setup) as h:
        (_user1, reply1, user2, reply2), _ = await _two_exchanges(h)
        requests = len(h.faux.requests)
        result = await h.session.handle.navigate_tree(user2.id, summarize=True, label="mine")
        messages = await h.session.messages()
        labels = await h.session.store.labels()
        leaf = await h.session.store.leaf_id()
        assert len(h.faux.requests) == requests  # no summary request was made
    entry = result.summary_entry
    assert isinstance(entry, BranchSummaryEntry)
    assert (entry.summary, entry.details, entry.from_hook) == (
        "told by the extension",
        {"k": 1},
        True,
    )
    assert entry.parent_id == reply1.id
    assert entry.usage is not None and (entry.usage.input, entry.usage.total_tokens) == (7, 10)
    assert labels == {entry.id: "x"}  # the handler's label replaced the caller's
    assert result.editor_text == "two"
    assert [m.role for m in messages if m.role != "system"] == [
        "user",
        "assistant",
        "branchSummary",
    ]
    before, after = seen
    assert before.preparation.user_wants_summary is True
    assert isinstance(after, SessionTreeEvent)
    # The label entry follows the summary, so it is the leaf the handlers are told of.
    assert (after.new_leaf_id, after.old_leaf_id) == (leaf, reply2.id)
    assert after.summary_entry == entry and after.from_extension is True


async def test_a_summary_nobody_asked_for_is_ignored(tmp_path: Path, agent_dir: Path) -> None:
    setup, seen = _recording({"summary": {"summary": "unwanted"}, "label": "relabelled"})
    async with session_with(tmp_path, setup) as h:
        (_user1, reply1, _user2, reply2), _ = await _two_exchanges(h)
        result = await h.session.handle.navigate_tree(reply1.id)
        labels = await h.session.store.labels()
        leaf = await h.session.store.leaf_id()
        messages = await h.session.messages()
    assert result.summary_entry is None and not result.cancelled
    assert labels == {reply1.id: "relabelled"}  # the target is labelled instead
    assert [m.role for m in messages if m.role != "system"] == ["user", "assistant"]
    after = seen[-1]
    assert isinstance(after, SessionTreeEvent)
    assert (after.new_leaf_id, after.old_leaf_id) == (leaf, reply2.id)  # the label's entry
    assert after.summary_entry is None and after.from_extension is None


async def test_overridden_instructions_reach_the_summary_request(
    tmp_path: Path, agent_dir: Path
) -> None:
    answer = {"customInstructions": "FOCUS-ON-ZEBRAS", "replaceInstructions": True}
    setup, seen = _recording(answer)
    async with session_with(tmp_path, setup) as h:
        (_user1, _reply1, user2, _reply2), _ = await _two_exchanges(h)
        result = await h.session.handle.navigate_tree(
            user2.id, summarize=True, custom_instructions="caller's words"
        )
        request = h.faux.last_request
    assert seen[0].preparation.custom_instructions == "caller's words"
    sent = repr(request.context)
    assert "FOCUS-ON-ZEBRAS" in sent and "caller's words" not in sent
    entry = result.summary_entry
    assert isinstance(entry, BranchSummaryEntry) and entry.from_hook is None
    assert seen[-1].from_extension is False and seen[-1].summary_entry == entry


async def test_without_handlers_navigation_is_unchanged(tmp_path: Path, agent_dir: Path) -> None:
    def setup(api: Any) -> None:
        pass

    async with session_with(tmp_path, setup) as h:
        (_user1, _reply1, user2, _reply2), _ = await _two_exchanges(h)
        result = await h.session.handle.navigate_tree(user2.id)
        messages = await h.session.messages()
    assert result.editor_text == "two" and not result.cancelled
    assert [type(m) for m in messages if m.role != "system"] == [UserMessage, AssistantMessage]
