"""What a hosted session's clients are told (pitrio/actors/host/notices.py, pure)."""

from __future__ import annotations

from pitrio.actors.host import notices
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError


def test_each_notice_names_its_session_and_what_happened() -> None:
    assert notices.closed("s1") == {"type": "session_closed", "sessionId": "s1"}
    assert notices.failed("s1", "RuntimeError: boom") == {
        "type": "session_failed",
        "sessionId": "s1",
        "reason": "RuntimeError: boom",
    }
    assert notices.restarted("s1", "RuntimeError: boom", 2) == {
        "type": "session_restarted",
        "sessionId": "s1",
        "reason": "RuntimeError: boom",
        "restarts": 2,
    }
    assert notices.event_gap("s1") == {"type": "resync", "sessionId": "s1", "reason": "event gap"}


def test_a_session_owned_elsewhere_says_by_whom_and_where() -> None:
    moved = SessionOwnedElsewhereError(
        "s1", owner="d2", url="http://d2:8080", fence=4, expires_in=3.0
    )
    notice = notices.owned_elsewhere("s1", moved)
    assert notice == {
        "type": "session_owned_elsewhere",
        "sessionId": "s1",
        "owner": "d2",
        "url": "http://d2:8080",
        "reason": str(moved),
    }
    assert "d2" in notice["reason"]
