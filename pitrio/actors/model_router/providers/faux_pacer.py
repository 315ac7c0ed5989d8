"""Many tasks' timed sleeps on one trio timer: the load faux model's pacing (issue 38).

A paced faux reply sleeps once per chunk: 400 streaming sessions at 50 chunks a second are
20,000 sleeps a second. ``trio.sleep_until`` makes each a cancel scope with a deadline that
expires by raising ``Cancelled`` through the sleeping task and unwinding it, which the
daemon's load benchmark profiled at about a tenth of the daemon's CPU per delta. A real
provider's task is woken by its socket becoming readable, a plain reschedule.

:class:`Pacer` wakes its sleepers the way the I/O manager wakes readers: one sleeper, the
*keeper*, holds the only trio timer, set to the earliest deadline of all; when it fires the
keeper reschedules every sleeper that is due. When the keeper's own deadline comes (or it is
cancelled) it hands the timer to the earliest sleeper left. No task of its own: the sleepers
keep the time between them, so the pacer lives as long as its callers (structured). A lone
sleeper is its own keeper, woken by its own timer, no later than ``trio.sleep_until``.
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any

import outcome
import trio

_KEEP = "keep"
"""What a sleeper is woken with when it is handed the timer."""


class _Sleeper:
    """One task asleep until ``deadline``."""

    __slots__ = ("deadline", "gone", "task")

    def __init__(self, deadline: float, task: trio.lowlevel.Task) -> None:
        self.deadline = deadline
        self.task = task
        self.gone = False
        """Cancelled while waiting: left in the heap, skipped when met."""


class Pacer:
    """Timed sleeps of any number of tasks of one trio run, on one timer (module doc)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Sleeper]] = []
        self._order = itertools.count()
        self._keeper: _Sleeper | None = None
        self._timer: trio.CancelScope | None = None

    async def sleep_until(self, deadline: float) -> None:
        """Return at ``deadline`` (trio's clock) or soon after; a checkpoint either way."""
        me = _Sleeper(deadline, trio.lowlevel.current_task())
        if self._keeper is None:
            await self._keep(me)
            return
        heapq.heappush(self._heap, (deadline, next(self._order), me))
        timer = self._timer
        if timer is not None and deadline < timer.deadline:
            timer.deadline = deadline  # the keeper wakes earlier, for this one

        def abort(_: Any) -> trio.lowlevel.Abort:
            me.gone = True
            return trio.lowlevel.Abort.SUCCEEDED

        if await trio.lowlevel.wait_task_rescheduled(abort) == _KEEP:
            await self._keep(me)

    async def _keep(self, me: _Sleeper) -> None:
        """Hold the timer until ``me`` is due, waking every sleeper due before."""
        self._keeper = me
        slept = False
        try:
            while True:
                now = trio.current_time()
                self._wake_due(now)
                if me.deadline <= now:
                    break
                wake = min(me.deadline, self._heap[0][0]) if self._heap else me.deadline
                with trio.move_on_at(wake) as self._timer:
                    await trio.sleep_forever()
                slept = True
            if not slept:
                await trio.lowlevel.checkpoint()
        finally:
            self._timer = None
            self._keeper = None
            self._hand_over()

    def _wake_due(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            sleeper = heapq.heappop(heap)[2]
            if not sleeper.gone:
                trio.lowlevel.reschedule(sleeper.task, outcome.Value(None))

    def _hand_over(self) -> None:
        """The earliest sleeper left keeps the time from now on."""
        heap = self._heap
        while heap:
            sleeper = heapq.heappop(heap)[2]
            if not sleeper.gone:
                trio.lowlevel.reschedule(sleeper.task, outcome.Value(_KEEP))
                self._keeper = sleeper  # until it runs: a new sleeper queues behind it
                return
