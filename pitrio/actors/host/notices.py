"""What a hosted session's clients are told about its life (pure): the notices queued in
their streams after the events sent so far.

A session is closed (deleted), restarted after a crash, failed once its restart policy gives
up, handed to another daemon that holds its lease (a shared store), or its stream has a gap
(the clients must reload: ``resync``). A restart and a failure go to the host's subscribers
too. Each notice names its session; the hosted session adds the ``seq`` it follows.
"""

from __future__ import annotations

from typing import Any

from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError

Notice = dict[str, Any]


def closed(session_id: str) -> Notice:
    """The session was deleted: its clients are detached by the host."""
    return {"type": "session_closed", "sessionId": session_id}


def restarted(session_id: str, reason: str, restarts: int) -> Notice:
    """The session's tree crashed with ``reason`` and is started again (the ``restarts``-th
    time): what clients held is stale, a resume gets ``resync``."""
    return {
        "type": "session_restarted",
        "sessionId": session_id,
        "reason": reason,
        "restarts": restarts,
    }


def failed(session_id: str, reason: str) -> Notice:
    """The session crashed with ``reason`` more often than its restart policy allows."""
    return {"type": "session_failed", "sessionId": session_id, "reason": reason}


def owned_elsewhere(session_id: str, moved: SessionOwnedElsewhereError) -> Notice:
    """Another daemon holds the session (``owner``, at ``url``): not a crash, the session is
    left unloaded here."""
    return {
        "type": "session_owned_elsewhere",
        "sessionId": session_id,
        "owner": moved.owner,
        "url": moved.url,
        "reason": str(moved),
    }


def event_gap(session_id: str) -> Notice:
    """The session's events stopped reaching the host while it still answers: the stream has
    a gap, clients must reload."""
    return {"type": "resync", "sessionId": session_id, "reason": "event gap"}
