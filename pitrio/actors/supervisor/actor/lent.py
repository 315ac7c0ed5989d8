"""The nursery a requester lends the Supervisor for a step (see :mod:`.shell`).

A module of its own so that the session can lend one, and the shell and handle name it,
without importing the supervisor's commands (:mod:`.commands`), which only a retry, a
compaction or a branch summary needs (cold start, issue 38).
"""

from __future__ import annotations

import attrs
import trio


@attrs.frozen
class Lent:
    """A nursery the requester lends for a step, and the cancel scope it sits in (abort
    cancels that scope; the step then emits its ``aborted`` event)."""

    nursery: trio.Nursery
    scope: trio.CancelScope
