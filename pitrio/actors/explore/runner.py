"""Plays one scenario under one schedule and observes what the invariants need.

A fresh temporary directory (agent dir, working directory, session dir), a fresh scripted
model and a real session runtime (session, agent loop, store, supervisor, tool executor: the
same actors ``pitrio --mode rpc`` runs), all inside one ``trio.run`` on a
``MockClock(autojump_threshold=0)`` under :func:`.schedule.controlled_scheduling`. The session
is traced (``pitrio trace`` reads the file): always, so a failing schedule replayed to keep its
trace runs the same tasks as when it failed.
"""

from __future__ import annotations

import gc
import os
import random
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio
import trio.lowlevel
import trio.testing

from pitrio.actors.explore.inprocess_mcp import config_entries, serving
from pitrio.actors.explore.observation import Observation, StepRecord
from pitrio.actors.explore.scenario import Scenario, Step
from pitrio.actors.explore.schedule import Scheduler, Strategy, controlled_scheduling
from pitrio.actors.model_router import RouterConfig, start_model_router
from pitrio.actors.session.bootstrap import SessionOptions, StartedSession
from pitrio.actors.session.runtime import SessionRuntime
from pitrio.actors.session_store.start import open_store
from pitrio.actors.session_store.storage import read_session
from pitrio.actors.trace.tap import event_json, record_to_file
from pitrio.errors import PitrioError
from pitrio.messages.codec import to_json

TRACE_NAME = "trace.jsonl"


def count_tasks() -> int:
    """The live trio tasks of this run (the whole tree under the root task)."""
    total = 0
    root = trio.lowlevel.current_root_task()
    pending = [] if root is None else [root]
    while pending:
        task = pending.pop()
        total += 1
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
    return total


def child_processes() -> list[int]:
    """Processes whose parent is this one (``/proc``; none where there is no ``/proc``)."""
    try:
        # Each thread's children, straight from the kernel (CONFIG_PROC_CHILDREN)...
        found = {
            int(pid)
            for tid in os.listdir("/proc/self/task")
            for pid in Path("/proc/self/task", tid, "children").read_text().split()
        }
        return sorted(found)
    except (OSError, ValueError):
        return _scanned_children()


def _scanned_children() -> list[int]:
    """...or every process's parent, read one by one."""
    me = os.getpid()
    found: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            stat = Path("/proc", name, "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == me and fields[0] != b"Z":
            found.append(int(name))
    return sorted(found)


@attrs.define
class _Context:
    scenario: Scenario
    runtime: SessionRuntime
    obs: Observation
    landing: list[tuple[int, float]]
    first_file: str | None = None
    seen: dict[str, int] = attrs.field(factory=dict)
    changed: trio.Event = attrs.field(factory=trio.Event)
    answered: list[trio.Event] = attrs.field(factory=list)
    busy: int = 0
    """Clients past their trigger and not yet answered."""

    def note_event(self, kind: str) -> None:
        self.seen[kind] = self.seen.get(kind, 0) + 1
        self.wake()

    def wake(self) -> None:
        """Wake every task waiting for a change (a trigger, or quiescence)."""
        self.changed.set()
        self.changed = trio.Event()

    async def trigger(self, step: Step) -> None:
        if step.after_step is not None:
            await self.answered[step.after_step].wait()
        if step.after is not None:
            while self.seen.get(step.after, 0) < step.nth:
                await self.changed.wait()


def _foreign_append(path: str | None) -> str:
    """Append one entry as another process would: after the file's last entry, new id."""
    if path is None or not os.path.exists(path):
        return "no file yet"
    data = Path(path).read_bytes()
    lines = [line for line in data.split(b"\n") if line.strip()]
    parent = orjson.loads(lines[-1]).get("id") if len(lines) > 1 else None
    entry = {
        "type": "custom",
        "customType": "foreign-writer",
        "data": {"n": len(lines)},
        "id": f"f{len(lines):07x}",
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:00.000Z",
    }
    with open(path, "ab") as file:
        file.write(orjson.dumps(entry) + b"\n")
    return "appended"


async def _send(ctx: _Context, index: int, step: Step, record: StepRecord) -> str:
    runtime = ctx.runtime
    session = runtime.current.session
    if step.op == "prompt":
        settled, accepted = await session.submit_with_seq(
            step.text,
            streaming_behavior=step.behavior,  # type: ignore[arg-type]
        )
        record.disposition = accepted.disposition
        await settled.wait()
        return f"settled ({accepted.disposition})"
    if step.op == "steer":
        await session.steer(step.text)
        return "queued"
    if step.op == "follow_up":
        await session.follow_up(step.text)
        return "queued"
    if step.op == "abort":
        await session.abort()
        return "aborted"
    if step.op == "compact":
        compacted = await session.compact()
        return f"compacted ({len(compacted.summary)} characters)"
    if step.op == "abort_retry":
        await session.abort_retry()
        return "done"
    if step.op == "new_session":
        await runtime.new_session()
        return "new session"
    if step.op == "switch_session":
        await runtime.switch_session(ctx.first_file or "other.jsonl")
        return "switched"
    if step.op == "fork":
        messages = await session.fork_messages()
        if not messages:
            return "nothing to fork"
        await runtime.fork(messages[-1][0])
        return "forked"
    if step.op == "navigate":
        messages = await session.fork_messages()
        if not messages:
            return "nothing to navigate to"
        result = await session.navigate_tree(messages[0][0], summarize=True)
        return "navigation aborted" if result.aborted else "navigated"
    if step.op == "foreign_append":
        path = runtime.current.store.path
        # Through to_thread as a real second writer would be: inline while exploring.
        return await trio.to_thread.run_sync(_foreign_append, None if path is None else str(path))
    raise AssertionError(step.op)


async def _client(ctx: _Context, index: int, step: Step) -> None:
    record = ctx.obs.steps[index]
    counted = False
    try:
        await ctx.trigger(step)
        ctx.busy += 1
        counted = True
        yields, delay = ctx.landing[index]
        if delay:
            await trio.sleep(delay)
        for _ in range(yields):
            await trio.lowlevel.checkpoint()
        record.sent_after = len(ctx.obs.events)
        record.sent = True
        try:
            answer = await _send(ctx, index, step, record)
        except PitrioError as exc:
            answer = f"error: {exc}"
        except Exception as exc:  # what a client would see escape: itself a finding
            record.crashes.append(f"{type(exc).__name__}: {exc}")
            answer = f"crash: {type(exc).__name__}"
        record.answers.append(answer)
    finally:
        ctx.answered[index].set()
        ctx.busy -= counted
        ctx.wake()  # the waiter for quiescence counts the clients again


async def _quiescent(ctx: _Context) -> None:
    """Return once nothing more can happen: every client is answered or waits for a trigger,
    the session is idle and every task is blocked (no event on its way to a client)."""
    while True:
        while ctx.busy:
            await ctx.changed.wait()
        await ctx.runtime.current.session.wait_for_idle()
        await trio.testing.wait_all_tasks_blocked()
        if not ctx.busy:
            return


async def _collect(ctx: _Context) -> None:
    async for item in ctx.runtime.events:
        data = event_json(item.event)
        data["_seq"] = item.seq
        ctx.obs.events.append(data)
        ctx.note_event(item.event.type)


def _messages_json(messages: Sequence[Any]) -> list[Any]:
    return [to_json(message) for message in messages]


async def _observe_end(ctx: _Context, started: StartedSession) -> None:
    obs = ctx.obs
    state = await started.session.state()
    obs.final_state = {
        "is_running": state.is_running,
        "is_compacting": state.is_compacting,
        "is_retrying": state.is_retrying,
        "steering": list(state.steering),
        "follow_up": list(state.follow_up),
    }
    obs.live_context = _messages_json(await started.session.messages())
    obs.store_context = _messages_json(await started.store.context_messages())
    path = started.store.path
    obs.current_file = None if path is None else str(path)


async def _file_context(path: str) -> list[Any] | None:
    async with trio.open_nursery() as nursery:
        store = await open_store(nursery, path, read_only=True)
        messages = await store.context_messages()
        nursery.cancel_scope.cancel()
    return _messages_json(messages)


async def _play(scenario: Scenario, root: Path, obs: Observation, seed: int) -> None:
    agent, work, sessions = root / "agent", root / "work", root / "sessions"
    for directory in (agent, work, sessions):
        directory.mkdir()
    # No fsync policy: the invariants read the files back in this process (see run_schedule).
    settings = {"session": {"fsync": "never"}, **scenario.settings}
    (agent / "settings.json").write_bytes(orjson.dumps(settings))
    for name, text in scenario.files.items():
        (work / name).write_text(text)
    steps = scenario.steps_for(seed)
    land = random.Random(f"land:{seed}")
    landing = [
        (land.randint(0, step.jitter), round(land.uniform(0, step.spread), 3) if step.spread else 0)
        for step in steps
    ]
    obs.landing = landing
    mcp_config: tuple[str, ...] = ()
    if scenario.mcp_servers:
        path = root / "mcp.json"
        path.write_bytes(orjson.dumps({"mcpServers": config_entries(scenario.mcp_servers)}))
        mcp_config = (str(path),)
    alive: list[weakref.ref[Any]] = []
    async with trio.open_nursery() as nursery:
        router = await start_model_router(
            nursery, scenario.model(), config=RouterConfig(agent_dir=None)
        )
        runtime = SessionRuntime(nursery, router)
        options = SessionOptions(
            cwd=str(work),
            model=scenario.model_id,
            agent_dir=agent,
            session_dir=str(sessions),
            tools=tuple(scenario.tools()),
            no_extensions=True,
            no_mcp=not mcp_config,
            mcp_config=mcp_config,
            trace=record_to_file(root / TRACE_NAME),
        )
        started = await runtime.start(options)
        if started.mcp is not None:
            # Servers connect in the background: the counts start once each first start ended.
            await started.mcp.wait()
        ctx = _Context(scenario=scenario, runtime=runtime, obs=obs, landing=landing)
        ctx.first_file = None if started.store.path is None else str(started.store.path)
        ctx.answered = [trio.Event() for _ in steps]
        obs.steps = [StepRecord(index=i, op=step.op) for i, step in enumerate(steps)]
        nursery.start_soon(_collect, ctx)
        obs.children_start = child_processes()
        obs.tasks_start = count_tasks()
        with trio.move_on_after(scenario.budget) as budget:
            async with trio.open_nursery() as clients:
                for index, step in enumerate(steps):
                    clients.start_soon(_client, ctx, index, step)
                await _quiescent(ctx)
                clients.cancel_scope.cancel()  # the steps left wait for what cannot come
            await runtime.current.session.wait_for_idle()
            await trio.testing.wait_all_tasks_blocked()
        obs.timed_out = budget.cancelled_caught
        current = runtime.current
        alive.extend(weakref.ref(h) for h in (current.session, current.loop, current.store))
        await _observe_end(ctx, current)
        obs.tasks_end = count_tasks()
        obs.children_end = child_processes()
        obs.closed_at = len(obs.events)
        await runtime.aclose()
        await trio.testing.wait_all_tasks_blocked()
        del current, started, ctx
        if obs.current_file and await trio.Path(obs.current_file).exists():
            obs.file_context = await _file_context(obs.current_file)
        obs.tasks_after_close = count_tasks()
        nursery.cancel_scope.cancel()
    gc.collect()
    obs.leaked = [repr(ref()) for ref in alive if ref() is not None]


def _read_files(sessions: Path, obs: Observation) -> None:
    for path in sorted(sessions.rglob("*.jsonl")):
        parsed = read_session(path, decode_all=True)
        problems = [] if parsed is None else [str(p) for p in parsed.problems]
        entries = [] if parsed is None else parsed.entries
        obs.files[str(path)] = {
            "problems": problems,
            "ids": [e.id for e in entries],
            "parents": [e.parent_id for e in entries],
        }


def _no_fsync(fd: Any) -> None:
    """``os.fsync`` while a schedule runs."""


@attrs.frozen
class RunResult:
    """One schedule's observation, its decisions (for replay and shrinking) and its trace."""

    observation: Observation
    scheduler: Scheduler
    trace: bytes


def run_schedule(
    scenario: Scenario,
    seed: int,
    strategy: Strategy,
    *,
    keep: Callable[[Path], None] | None = None,
) -> RunResult:
    """Play ``scenario`` once under ``strategy`` (``seed`` also places the steps)."""
    scheduler = Scheduler(strategy, seed)
    obs = Observation(scenario=scenario.name, seed=seed, strategy=strategy.name)
    with tempfile.TemporaryDirectory(prefix="pitrio-explore-") as temp:
        root = Path(temp)
        clock = trio.testing.MockClock(autojump_threshold=0)
        # Objects made before the run are left out of the collections (the leak check's
        # collection then costs what this run made, not the whole process).
        gc.freeze()
        # No fsync either (the file creation's too): no crash is simulated, and fsyncs cost
        # most of a schedule's time on a slow disk.
        fsync, os.fsync = os.fsync, _no_fsync
        try:
            with controlled_scheduling(scheduler, seed), serving(scenario.mcp_servers):
                try:
                    trio.run(_play, scenario, root, obs, seed, clock=clock)
                except BaseException as exc:  # a crash is what this looks for
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    obs.crash = _describe(exc)
        finally:
            os.fsync = fsync
            gc.unfreeze()
        _read_files(root / "sessions", obs)
        trace_path = root / TRACE_NAME
        trace = trace_path.read_bytes() if trace_path.exists() else b""
        if keep is not None:
            keep(root)
    obs.workdir = str(root / "work")
    obs.steps_run = scheduler.steps
    return RunResult(observation=obs, scheduler=scheduler, trace=trace)


def _describe(exc: BaseException) -> str:
    leaves: list[BaseException] = []
    pending = [exc]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        else:
            leaves.append(current)
    return "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves)
