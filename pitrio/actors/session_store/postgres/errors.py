"""The errors of the PostgreSQL store, rooted in :class:`~pitrio.errors.PitrioError`."""

from __future__ import annotations

from pitrio.errors import SessionError, SessionNotFoundError, StaleFenceError


class StoreUnavailableError(SessionError):
    """The database cannot be reached (yet); asking again once it is back may succeed."""

    retryable = True


class SchemaError(SessionError):
    """The database's schema is missing or older than this version (run ``pitrio db migrate``),
    or newer than it (upgrade pitrio)."""


class SessionOwnedElsewhereError(SessionError):
    """Another daemon holds the session's lease; ``owner`` and ``url`` say which one.

    Retryable: once that daemon releases the lease, or it expires, the session can be taken.
    """

    retryable = True

    def __init__(
        self, session_id: str, *, owner: str, url: str | None, fence: int, expires_in: float
    ) -> None:
        where = f" at {url}" if url else ""
        super().__init__(
            f"Session {session_id} is owned by daemon {owner}{where} "
            f"(its lease runs for another {max(expires_in, 0.0):.1f} s)"
        )
        self.session_id = session_id
        self.owner = owner
        self.url = url
        self.fence = fence
        self.expires_in = expires_in


class PgSessionNotFoundError(SessionNotFoundError):
    """No session with that id in the database."""


class LeaseMovedError(StaleFenceError):
    """An append the database refused because the session's lease moved; ``moved`` names the
    daemon that holds it now (``None``: nobody, or the session is gone)."""

    def __init__(self, message: str, moved: SessionOwnedElsewhereError | None) -> None:
        super().__init__(message)
        self.moved = moved
