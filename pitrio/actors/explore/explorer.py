"""Runs a scenario under many seeds, checks the invariants, shrinks a failing schedule.

A failing schedule is shrunk to the shortest prefix of its decisions that still breaks the
same invariant (the rest of the run in trio's FIFO order): bisection over the prefix length,
then that length confirmed. The trace of the shrunk run is kept: ``pitrio trace timeline`` and
``pitrio trace replay`` read it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

import attrs
import orjson

from pitrio.actors.explore.invariants import INVARIANTS, Invariant, Violation, first_violation
from pitrio.actors.explore.observation import Observation
from pitrio.actors.explore.runner import RunResult, run_schedule
from pitrio.actors.explore.scenario import Scenario
from pitrio.actors.explore.schedule import (
    Decision,
    PctStrategy,
    RandomStrategy,
    Replaying,
    Strategy,
)
from pitrio.actors.trace.compare import normalise_all
from pitrio.errors import PitrioError

STRATEGIES: dict[str, Callable[[int], Strategy]] = {
    "random": RandomStrategy,
    "pct": PctStrategy,
}


def make_strategy(name: str, seed: int) -> Strategy:
    """The strategy ``name`` for ``seed``."""
    try:
        return STRATEGIES[name](seed)
    except KeyError:
        raise PitrioError(f"unknown strategy {name!r} (random, pct)") from None


def event_fingerprint(obs: Observation) -> str:
    """A digest of the normalised event sequence (ids renamed, timestamps and the temporary
    directory left out) and the clients' answers: equal for two schedules with the same
    outcome."""
    events = [{k: v for k, v in e.items() if k != "_seq"} for e in obs.events]
    answers = [step.answers for step in obs.steps]
    data = orjson.dumps(
        [normalise_all(events, cwd=obs.workdir), answers], option=orjson.OPT_SORT_KEYS
    )
    return hashlib.sha256(data).hexdigest()[:16]


def schedule_fingerprint(signature: Sequence[str]) -> str:
    """A digest of a schedule's running order (task names, batch by batch)."""
    return hashlib.sha256("\n".join(signature).encode()).hexdigest()[:16]


@attrs.frozen
class Failure:
    """A failing seed: what broke, the shrunk schedule prefix, and the trace of its run."""

    seed: int
    violation: Violation
    decisions: int
    """Decisions of the full failing schedule."""
    prefix: tuple[Decision, ...]
    """The shortest prefix found that still fails."""
    prefix_order: tuple[str, ...]
    """That prefix's batches as task names in running order."""
    trace: bytes
    steps: tuple[str, ...] = ()
    """Each step as the seed placed it (for the report)."""

    def describe(self, scenario: str, strategy: str) -> str:
        """The report printed for it."""
        lines = [
            f"FAIL {scenario} seed {self.seed} (--strategy {strategy}): {self.violation.invariant}",
            *(f"  {problem}" for problem in self.violation.problems[:10]),
            f"  schedule: {self.decisions} decisions; shortest failing prefix: "
            f"{len(self.prefix)} (then trio's FIFO order)"
            + ("; no task order needed: the steps' places fail" if not self.prefix else ""),
            *(f"  step {line}" for line in self.steps),
        ]
        for index, (decision, order) in enumerate(
            zip(self.prefix[-8:], self.prefix_order[-8:], strict=False)
        ):
            number = len(self.prefix) - min(8, len(self.prefix)) + index + 1
            held = f", held back {list(decision.deferred)}" if decision.deferred else ""
            lines.append(f"    {number}: {order}{held}")
        lines.append(
            f"  reproduce: pitrio explore {scenario} --seed {self.seed} --strategy {strategy}"
        )
        return "\n".join(lines) + "\n"


@attrs.define
class Exploration:
    """What a run of many seeds saw."""

    scenario: str
    strategy: str
    schedules: int = 0
    steps: int = 0
    event_sequences: set[str] = attrs.field(factory=set)
    interleavings: set[str] = attrs.field(factory=set)
    failures: list[Failure] = attrs.field(factory=list)

    def summary(self) -> str:
        """One line of figures."""
        return (
            f"{self.scenario}: {self.schedules} schedules ({self.strategy}), "
            f"{len(self.interleavings)} distinct interleavings, "
            f"{len(self.event_sequences)} distinct outcomes, "
            f"{len(self.failures)} failing\n"
        )


def _fails(
    scenario: Scenario,
    seed: int,
    prefix: Sequence[Decision],
    invariant: str,
    invariants: Sequence[Invariant],
) -> RunResult | None:
    result = run_schedule(scenario, seed, Replaying(prefix))
    violation = first_violation(result.observation, invariants)
    return result if violation is not None and violation.invariant == invariant else None


def shrink(
    scenario: Scenario,
    seed: int,
    failing: RunResult,
    violation: Violation,
    invariants: Sequence[Invariant] = INVARIANTS,
) -> Failure:
    """The shortest prefix of ``failing``'s decisions that still breaks ``violation``'s
    invariant (bisection; the full schedule when no prefix does)."""
    decisions = failing.scheduler.decisions
    best: RunResult = failing
    best_prefix: Sequence[Decision] = decisions
    low, high = 0, len(decisions)
    while low < high:
        middle = (low + high) // 2
        attempt = _fails(scenario, seed, decisions[:middle], violation.invariant, invariants)
        if attempt is not None:
            best, best_prefix, high = attempt, decisions[:middle], middle
        else:
            low = middle + 1
    if len(best_prefix) == len(decisions):
        # The recorded run itself (a replay of every decision) is what failed.
        replayed = _fails(scenario, seed, decisions, violation.invariant, invariants)
        best = replayed or failing
    order = tuple(best.scheduler.signature_of_decisions(len(best_prefix)))
    final = first_violation(best.observation, invariants) or violation
    return Failure(
        seed=seed,
        violation=final,
        decisions=len(decisions),
        prefix=tuple(best_prefix),
        prefix_order=order,
        trace=best.trace,
        steps=placed_steps(scenario, best.observation),
    )


def placed_steps(scenario: Scenario, obs: Observation) -> tuple[str, ...]:
    """Each step, where the seed placed it, and what it got."""
    out = []
    for step, record, (yields, delay) in zip(
        scenario.steps_for(obs.seed), obs.steps, obs.landing, strict=False
    ):
        trigger = f"after step {step.after_step}'s answer" if step.after_step is not None else ""
        if step.after is not None:
            trigger += f"{' and ' if trigger else ''}after {step.after} #{step.nth}"
        text = f" {step.text[:30]!r}" if step.text else ""
        answer = "; ".join(record.answers) if record.sent else "not sent"
        out.append(
            f"{record.index}: {step.op}{text} {trigger or 'at the start'}, "
            f"+{yields} yields +{delay}s -> {answer or 'NO ANSWER'}"
        )
    return tuple(out)


def explore(
    scenario: Scenario,
    seeds: Sequence[int],
    strategy: str = "random",
    *,
    invariants: Sequence[Invariant] = INVARIANTS,
    shrink_failures: bool = True,
    stop_after: int = 1,
    progress: Callable[[int, Violation | None], None] | None = None,
) -> Exploration:
    """Run ``scenario`` once per seed; stop after ``stop_after`` failures (0: never)."""
    found = Exploration(scenario=scenario.name, strategy=strategy)
    for seed in seeds:
        result = run_schedule(scenario, seed, make_strategy(strategy, seed))
        obs = result.observation
        found.schedules += 1
        found.steps += obs.steps_run
        found.event_sequences.add(event_fingerprint(obs))
        found.interleavings.add(schedule_fingerprint(result.scheduler.signature))
        violation = first_violation(obs, invariants)
        if progress is not None:
            progress(seed, violation)
        if violation is None:
            continue
        if shrink_failures:
            failure = shrink(scenario, seed, result, violation, invariants)
        else:
            count = len(result.scheduler.decisions)
            failure = Failure(seed, violation, count, (), (), result.trace)
        found.failures.append(failure)
        if stop_after and len(found.failures) >= stop_after:
            break
    return found
