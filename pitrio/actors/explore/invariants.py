"""The named invariants checked after every explored schedule (pure: no trio, no I/O).

Each takes an :class:`~.observation.Observation` and returns its violations as sentences;
an empty list means it holds. :data:`INVARIANTS` lists them in the order they are reported.
What each checks, and where it is only an approximation, is in its docstring (and in
``docs/research.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

from pitrio.actors.explore.observation import Observation

RUN_EVENTS = frozenset(
    {
        "agent_end",
        "turn_start",
        "turn_end",
        "message_update",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "auto_retry_start",
    }
)
"""Events that only a run emits (after its ``agent_settled`` none may come until the next)."""

REPLACING_OPS = frozenset({"new_session", "switch_session", "fork"})


def answered_once(obs: Observation) -> list[str]:
    """Every command a client sent got exactly one answer (a result or one of pitrio's
    errors), within the scenario's mock-time budget."""
    out: list[str] = []
    for step in obs.steps:
        if step.sent and len(step.answers) != 1:
            out.append(f"step {step.index} ({step.op}) got {len(step.answers)} answers")
    if obs.timed_out:
        out.append("the scenario did not finish within its time budget")
    return out


def clean_errors(obs: Observation) -> list[str]:
    """Nothing but a :class:`~pitrio.errors.PitrioError` reached a client, no answer shows an
    exception group or a traceback, and the run itself did not crash (an exception group or
    a bare trio error is a bug to a user)."""
    out = [f"step {s.index} ({s.op}) saw {c}" for s in obs.steps for c in s.crashes]
    out.extend(
        f"step {s.index} ({s.op}) was answered with an exception group: {answer}"
        for s in obs.steps
        for answer in s.answers
        if "ExceptionGroup" in answer or "Traceback" in answer
    )
    if obs.crash is not None:
        out.append(f"the session crashed: {obs.crash}")
    return out


def _segments(obs: Observation) -> Iterator[list[dict[str, Any]]]:
    """The events split where a replacement started a new session (its ``_seq`` restarts)."""
    current: list[dict[str, Any]] = []
    last = -1
    for event in obs.events:
        seq = event.get("_seq", last + 1)
        if current and seq <= last:
            yield current
            current = []
        current.append(event)
        last = seq
    if current:
        yield current


def one_settle_per_run(obs: Observation) -> list[str]:
    """Each run ends in exactly one ``agent_settled`` and nothing of the run comes after it:
    every ``agent_start`` is followed by an ``agent_settled``, no ``agent_settled`` comes
    without a run since the previous one (but an aborted one: a run aborted before its
    ``agent_start``), and no run event (:data:`RUN_EVENTS`) comes between
    an ``agent_settled`` and the next ``agent_start``. Prompts accepted as ``started`` are
    not more than the settles."""
    out: list[str] = []
    settles = 0
    for segment in _segments(obs):
        open_run = False
        settled = True
        for index, event in enumerate(segment):
            kind = event["type"]
            if kind == "agent_start":
                open_run, settled = True, False
            elif kind == "agent_settled":
                settles += 1
                # A run aborted in its preflight settles without having started (pitrio
                # honours the abort; pi 1.6.0 would still run the agent once).
                if settled and not event.get("aborted"):
                    out.append(f"event {event.get('_seq')}: agent_settled without a run")
                open_run, settled = False, True
            elif kind in RUN_EVENTS and settled:
                out.append(f"event {event.get('_seq')}: {kind} after the run settled")
            del index
        if open_run and not settled:
            out.append("a run started and never settled")
    started = sum(1 for s in obs.steps if s.disposition == "started")
    if started > settles:
        out.append(f"{started} prompts started runs but {settles} agent_settled were emitted")
    return out


def events_in_order(obs: Observation) -> list[str]:
    """pi's event grammar: ``agent_start``/``agent_end`` alternate; turns, messages and tool
    executions open and close inside a run in pairs (a ``message_update`` only inside an
    open message, a ``tool_execution_end`` only for a started call); a compaction's and a
    retry's start and end pair up; ``agent_settled`` never inside an open ``agent_start``;
    ``seq`` rises by one within a session."""
    out: list[str] = []
    for segment in _segments(obs):
        out.extend(_grammar(segment))
    return out


PAIRS = {
    "agent_start": ("run", "agent_end"),
    "turn_start": ("turn", "turn_end"),
    "compaction_start": ("compaction", "compaction_end"),
    "auto_retry_start": ("retry", "auto_retry_end"),
}
"""Opening event -> (what it opens, the event that closes it)."""
CLOSING = {close: what for what, close in PAIRS.values()}
REOPENABLE = frozenset({"retry"})
"""pi announces each retry attempt with its own ``auto_retry_start``, one end for all."""


def _grammar(events: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    opened = dict.fromkeys(CLOSING.values(), False)
    message: str | None = None
    tools: set[str] = set()
    last_seq: int | None = None

    def bad(event: Mapping[str, Any], what: str) -> None:
        out.append(f"event {event.get('_seq')} ({event['type']}): {what}")

    for event in events:
        kind = event["type"]
        seq = event.get("_seq")
        if isinstance(seq, int) and last_seq is not None and seq != last_seq + 1:
            bad(event, f"seq {seq} after {last_seq}")
        last_seq = seq if isinstance(seq, int) else last_seq
        call = str(event.get("toolCallId"))
        if kind in PAIRS:
            what = PAIRS[kind][0]
            if opened[what] and what not in REOPENABLE:
                bad(event, f"a {what} is already open")
            if what == "turn" and not opened["run"]:
                bad(event, "a turn outside a run")
            opened[what] = True
        elif kind in CLOSING:
            what = CLOSING[kind]
            if not opened[what]:
                bad(event, f"no {what} is open")
            if what == "run" and (opened["turn"] or message is not None or tools):
                bad(event, "a turn, message or tool call is still open")
            opened[what] = False
        elif kind == "message_start":
            if message is not None:
                bad(event, f"a {message} message is still open")
            message = str(event.get("message", {}).get("role"))
        elif kind == "message_update" and message != "assistant":
            bad(event, "no assistant message is open")
        elif kind == "message_end":
            if message is None:
                bad(event, "no message is open")
            message = None
        elif kind == "tool_execution_start":
            tools.add(call)
        elif kind in ("tool_execution_update", "tool_execution_end") and call not in tools:
            bad(event, "the call was not started")
        elif kind == "agent_settled" and (opened["run"] or opened["retry"]):
            bad(event, "a run or a retry is still open")
        if kind == "tool_execution_end":
            tools.discard(call)
    if opened["compaction"]:
        out.append("a compaction never ended")
    return out


def nothing_after_close(obs: Observation) -> list[str]:
    """No event reached the client once the session was idle and being closed (the close of
    an idle session has nothing to report)."""
    if obs.closed_at is None or len(obs.events) <= obs.closed_at:
        return []
    late = obs.events[obs.closed_at :]
    return [f"{len(late)} events after the close, first {late[0]['type']}"]


def file_consistent(obs: Observation) -> list[str]:
    """Every session file written parses without a problem; its entry ids are unique and each
    ``parentId`` names an entry before it (the tree is a tree)."""
    out: list[str] = []
    for path, info in obs.files.items():
        name = path.rsplit("/", 1)[-1]
        out.extend(f"{name}: {problem}" for problem in info["problems"])
        seen: set[str] = set()
        for entry_id, parent in zip(info["ids"], info["parents"], strict=True):
            if entry_id in seen:
                out.append(f"{name}: entry id {entry_id} twice")
            if parent is not None and parent not in seen:
                out.append(f"{name}: {entry_id}'s parent {parent} is not before it")
            seen.add(entry_id)
    return out


def projection_matches(obs: Observation) -> list[str]:
    """The current session's file, opened afresh, projects to the context the store held
    live and the agent loop's messages (what the next request would carry)."""
    out: list[str] = []
    live, store, file = obs.live_context, obs.store_context, obs.file_context
    if store is not None and live is not None and store != live:
        out.append(_differ("the store's projection", store, live))
    if file is not None and store is not None and file != store:
        out.append(_differ("the file's projection", file, store))
    return out


def _differ(what: str, got: list[Any], live: list[Any]) -> str:
    for index, (a, b) in enumerate(zip(got, live, strict=False)):
        if a != b:
            return f"{what} differs at message {index}: {_role(a)} vs live {_role(b)}"
    return f"{what} has {len(got)} messages, live {len(live)}"


def _role(message: Any) -> str:
    return str(message.get("role")) if isinstance(message, dict) else repr(message)[:40]


def acknowledged_durable(obs: Observation) -> list[str]:
    """Every entry announced (``entry_appended``: the store acknowledged it) is in a session
    file at the end (only for sessions that have a file)."""
    if not obs.files:
        return []
    written = {entry_id for info in obs.files.values() for entry_id in info["ids"]}
    missing = []
    for event in obs.events:
        if event["type"] == "entry_appended":
            entry_id = event.get("entry", {}).get("id")
            if entry_id is not None and entry_id not in written:
                missing.append(entry_id)
    return [f"acknowledged entry {entry_id} is in no file" for entry_id in missing]


def no_child_left(obs: Observation) -> list[str]:
    """No child process the scenario started is still running at the end."""
    left = sorted(set(obs.children_end) - set(obs.children_start))
    return [f"child process {pid} still running" for pid in left]


def idle_at_end(obs: Observation) -> list[str]:
    """Once every client had its answer, the session is idle: no run, no compaction, no
    retry, and both queues empty but for messages pi keeps for the next prompt: those queued
    while the session was already idle (their ``queue_update`` comes after the last
    ``agent_settled``) and, when the last run was aborted, those queued during it (pi's
    abort does not clear the queues)."""
    state = obs.final_state
    busy = [key for key in ("is_running", "is_compacting", "is_retrying") if state.get(key)]
    out = [f"{key} at the end" for key in busy]
    settles = [i for i, e in enumerate(obs.events) if e["type"] == "agent_settled"]
    idle_from = settles[-1] if settles else -1
    if settles and obs.events[idle_from].get("aborted"):
        idle_from = settles[-2] if len(settles) > 1 else -1
    for key, field in (("steering", "steering"), ("follow_up", "followUp")):
        for text in state.get(key) or ():
            added = _last_added(obs.events, field, text)
            if added is None or added < idle_from:
                out.append(f"{key} queue still holds {text!r}, queued during a run")
    return out


def _last_added(events: Sequence[Mapping[str, Any]], field: str, text: str) -> int | None:
    """The index of the last ``queue_update`` that added ``text`` to ``field`` (the same
    text may have been queued, delivered and queued again; a replacement session starts
    with empty queues, its ``seq`` from 1)."""
    last, before, seq = None, 0, 0
    for index, event in enumerate(events):
        current = event.get("_seq", seq + 1)
        if current <= seq:
            before = 0  # another session
        seq = current
        if event["type"] == "queue_update":
            count = list(event.get(field) or ()).count(text)
            if count > before:
                last = index
            before = count
    return last


def resources_released(obs: Observation) -> list[str]:
    """Task count and memory back to their start, approximated: as many trio tasks once the
    clients are done as before they started, and the session's handles collectable after the
    close (a task or a reference kept by a finished run is what a leak looks like here;
    byte-level memory is not measured: allocators and caches make it noisy)."""
    out: list[str] = []
    if obs.tasks_end != obs.tasks_start:
        out.append(f"{obs.tasks_end} tasks at the end, {obs.tasks_start} at the start")
    out.extend(f"still alive after the close: {name}" for name in obs.leaked)
    return out


@attrs.frozen
class Invariant:
    """A named check."""

    name: str
    check: Callable[[Observation], list[str]]
    summary: str


INVARIANTS: tuple[Invariant, ...] = (
    Invariant("clean-errors", clean_errors, "only pitrio's errors reach a client; no crash"),
    Invariant("answered-once", answered_once, "every command sent is answered exactly once"),
    Invariant("one-settle-per-run", one_settle_per_run, "one agent_settled per run, last"),
    Invariant("events-in-order", events_in_order, "events follow pi's order (pairs, nesting)"),
    Invariant("nothing-after-close", nothing_after_close, "no event after the session closed"),
    Invariant("file-consistent", file_consistent, "session files parse; their trees are trees"),
    Invariant("projection-matches", projection_matches, "file projection = live context"),
    Invariant("acknowledged-durable", acknowledged_durable, "every announced entry is on disk"),
    Invariant("no-child-left", no_child_left, "no child process left running"),
    Invariant("idle-at-end", idle_at_end, "idle at the end, queues empty"),
    Invariant("resources-released", resources_released, "tasks back to start; session freed"),
)


@attrs.frozen
class Violation:
    """The first invariant a schedule broke and what it said."""

    invariant: str
    problems: tuple[str, ...]


def first_violation(
    obs: Observation, invariants: Sequence[Invariant] = INVARIANTS
) -> Violation | None:
    """The first invariant (in :data:`INVARIANTS` order) ``obs`` breaks, or ``None``."""
    for invariant in invariants:
        problems = invariant.check(obs)
        if problems:
            return Violation(invariant.name, tuple(problems))
    return None
