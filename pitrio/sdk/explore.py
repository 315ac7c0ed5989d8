"""Schedule exploration, for ``pitrio explore``: scenarios, seeded schedules, invariants.

Only the ``explore`` command needs it: import it inside the function that does.
"""

from __future__ import annotations

from pitrio.actors.explore.corpus import CORPUS, scenario_named
from pitrio.actors.explore.explorer import (
    STRATEGIES,
    Exploration,
    Failure,
    event_fingerprint,
    explore,
    make_strategy,
)
from pitrio.actors.explore.invariants import INVARIANTS, Invariant, Violation, first_violation
from pitrio.actors.explore.observation import Observation, StepRecord
from pitrio.actors.explore.runner import RunResult, run_schedule
from pitrio.actors.explore.scenario import Scenario, Step
from pitrio.actors.explore.schedule import Decision, PctStrategy, RandomStrategy, Replaying
from pitrio.actors.tool_executor.tool import text_result

__all__ = [
    "CORPUS",
    "INVARIANTS",
    "STRATEGIES",
    "Decision",
    "Exploration",
    "Failure",
    "Invariant",
    "Observation",
    "PctStrategy",
    "RandomStrategy",
    "Replaying",
    "RunResult",
    "Scenario",
    "Step",
    "StepRecord",
    "Violation",
    "event_fingerprint",
    "explore",
    "first_violation",
    "make_strategy",
    "run_schedule",
    "scenario_named",
    "text_result",
]
