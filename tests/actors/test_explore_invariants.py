"""Each invariant of ``pitrio explore`` catches a deliberately broken session (issue 39).

Every test plants one bug in a real session (actors, store, files: the runner's own set-up),
runs a small scenario under one seed and checks that the invariant meant for that bug reports
it, while the same scenario without the bug keeps every invariant.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio
import trio.lowlevel

from pitrio.actors.explore import invariants as inv
from pitrio.actors.explore.invariants import INVARIANTS, first_violation
from pitrio.actors.explore.observation import Observation, StepRecord
from pitrio.actors.explore.runner import run_schedule
from pitrio.actors.explore.scenario import Scenario, Step
from pitrio.actors.explore.schedule import RandomStrategy
from pitrio.actors.model_router import FauxProvider, FauxReply
from pitrio.actors.model_router.providers.faux import FauxToolCall
from pitrio.actors.tool_executor import AgentTool
from pitrio.actors.tool_executor.tool import UpdateFn, text_result
from pitrio.messages.agent import AgentToolResult
from tests.actors.explore_planted import sticky_follow_ups

pytestmark = pytest.mark.usefixtures("quiet_pitrio_log")


async def _work(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
    await trio.sleep(2)
    return text_result("worked")


def scenario(*steps: Step, work: Any = _work) -> Scenario:
    """A prompt whose reply calls the ``work`` tool, then answers; ``steps`` race it."""
    return Scenario(
        name="planted",
        description="a tool call and whatever the test adds",
        model=lambda: FauxProvider(
            [FauxReply(tool_calls=[FauxToolCall("work", {})]), "answered", "more", "more"]
        ),
        tools=lambda: (AgentTool(name="work", execute=work),),
        steps=(Step(op="prompt", text="go"), *steps),
        budget=120,
    )


def observe(scenario: Scenario, seed: int = 0) -> Observation:
    return run_schedule(scenario, seed, RandomStrategy(seed)).observation


def test_the_unbroken_session_keeps_every_invariant() -> None:
    obs = observe(scenario(Step(op="follow_up", text="later", after="tool_execution_start")))
    assert {i.name: i.check(obs) for i in INVARIANTS} == {i.name: [] for i in INVARIANTS}
    assert any(e["type"] == "agent_settled" for e in obs.events)


def test_clean_errors_catches_a_bare_trio_error_reaching_a_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pitrio.actors.session.handle import SessionHandle

    async def broken(self: Any, text: str, *args: Any, **kwargs: Any) -> None:
        raise trio.BrokenResourceError("planted: the inbox was closed under the client")

    monkeypatch.setattr(SessionHandle, "follow_up", broken)
    obs = observe(scenario(Step(op="follow_up", text="later", after="tool_execution_start")))
    assert inv.clean_errors(obs) == [
        "step 1 (follow_up) saw BrokenResourceError: planted: the inbox was closed under the client"
    ]


def test_answered_once_catches_a_command_never_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    from pitrio.actors.session.actor import SessionActor
    from pitrio.actors.session.commands import Abort

    handle = SessionActor.handle
    dropped: set[int] = set()  # the sessions whose first abort was dropped (the actor is slotted)

    async def forgetful(self: SessionActor, command: Any) -> None:
        if isinstance(command, Abort) and id(self) not in dropped:
            dropped.add(id(self))
            return  # planted: the first abort is dropped, its reply never set
        await handle(self, command)

    monkeypatch.setattr(SessionActor, "handle", forgetful)
    obs = observe(scenario(Step(op="abort", after="tool_execution_start")))
    problems = inv.answered_once(obs)
    assert "step 1 (abort) got 0 answers" in problems
    assert "the scenario did not finish within its time budget" in problems


def _emit_patched(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    from pitrio.actors.session.emitter import EventOutlet

    emit = EventOutlet.emit

    def planted(self: EventOutlet, event: Any) -> None:
        for out in change(event):
            emit(self, out)

    monkeypatch.setattr(EventOutlet, "emit", planted)


def test_one_settle_per_run_catches_a_second_agent_settled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _emit_patched(monkeypatch, lambda e: [e, e] if e.type == "agent_settled" else [e])
    obs = observe(scenario())
    problems = inv.one_settle_per_run(obs)
    assert len(problems) == 1 and "agent_settled without a run" in problems[0]


def test_one_settle_per_run_catches_a_run_that_never_settles(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _emit_patched(monkeypatch, lambda e: [] if e.type == "agent_settled" else [e])
    obs = observe(scenario())
    assert inv.one_settle_per_run(obs) == [
        "a run started and never settled",
        "1 prompts started runs but 0 agent_settled were emitted",
    ]


def test_events_in_order_catches_a_lost_turn_end(monkeypatch: pytest.MonkeyPatch) -> None:
    _emit_patched(monkeypatch, lambda e: [] if e.type == "turn_end" else [e])
    obs = observe(scenario())
    problems = inv.events_in_order(obs)
    assert any("a turn is already open" in p for p in problems)
    assert any("a turn, message or tool call is still open" in p for p in problems)


def test_nothing_after_close_catches_an_event_on_the_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pitrio.actors.session.runtime import SessionRuntime

    stop = SessionRuntime._stop_current

    async def chatty(self: SessionRuntime, reason: str, target: str | None) -> None:
        if self._slot is not None:
            await self._slot.started.session.clear_queue()  # planted: emits queue_update
        await stop(self, reason, target)

    monkeypatch.setattr(SessionRuntime, "_stop_current", chatty)
    obs = observe(scenario())
    assert inv.nothing_after_close(obs) == ["1 events after the close, first queue_update"]


def _write_patched(monkeypatch: pytest.MonkeyPatch, change: Any) -> None:
    from pitrio.actors.session_store import syncing

    write = syncing.write_batch
    count = [0]

    def planted(file: Any, lease: Any, data: bytes, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return write(file, lease, change(count[0], data), *args, **kwargs)

    monkeypatch.setattr(syncing, "write_batch", planted)


def test_file_consistent_catches_an_entry_written_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    _write_patched(monkeypatch, lambda n, data: data + data if n == 2 else data)
    obs = observe(scenario())
    problems = inv.file_consistent(obs)
    assert problems and any("twice" in p or "duplicate" in p.lower() for p in problems), problems


def test_acknowledged_durable_catches_a_lost_write(monkeypatch: pytest.MonkeyPatch) -> None:
    _write_patched(monkeypatch, lambda n, data: b"" if n == 3 else data)
    obs = observe(scenario())
    problems = inv.acknowledged_durable(obs)
    assert problems and all("is in no file" in p for p in problems)


def test_projection_matches_catches_a_store_that_loses_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pitrio.actors.session_store.handle import SessionStoreHandle

    context = SessionStoreHandle.context_messages

    async def lossy(self: SessionStoreHandle) -> Any:
        return (await context(self))[:-1]  # planted: the last message is not projected

    monkeypatch.setattr(SessionStoreHandle, "context_messages", lossy)
    obs = observe(scenario())
    problems = inv.projection_matches(obs)
    assert problems and "the store's projection has" in problems[0]


def test_no_child_left_catches_a_tool_that_leaves_its_process() -> None:
    spawned: list[trio.Process] = []

    async def leaky(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        spawned.append(await trio.lowlevel.open_process(["sleep", "30"]))  # planted: not reaped
        return text_result("started")

    try:
        obs = observe(scenario(work=leaky))
        assert inv.no_child_left(obs) == [f"child process {spawned[0].pid} still running"]
    finally:
        for process in spawned:
            process.kill()
            os.waitpid(process.pid, 0)


def test_idle_at_end_catches_a_follow_up_still_shown_queued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sticky_follow_ups(monkeypatch)
    obs = observe(scenario(Step(op="follow_up", text="later", after="tool_execution_start")))
    assert inv.idle_at_end(obs) == ["follow_up queue still holds 'later', queued during a run"]


def test_resources_released_catches_a_task_left_running() -> None:
    async def leaky(call_id: str, args: dict[str, Any], on_update: UpdateFn) -> AgentToolResult:
        trio.lowlevel.spawn_system_task(trio.sleep_forever)  # planted: outlives the call
        return text_result("started")

    obs = observe(scenario(work=leaky))
    assert inv.resources_released(obs) == [
        f"{obs.tasks_end} tasks at the end, {obs.tasks_end - 1} at the start"
    ]


def test_resources_released_catches_a_session_kept_alive(monkeypatch: pytest.MonkeyPatch) -> None:
    from pitrio.actors.session.handle import SessionHandle

    kept: list[Any] = []
    state = SessionHandle.state

    async def hoarding(self: SessionHandle) -> Any:
        kept.append(self)  # planted: a global reference to the session's handle
        return await state(self)

    monkeypatch.setattr(SessionHandle, "state", hoarding)
    obs = observe(scenario())
    problems = inv.resources_released(obs)
    assert problems and all(p.startswith("still alive after the close: ") for p in problems)


def test_the_first_violation_is_reported_in_the_list_order() -> None:
    obs = Observation(scenario="x", seed=0, strategy="random", timed_out=True, crash="boom")
    violation = first_violation(obs)
    assert violation is not None
    assert violation.invariant == "clean-errors"
    assert violation.problems == ("the session crashed: boom",)


def test_idle_at_end_allows_what_pi_keeps_for_the_next_prompt() -> None:
    """Queued while idle, queued again after being delivered, queued in a replacement
    session, or left by an aborted run: pi keeps these for the next prompt."""
    text = "later"

    def queued(seq: int, *texts: str) -> dict[str, Any]:
        return {"type": "queue_update", "steering": [], "followUp": list(texts), "_seq": seq}

    def settled(seq: int, aborted: bool = False) -> dict[str, Any]:
        return {"type": "agent_settled", "aborted": aborted, "_seq": seq}

    start = {"type": "agent_start", "_seq": 1}
    state = {"follow_up": [text]}
    cases = {
        "idle": [start, settled(2), queued(3, text)],
        "again": [start, queued(2, text), queued(3), settled(4), queued(5, text)],
        "new session": [start, queued(2, text), settled(3), queued(1, text)],
        "aborted": [settled(1), start, queued(3, text), settled(4, True)],
    }
    for name, events in cases.items():
        obs = Observation(scenario=name, seed=0, strategy="random", events=events)
        obs.final_state = state
        assert inv.idle_at_end(obs) == [], name
    during = Observation(scenario="x", seed=0, strategy="random")
    during.events = [start, queued(2, text), settled(3)]
    during.final_state = state
    assert inv.idle_at_end(during) == ["follow_up queue still holds 'later', queued during a run"]


def test_clean_errors_catches_an_exception_group_in_an_answer() -> None:
    obs = Observation(scenario="x", seed=0, strategy="random")
    obs.steps = [StepRecord(index=0, op="prompt", sent=True)]
    obs.steps[0].answers = ["error: actor session failed: ExceptionGroup: Exceptions from Trio"]
    assert inv.clean_errors(obs) == [
        "step 0 (prompt) was answered with an exception group: "
        "error: actor session failed: ExceptionGroup: Exceptions from Trio"
    ]
