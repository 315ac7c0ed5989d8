"""What a session's crash was, read from the exception its tree ended with (pure).

A session tree ends with an exception group of its actors' failures and cancellations; the
host reports the cause, not the actors stopped because a peer failed, and recognises the
refusal of a lease held by another daemon.
"""

from __future__ import annotations

import trio

from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.errors import ActorStoppedError, PitrioError


def crash_reason(exc: BaseException) -> str | None:
    """What crashed, or ``None`` when ``exc`` is only cancellation."""
    if isinstance(exc, BaseExceptionGroup):
        _, rest = exc.split(trio.Cancelled)
        if rest is None:
            return None
        leaves = exception_leaves(rest)
        # An actor's failure also stops the actors that were talking to it: report the cause.
        causes = [e for e in leaves if not isinstance(e, ActorStoppedError)] or leaves
        return "; ".join(f"{type(e).__name__}: {e}" for e in causes) or repr(rest)
    if isinstance(exc, trio.Cancelled):
        return None
    if isinstance(exc, KeyboardInterrupt | SystemExit):
        return None
    cause = exc
    if isinstance(exc, PitrioError) and exc.__cause__ is not None:
        cause = exc.__cause__
        if isinstance(cause, BaseExceptionGroup):
            return crash_reason(cause) or str(exc)
    return f"{type(cause).__name__}: {cause}"


def owned_elsewhere(exc: BaseException) -> SessionOwnedElsewhereError | None:
    """The refusal inside ``exc`` when the session's lease is held by another daemon."""
    for leaf in exception_leaves(exc):
        if isinstance(leaf, SessionOwnedElsewhereError):
            return leaf
    return None


def exception_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, groups flattened (``exc`` itself when it is no group)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in exception_leaves(inner)]
    return [exc]
