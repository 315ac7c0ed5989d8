"""Session titles and the search of the host's listing (pure)."""

from __future__ import annotations

from pitrio.actors.host.listing import (
    TITLE_LENGTH,
    UNTITLED,
    first_line,
    matches,
    search_terms,
    session_title,
)


def test_the_name_wins_then_the_first_prompt_line() -> None:
    assert session_title({"name": "  my work ", "firstMessage": "hello"}) == "my work"
    assert session_title({"firstMessage": "\n  Fix the parser  \nit breaks on tabs"}) == (
        "Fix the parser"
    )
    assert session_title({"name": "   ", "firstMessage": "hi"}) == "hi"
    assert session_title({"firstMessage": "(no messages)"}) == UNTITLED
    assert session_title({}) == UNTITLED
    assert first_line(" \n\t\n") == ""


def test_a_long_title_is_cut_to_one_list_line() -> None:
    title = session_title({"firstMessage": "word " * 60})
    assert len(title) <= TITLE_LENGTH and title.endswith("…")
    assert title.startswith("word word")


def test_search_needs_every_word_in_name_messages_or_id() -> None:
    row = {
        "id": "0192abcd-ef",
        "name": "Release notes",
        "firstMessage": "write the notes",
        "allMessagesText": "write the notes Sure, here are the notes for 1.4",
    }
    assert matches(row, search_terms(""))
    assert matches(row, search_terms("RELEASE"))
    assert matches(row, search_terms("notes 1.4"))
    assert matches(row, search_terms("0192ab"))
    assert not matches(row, search_terms("notes 2.0"))
    assert not matches({"id": "x"}, search_terms("notes"))
