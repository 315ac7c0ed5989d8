"""What the host reports when a session's tree ends with an exception."""

from __future__ import annotations

import trio

from pitrio.actors.host.crashes import crash_reason, exception_leaves, owned_elsewhere
from pitrio.actors.session_store.postgres.errors import SessionOwnedElsewhereError
from pitrio.errors import ActorStoppedError, PitrioError


def _cancelled() -> trio.Cancelled:
    # trio.Cancelled has no public constructor; a cancelled scope hands one out.
    async def catch() -> trio.Cancelled:
        with trio.CancelScope() as scope:
            scope.cancel()
            try:
                await trio.lowlevel.checkpoint()
            except trio.Cancelled as exc:
                return exc
        raise AssertionError("not cancelled")

    return trio.run(catch)


def test_cancellation_alone_is_no_crash() -> None:
    assert crash_reason(_cancelled()) is None
    assert crash_reason(BaseExceptionGroup("", [_cancelled(), _cancelled()])) is None
    assert crash_reason(KeyboardInterrupt()) is None


def test_the_cause_is_reported_not_the_actors_stopped_by_it() -> None:
    group = ExceptionGroup("", [ActorStoppedError("the store stopped"), ValueError("bad line")])
    assert crash_reason(BaseExceptionGroup("", [group, _cancelled()])) == "ValueError: bad line"
    only_stopped = ExceptionGroup("", [ActorStoppedError("gone")])
    assert crash_reason(only_stopped) == "ActorStoppedError: gone"


def test_a_wrapped_cause_is_named() -> None:
    try:
        try:
            raise OSError("disk full")
        except OSError as inner:
            raise PitrioError("the store failed") from inner
    except PitrioError as exc:
        assert crash_reason(exc) == "OSError: disk full"
    assert crash_reason(RuntimeError("x")) == "RuntimeError: x"


def test_a_lease_held_elsewhere_is_found_inside_groups() -> None:
    refusal = SessionOwnedElsewhereError("s-1", owner="d-2", url=None, fence=3, expires_in=5.0)
    nested = ExceptionGroup("", [ValueError("a"), ExceptionGroup("", [refusal])])
    assert owned_elsewhere(nested) is refusal
    assert owned_elsewhere(ValueError("a")) is None
    assert [type(e) for e in exception_leaves(nested)] == [ValueError, SessionOwnedElsewhereError]
