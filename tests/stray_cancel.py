"""A guard for the tests' harnesses: a block ended by a stray ``trio.Cancelled`` fails.

A harness that yields inside a nursery (its own or a library's, such as ``open_daemon``'s)
would otherwise swallow a stray one: a ``Cancelled`` that no scope around the test's block
asked for (re-raised by a library from a scope already exited, e.g. trio-websocket 0.12's
``open_websocket``, or by our own bug) cancels the nursery on its way out, and the nursery's
cancel scope then catches it as its own: the test's block ends half-way and the test passes
having skipped its remaining checks.

Out of its reach: a stray one raised by a child task of a nursery the test's block opens
itself (that nursery cancels itself and swallows it before it reaches the harness).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import trio


class StrayCancelledError(AssertionError):
    """The test's block was ended by a ``trio.Cancelled`` that no enclosing scope asked for."""


def _all_cancelled(exc: BaseException) -> bool:
    """``exc`` is a ``Cancelled``, or a group of nothing else (a nursery's, strict groups)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_all_cancelled(inner) for inner in exc.exceptions)
    return isinstance(exc, trio.Cancelled)


@contextmanager
def no_stray_cancel() -> Iterator[None]:
    """Wrap a harness's ``yield``: a ``Cancelled`` out of the caller's block while no scope
    around it is cancelled raises :class:`StrayCancelledError` instead of passing on.

    At the ``yield`` the task is back in the harness's scopes, none of them cancelled yet by
    the block's exception (a nursery cancels itself only when the exception reaches its
    exit). So the effective deadline there is ``-inf`` exactly when a real cancellation is
    in force: an enclosing scope's (``fail_after``, ``move_on_after``, ``cancel()``), or the
    harness's own nursery's (a background task failed, or cancelled it on purpose). Those
    pass on as before; any other ``Cancelled`` is a stray one.
    """
    try:
        yield
    except BaseException as exc:
        if not _all_cancelled(exc) or trio.current_effective_deadline() == -math.inf:
            raise
        raise StrayCancelledError(
            "the test's block was ended by a stray trio.Cancelled (no enclosing cancel scope "
            "is cancelled): the harness's nursery would have swallowed it, skipping the rest "
            "of the test"
        ) from exc
