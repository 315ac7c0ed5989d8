"""The host's policies, pure (no trio, no I/O): session ids, restart intensity, idle eviction.

Time is always passed in (seconds on the caller's clock, ``trio.current_time()`` in the
shell), so the rules are tested without sleeping.
"""

from __future__ import annotations

import hashlib
import re

import attrs

from pitrio.errors import PitrioError

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")
"""What a session id may look like: pi's UUIDs and any other plain token. No dots, slashes,
backslashes or NULs, so an id can never name a path outside the session directories."""


class InvalidSessionIdError(PitrioError, ValueError):
    """A session id that is not a plain token (path tricks, empty, too long)."""


def validate_session_id(value: object) -> str:
    """``value`` if it is a well-formed session id, else :class:`InvalidSessionIdError`."""
    if not isinstance(value, str) or SESSION_ID.fullmatch(value) is None:
        shown = repr(value)[:80]
        raise InvalidSessionIdError(f"Invalid session id: {shown}")
    return value


MAX_IDEMPOTENCY_KEY = 256
"""The longest ``idempotencyKey`` a create accepts (characters)."""


def idempotent_session_id(key: object) -> str:
    """The session id an idempotent create with ``key`` makes: a UUID-shaped digest of it,
    so a repeat finds the same session on this daemon, after a restart or on another daemon
    sharing the store, with nothing to remember but the session itself."""
    if not isinstance(key, str) or not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise PitrioError(
            f"create: idempotencyKey must be a string of 1 to {MAX_IDEMPOTENCY_KEY} characters"
        )
    digest = bytearray(
        hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    )
    digest[6] = (digest[6] & 0x0F) | 0x80  # version 8: made by the application
    digest[8] = (digest[8] & 0x3F) | 0x80  # the RFC 9562 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@attrs.frozen(kw_only=True)
class RestartPolicy:
    """At most ``max_restarts`` crash restarts within ``window`` seconds (OTP's intensity)."""

    max_restarts: int = 3
    window: float = 60.0

    def __attrs_post_init__(self) -> None:
        if self.max_restarts < 0 or self.window <= 0:
            raise ValueError("max_restarts must be >= 0 and window > 0")


@attrs.frozen
class RestartDecision:
    """What to do after a crash: restart (``allowed``) or give up; the new history."""

    allowed: bool
    history: RestartHistory
    recent: int
    """Restarts within the window, this one included when allowed."""


@attrs.frozen
class RestartHistory:
    """The times of the restarts that still count (inside the window)."""

    times: tuple[float, ...] = ()

    def after_crash(self, now: float, policy: RestartPolicy) -> RestartDecision:
        """Record a crash at ``now``: restart while the intensity allows it."""
        recent = tuple(t for t in self.times if now - t < policy.window)
        if len(recent) >= policy.max_restarts:
            return RestartDecision(False, RestartHistory(recent), len(recent))
        kept = (*recent, now)
        return RestartDecision(True, RestartHistory(kept), len(kept))


@attrs.frozen(kw_only=True)
class EvictionPolicy:
    """An idle session leaves memory after ``idle_seconds`` (``None``: never)."""

    idle_seconds: float | None = 600.0

    def deadline(self, last_active: float) -> float | None:
        """When a session last active at ``last_active`` becomes evictable."""
        return None if self.idle_seconds is None else last_active + self.idle_seconds

    def should_evict(self, *, now: float, last_active: float, clients: int, busy: bool) -> bool:
        """Idle long enough, nobody attached, no run in progress."""
        deadline = self.deadline(last_active)
        return deadline is not None and now >= deadline and clients == 0 and not busy

    def check_interval(self) -> float | None:
        """How often the host looks for evictable sessions (a quarter of the idle time,
        between 50 ms and 30 s), or ``None`` when eviction is off."""
        if self.idle_seconds is None:
            return None
        return min(30.0, max(0.05, self.idle_seconds / 4))
