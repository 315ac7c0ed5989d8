"""What a session is called in a listing, and which sessions a search finds. Pure.

A listing row carries pi's ``SessionInfo`` fields (``name``, ``firstMessage``,
``allMessagesText``, ...). Clients show a session by its :func:`session_title`: its name (pi's
``session_info`` entry, ``set_session_name``) or else the first line of its first prompt.
:func:`matches` is the search of the host's ``search`` command.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NO_MESSAGES = "(no messages)"
"""pi's ``firstMessage`` of a session without a user message."""
UNTITLED = "New session"
"""The title of a session with neither a name nor a prompt yet."""
TITLE_LENGTH = 80
"""A title longer than this is cut (with an ellipsis): it is one line of a list."""


def first_line(text: str) -> str:
    """The first line of ``text`` holding anything but spaces, stripped ("" if none)."""
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            return stripped
    return ""


def session_title(row: Mapping[str, Any]) -> str:
    """The session's name, else its first prompt's first line, else :data:`UNTITLED`."""
    name = row.get("name")
    if isinstance(name, str) and name.strip():
        title = name.strip()
    else:
        first = row.get("firstMessage")
        title = first_line(first) if isinstance(first, str) and first != NO_MESSAGES else ""
    if not title:
        return UNTITLED
    if len(title) > TITLE_LENGTH:
        return title[: TITLE_LENGTH - 1].rstrip() + "…"
    return title


def search_terms(query: str) -> tuple[str, ...]:
    """The words of a search, case-folded (an empty query has none: it finds every session)."""
    return tuple(word.casefold() for word in query.split())


def matches(row: Mapping[str, Any], terms: tuple[str, ...]) -> bool:
    """Whether every term occurs in the session's name, its messages' text or its id.

    ``allMessagesText`` holds every user and assistant message's text, the first prompt's
    included; the id lets a user paste the id (or its start) a log line printed.
    """
    if not terms:
        return True
    fields = (row.get("name"), row.get("firstMessage"), row.get("allMessagesText"), row.get("id"))
    haystack = "\n".join(f for f in fields if isinstance(f, str)).casefold()
    return all(term in haystack for term in terms)
