"""Waiting for the event loop to fall idle: work that blocks the loop runs when nothing else could.

trio knows when no task can run (its run queue is empty after an I/O poll) and tells the
waiters of ``wait_all_tasks_blocked``. The public name lives in ``trio.testing``, which imports
pytest (~80 ms of start-up), so the function is taken from trio's core, where ``trio.testing``
takes it too.
"""

from __future__ import annotations

import trio
from trio._core._generated_run import wait_all_tasks_blocked


async def until_idle(limit: float, *, shield: bool = False) -> None:
    """Return once no other task can run, or after ``limit`` seconds if that comes first.

    ``shield``: not interrupted by a cancellation from outside either (one cancel scope for
    both, which costs a few microseconds less than two: this runs before every append).
    """
    with trio.CancelScope(deadline=trio.current_time() + limit, shield=shield):
        await wait_all_tasks_blocked()
