"""Keeping a replay's inputs and outputs in the recorded order (see the tick rules in
:mod:`~pitrio.actors.trace.replay`).

Split from :mod:`~pitrio.actors.trace.replay`; one :class:`Sequencer` per replay, touched by
the replay's tasks and its tap.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable, Sequence

import trio


def _zero() -> int:
    return 0


class Sequencer:
    """Holds inputs and outputs back until what came before them in the recording happened,
    and the session's event pump before the place of an input's own event (:meth:`gate`).

    ``own`` lists, in order, the recorded seq of each event an input emitted itself and the
    input's index; ``session_seq`` and ``loop_events`` read the replayed session's counters
    (set once it has started)."""

    def __init__(
        self,
        input_ticks: Sequence[int],
        output_ticks: Sequence[int],
        own: Sequence[tuple[int, int]] = (),
    ) -> None:
        self._input_ticks = list(input_ticks)
        self._output_ticks = list(output_ticks)
        self._produced: set[int] = set()
        self._low = 0  # index into output ticks: every earlier output has been produced
        self._own = deque(own)  # own events not replayed yet: (recorded seq, input index)
        self.delivered = 0  # inputs the replayed session actor has handled
        self.events = 0  # events the replay's subscription has seen
        self.progress = 0  # bumps on any record: the stall watchdog reads it
        self.session_seq: Callable[[], int] = _zero
        self.loop_events: Callable[[], int] = _zero
        self._changed = trio.Event()

    def changed(self) -> None:
        """Something moved: wake every waiter to re-check."""
        self.progress += 1
        self._changed.set()
        self._changed = trio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Return once ``condition()`` holds (re-checked whenever something moved)."""
        while not condition():
            await self._changed.wait()

    async def before_output(self, tick: int) -> None:
        """Wait until every input recorded before ``tick`` has been handled."""
        needed = bisect.bisect_left(self._input_ticks, tick)
        await self.wait_until(lambda: self.delivered >= needed)

    def output_done(self, tick: int) -> None:
        """An output of the recording has been produced again."""
        self._produced.add(tick)
        while (
            self._low < len(self._output_ticks) and self._output_ticks[self._low] in self._produced
        ):
            self._low += 1
        self.changed()

    def _outputs_before(self, tick: int) -> bool:
        return self._low >= len(self._output_ticks) or self._output_ticks[self._low] > tick

    async def before_input(self, tick: int, seq: int, loop: int = 0) -> None:
        """Wait until every output recorded before ``tick`` is produced, ``seq`` events have
        been emitted and the agent loop has sent ``loop`` events."""
        await self.wait_until(
            lambda: self._outputs_before(tick) and self.events >= seq and self.loop_events() >= loop
        )

    def handled(self) -> None:
        """The session handled one more input (or a skipped one was passed over): the own
        events it did not emit are not waited for any longer (the comparison reports them)."""
        self.delivered += 1
        while self._own and self._own[0][1] < self.delivered:
            self._own.popleft()
        self.changed()

    def own_emitted(self, seq: int) -> None:
        """The input being handled emitted an event of its own."""
        if self._own and self._own[0][1] == self.delivered:
            self._own.popleft()
        self.changed()

    def _may_emit(self) -> bool:
        return not self._own or self._own[0][0] > self.session_seq() + 1

    async def gate(self) -> None:
        """The pump's gate: its next event may not take the place of an input's own event.

        The pump lags behind the loop (it waits for the store at each ``message_end``), so
        an input handled meanwhile emits its events among the pump's at a place the loop's
        progress does not fix; the recording says where, and the pump waits there."""
        await self.wait_until(self._may_emit)
