"""Seeded schedules: which runnable trio task runs when, chosen by a seed and recorded.

trio runs its runnable tasks in *batches*: everything runnable when a batch starts runs once,
in an order trio picks; what becomes runnable meanwhile waits for the next batch. With
``_ALLOW_DETERMINISTIC_SCHEDULING`` set (trio's hook for Hypothesis) trio sorts each batch by
task creation and hands it to its module's generator, ``_r.shuffle(batch)``, then runs it from
the end. :func:`controlled_scheduling` puts a :class:`Scheduler` in ``_r``'s place for one
``trio.run``: its ``shuffle`` is where a :class:`Strategy` orders the batch and may *defer*
tasks (put them back on trio's run queue, so they run in a later batch), which reaches orders
a plain shuffle cannot (a task held back while another makes several steps).

Every decision is recorded as a :class:`Decision` (one per batch of two or more tasks), so a
schedule is a list of decisions: :class:`Replaying` runs a given prefix of one and then
trio's FIFO order, which is what shrinking a failing schedule needs.

The same module also makes ``trio.to_thread.run_sync`` run its function inline (a thread
would finish at a time the machine decides, not the seed) and seeds :mod:`random`.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

import attrs
import trio
import trio.lowlevel

MAX_DEFERRALS = 3
"""Batches in a row a task may be held back: bounds starvation (a task that polls with
checkpoints could otherwise keep a deferred one out for ever)."""


@attrs.frozen
class Decision:
    """One batch's order: ``picks[i]`` indexes the tasks not yet placed (in creation order)
    to choose the ``i``-th to run; ``deferred`` indexes (in creation order) tasks held back."""

    picks: tuple[int, ...]
    deferred: tuple[int, ...] = ()


def apply_decision(batch: list[Any], decision: Decision) -> tuple[list[Any], list[Any]]:
    """``batch`` (creation order) -> (tasks in running order, tasks held back). Indexes are
    taken modulo what is left, so a decision fits a batch of another size (a shrunk
    schedule's prefix may meet different batches than the original did)."""
    held = {i % len(batch) for i in decision.deferred} if batch else set()
    if len(held) >= len(batch):
        held = set()  # never hold back a whole batch: nothing would run
    left = [task for i, task in enumerate(batch) if i not in held]
    order: list[Any] = []
    for pick in decision.picks:
        if not left:
            break
        order.append(left.pop(pick % len(left)))
    order.extend(left)
    return order, [batch[i] for i in sorted(held)]


class Strategy(Protocol):
    """Chooses each batch's :class:`Decision` (``ages`` are the tasks' deferral counts)."""

    name: str

    def decide(self, names: Sequence[str], ages: Sequence[int]) -> Decision:
        """The decision for a batch of tasks named ``names`` (creation order)."""
        ...


class RandomStrategy:
    """Each batch in a uniformly random order; each task held back with probability
    ``defer`` (at most :data:`MAX_DEFERRALS` batches in a row)."""

    name = "random"

    def __init__(self, seed: int, *, defer: float = 0.2) -> None:
        self._random = random.Random(f"random:{seed}")
        self._defer = defer

    def decide(self, names: Sequence[str], ages: Sequence[int]) -> Decision:
        """Random picks, random deferrals."""
        n = len(names)
        deferred = tuple(
            i for i in range(n) if ages[i] < MAX_DEFERRALS and self._random.random() < self._defer
        )
        picks = tuple(self._random.randrange(k) for k in range(n - len(deferred), 0, -1))
        return Decision(picks, deferred)


class PctStrategy:
    """PCT (probabilistic concurrency testing, Burckhardt et al., ASPLOS 2010) on batches.

    Each task gets a random priority when first seen (tasks are told apart by their name and
    the order they appeared in: ``name#k``). A batch runs only its highest-priority task and
    holds the others back (bounded by :data:`MAX_DEFERRALS`, after which a task runs in
    priority order with the rest): so a low-priority task waits while higher ones can run, as
    in PCT. ``depth - 1`` change points are drawn among the first ``steps`` batches; at a
    change point the task chosen to run drops below every initial priority. A bug that needs
    ``d`` orderings between tasks to show is found with a probability that does not shrink
    with the number of scheduling points as fast as for random orders.
    """

    name = "pct"

    def __init__(self, seed: int, *, depth: int = 3, steps: int = 400) -> None:
        self._random = random.Random(f"pct:{seed}")
        self._priority: dict[str, float] = {}
        self._change_points = set(self._random.sample(range(1, steps), max(0, depth - 1)))
        self._lowered = 0
        self._step = 0

    def _of(self, name: str) -> float:
        if name not in self._priority:
            self._priority[name] = 1000.0 + self._random.random()
        return self._priority[name]

    def decide(self, names: Sequence[str], ages: Sequence[int]) -> Decision:
        """The highest-priority task runs; the others wait unless they waited long enough."""
        self._step += 1
        ranked = sorted(range(len(names)), key=lambda i: -self._of(names[i]))
        top = ranked[0]
        if self._step in self._change_points:
            self._lowered += 1
            self._priority[names[top]] = -float(self._lowered)
        deferred = tuple(sorted(i for i in ranked[1:] if ages[i] < MAX_DEFERRALS))
        running = [i for i in ranked if i not in deferred]
        left = [i for i in range(len(names)) if i not in deferred]
        picks: list[int] = []
        for index in running:
            picks.append(left.index(index))
            left.remove(index)
        return Decision(tuple(picks), deferred)


class Replaying:
    """The first ``len(decisions)`` decisions of a recorded schedule, then FIFO."""

    name = "replay"

    def __init__(self, decisions: Sequence[Decision]) -> None:
        self._decisions = list(decisions)
        self._next = 0

    def decide(self, names: Sequence[str], ages: Sequence[int]) -> Decision:
        """The recorded decision, or none (creation order, nothing held)."""
        if self._next < len(self._decisions):
            self._next += 1
            return self._decisions[self._next - 1]
        return Decision(())


class Scheduler(random.Random):
    """Stands in for trio's ``_r`` during one explored run: orders batches by a strategy."""

    def __init__(self, strategy: Strategy, seed: int) -> None:
        super().__init__(f"trio:{seed}")
        self.strategy = strategy
        self.decisions: list[Decision] = []
        self.steps = 0
        # Keyed by the task itself, weakly: an id() is reused once a task is gone, which
        # would hand a new task an old one's name and deferral count.
        self._ages: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._seen: dict[str, int] = {}
        self._names: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._decision_orders: list[str] = []
        self.signature: list[str] = []
        """The running order as task names, batch by batch: two schedules with the same
        signature ran the same interleaving."""

    def signature_of_decisions(self, count: int) -> list[str]:
        """The running order (task names) of the batches of the first ``count`` decisions."""
        return self._decision_orders[:count]

    def _name(self, task: Any) -> str:
        name = self._names.get(task)
        if name is None:
            base = ".".join(task.name.rsplit(".", 2)[-2:])
            count = self._seen.get(base, 0)
            self._seen[base] = count + 1
            name = self._names[task] = f"{base}#{count}"
        return name

    def shuffle(self, x: Any, random: Any = None) -> None:  # random.Random's signature
        """Order ``x`` (a batch, in creation order) in place; trio runs it from the end."""
        batch: list[Any] = x
        self.steps += len(batch)
        if len(batch) < 2:
            if batch:
                self._ages.pop(batch[0], None)
                self.signature.append(self._name(batch[0]))
            return
        names = [self._name(task) for task in batch]
        ages = [self._ages.get(task, 0) for task in batch]
        decision = self.strategy.decide(names, ages)
        self.decisions.append(decision)
        order, held = apply_decision(batch, decision)
        for task in order:
            self._ages.pop(task, None)
        for task in held:
            self._ages[task] = self._ages.get(task, 0) + 1
        if held:
            runner = trio._core._run.GLOBAL_RUN_CONTEXT.runner
            runner.runq.extend(held)
        self.signature.append(",".join(self._name(task) for task in order))
        self._decision_orders.append(self.signature[-1])
        batch[:] = order[::-1]  # trio pops from the end


async def _inline_run_sync(fn: Any, *args: Any, **_options: Any) -> Any:
    """``trio.to_thread.run_sync`` made deterministic: the function runs on the event loop's
    thread, between the checkpoints a thread call has (cancellation is seen before it starts,
    not while it runs, as without ``abandon_on_cancel``)."""
    await trio.lowlevel.checkpoint_if_cancelled()
    result = fn(*args)
    await trio.lowlevel.cancel_shielded_checkpoint()
    return result


@contextmanager
def controlled_scheduling(scheduler: Scheduler, seed: int) -> Iterator[None]:
    """Inside the block, ``trio.run`` orders tasks by ``scheduler``, runs thread calls inline
    and :mod:`random`'s global generator is seeded with ``seed``. Not re-entrant: one explored
    run per process at a time."""
    from trio._core import _run

    saved = (_run._r, _run._ALLOW_DETERMINISTIC_SCHEDULING, trio.to_thread.run_sync)
    state = random.getstate()
    _run._r = scheduler
    _run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    trio.to_thread.run_sync = _inline_run_sync  # type: ignore[assignment]
    random.seed(seed)
    try:
        yield
    finally:
        _run._r, flag, trio.to_thread.run_sync = saved
        _run._ALLOW_DETERMINISTIC_SCHEDULING = flag  # type: ignore[misc]
        random.setstate(state)
