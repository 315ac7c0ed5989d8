"""Boundary drafts as the entries they would write (the per-handler preview builds these)."""

from __future__ import annotations

from pitrio.actors.session.extensions.drafts import draft_entry, parse_drafts
from pitrio.messages.entries import (
    CompactionEntry,
    ContentReplacement,
    ContextEditEntry,
    CustomEntry,
    CustomMessageEntry,
)


def test_each_kind_of_draft_becomes_its_entry_with_the_envelope_given() -> None:
    drafts = parse_drafts(
        [
            {"type": "custom", "customType": "state", "data": {"n": 1}},
            {"type": "custom_message", "customType": "note", "content": "hi", "display": False},
            {"type": "context_edit", "targetId": "e1", "replacement": "shorter"},
            {"type": "context_edit", "targetId": "e2", "replacement": None, "reason": "noise"},
            {
                "type": "compaction",
                "summary": "so far",
                "firstKeptEntryId": "e3",
                "tokensBefore": 1200,
            },
        ]
    )
    made = [
        draft_entry(d, id=f"p{i}", parent_id="leaf", timestamp="T") for i, d in enumerate(drafts)
    ]
    assert made[0] == CustomEntry(
        custom_type="state", data={"n": 1}, id="p0", parent_id="leaf", timestamp="T"
    )
    assert made[1] == CustomMessageEntry(
        custom_type="note", content="hi", display=False, id="p1", parent_id="leaf", timestamp="T"
    )
    assert made[2] == ContextEditEntry(
        target_id="e1",
        replacement=ContentReplacement(content="shorter"),
        id="p2",
        parent_id="leaf",
        timestamp="T",
    )
    assert isinstance(made[3], ContextEditEntry) and made[3].replacement is None
    assert made[3].reason == "noise"
    assert made[4] == CompactionEntry(
        summary="so far",
        first_kept_entry_id="e3",
        tokens_before=1200,
        id="p4",
        parent_id="leaf",
        timestamp="T",
    )
