"""``get_session_stats`` counts as pi 1.6.0: the whole file, every source of usage."""

from __future__ import annotations

from pitrio.actors.session_store.stored import UnknownEntry
from pitrio.actors.supervisor.counting import count_session
from pitrio.messages.agent import Cost, Usage
from pitrio.messages.entries import CompactionEntry, MessageEntry
from tests.actors.test_supervisor_support import (
    TS,
    Chain,
    assistant,
    call,
    failed,
    tool_result,
    user,
)


def priced(input: int, output: int, cost: float) -> Usage:
    return Usage(
        input=input,
        output=output,
        total_tokens=input + output,
        cost=Cost(input=cost / 2, output=cost / 2, total=cost),
    )


def test_counts_cover_every_branch_failed_attempts_and_compacted_history() -> None:
    chain = Chain().model_change()
    chain.msg(user("one")).msg(assistant("a", use=priced(10, 1, 0.5)))  # e1 e2
    chain.msg(failed("503 overloaded", use=priced(5, 0, 0.0))).edit("e3", None)  # e3 e4
    chain.msg(assistant("b", calls=(call("read", "c1"), call("read", "c2")), use=priced(20, 2, 1)))
    chain.msg(tool_result("x", "c1")).msg(tool_result("y", "c2"))  # e6 e7
    chain.compaction("e5", "S")  # e8: e1..e4 summarized away
    # Another branch off e2 (its entries are in the file, not on the current path).
    chain.add(
        MessageEntry(id="b1", parent_id="e2", timestamp=TS, message=user("elsewhere")),
    )
    counts = count_session(chain.entries)
    assert (counts.user_messages, counts.assistant_messages, counts.tool_results) == (2, 3, 2)
    assert (counts.total_messages, counts.tool_calls) == (7, 2)
    assert counts.tokens == {
        "input": 35,
        "output": 3,
        "cacheRead": 0,
        "cacheWrite": 0,
        "total": 38,
    }
    assert counts.cost == 1.5


def test_usage_of_summaries_tools_and_usage_entries_is_counted() -> None:
    compaction = CompactionEntry(
        id="c",
        parent_id=None,
        timestamp=TS,
        summary="S",
        first_kept_entry_id="c",
        tokens_before=10,
        usage=priced(100, 10, 0.25),
    )
    # Kinds this version reads from their kept fields: a ``usage`` entry, a branch summary's
    # usage written by a newer pi.
    usage_entry = UnknownEntry(
        type="usage",
        id="u",
        parent_id="c",
        timestamp=TS,
        data={
            "kind": "cache-warming",
            "provider": "p",
            "model": "m",
            "usage": {
                "input": 7,
                "output": 1,
                "cacheRead": 50,
                "cacheWrite": 0,
                "cost": {"total": 0.125},
            },
        },
    )
    counts = count_session([compaction, usage_entry])
    assert counts.total_messages == 0
    assert counts.tokens == {
        "input": 107,
        "output": 11,
        "cacheRead": 50,
        "cacheWrite": 0,
        "total": 168,
    }
    assert counts.cost == 0.375
