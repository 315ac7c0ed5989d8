"""A run's abort: the cancellation of every cancel scope the run has open, now and later."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class RunAbort:
    """The abort authority of one run.

    Each phase of the run that may block (a provider stream, a tool call, a hook) runs in a
    cancel scope from :meth:`scope`. :meth:`abort` cancels every open scope, and scopes opened
    afterwards start cancelled, so the loop's own bookkeeping (``message_end``, ``turn_end``,
    ``agent_end``) still runs and reports the aborted work the way pi does.
    """

    def __init__(self) -> None:
        self.aborted = False
        self._scopes: set[trio.CancelScope] = set()

    def abort(self) -> None:
        """Cancel the run's work in flight and all work it would start later."""
        self.aborted = True
        for scope in self._scopes:
            scope.cancel()

    @contextmanager
    def scope(self) -> Iterator[trio.CancelScope]:
        """A cancel scope that this run's abort cancels; check ``cancelled_caught`` after it."""
        scope = trio.CancelScope()
        if self.aborted:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)
