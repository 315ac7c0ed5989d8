"""The session's run driver: an accepted run from its preflight to its settle.

Owned by the session actor; its runs are tasks in the actor's nursery. A run is one accepted
prompt: the preflight (a held bash result, the compaction check, the system prompt's patch),
the low-level runs of the agent loop, and after each the supervisor's decision, taken from the
event pump by low-level run number (so every decision sees persisted state); then the shielded
finaliser that settles it and takes the prompts deferred meanwhile. Its state is its own: the
current run and their count, the session file's failure, the messages for the next turn, the
deferred prompts and the replay of the transcript's system messages.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.agent_loop import AgentLoopHandle
from pitrio.actors.agent_loop.actor import RunResult
from pitrio.actors.session.commands import Accepted, Prompt, SessionBusyError
from pitrio.actors.session.log import SessionLog
from pitrio.actors.session.pump import Decided
from pitrio.actors.session.queues import DisplayQueues
from pitrio.actors.session.resources.loader import Resources, system_prompt_sections
from pitrio.actors.session.resources.system_prompt import (
    PromptSection,
    ToolPromptInfo,
    render_sections,
    section_map,
)
from pitrio.actors.session.run import Run, lend, outcome
from pitrio.actors.session.shell import UserShell
from pitrio.actors.supervisor.actor.shell import SupervisorHandle
from pitrio.actors.supervisor.compaction import CompactionCheck, is_same_model
from pitrio.actors.supervisor.decisions import (
    BeforeSettle,
    Continue,
    End,
    PostRunDecision,
    Retry,
    decide_after_boundary,
)
from pitrio.actors.supervisor.decisions import Compact as CompactAction
from pitrio.actors.tool_executor import ToolExecutorHandle
from pitrio.errors import ReadOnlySessionError
from pitrio.messages.agent import AgentMessage, CustomMessage, SystemMessage, UserMessage, now_ms
from pitrio.messages.content import ImageContent, text_of
from pitrio.messages.events import AgentSessionEvent, AgentSettled, SessionReadOnly
from pitrio.messages.transcript import SystemReplay, diff_sections

if TYPE_CHECKING:
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle

FINALIZE_SECONDS = 10.0  # the shielded finaliser's deadline: a stuck loop cannot hang abort
DEFERRED_CAPACITY = 64
"""Plain prompts waiting for a settling run; one more is refused (``TOO_MANY_DEFERRED``)."""
TOO_MANY_DEFERRED = "Too many prompts are waiting for the current run to settle"


@attrs.define
class DriverSettings:
    """What the driver's preflight reads: the resources and tools the system prompt is
    built from."""

    resources: Resources | None = None
    tools: ToolExecutorHandle | None = None
    catch_up: Callable[[], Awaitable[bool]] | None = None
    """Take in what another writer appended to the session file; true when the projection
    moved since the last call (the loop is then given the file's context)."""
    on_settled: Callable[[], None] | None = None
    """Told right before each ``agent_settled`` (the cache warmer turns idle)."""
    before_prompt: Callable[[], Awaitable[object]] | None = None
    """Awaited before a run's prompt sections are built (the first prompt waits for the MCP
    servers whose tools it must declare, as pi 1.6.0's MCP ``before_agent_start``)."""


class RunDriver:
    """Starts, drives, aborts and settles the session's runs (see the module docstring)."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_built", "_catch_up", "_decisions", "_decisions_taken",
        "_deferred_channel", "_emit", "_entry_id_of", "_handle_deferred", "_host", "_log",
        "_loop", "_next_turn", "_notify", "_nursery", "_queues", "_replay", "_replayed_at",
        "_resources", "_seq", "_settings", "_shell", "_supervisor", "_tools", "count",
        "current", "resources_ready", "write_failure",
    )
    # fmt: on

    def __init__(
        self,
        *,
        loop: AgentLoopHandle,
        log: SessionLog,
        supervisor: SupervisorHandle,
        host: ExtensionHostHandle | None,
        shell: UserShell,
        queues: DisplayQueues,
        entry_id_of: Callable[[AgentMessage | None], str | None],
        decisions: trio.MemoryReceiveChannel[Decided],
        emit: Callable[[AgentSessionEvent], None],
        notify: Callable[[str, object], None],
        seq: Callable[[], int],
        handle_deferred: Callable[[Prompt], Awaitable[None]],
        nursery: trio.Nursery,
        settings: DriverSettings,
    ) -> None:
        self._loop = loop
        self._log = log
        self._supervisor = supervisor
        self._host = host
        self._shell = shell
        self._queues = queues
        self._entry_id_of = entry_id_of
        self._decisions = decisions
        self._emit = emit
        self._notify = notify
        self._seq = seq
        self._handle_deferred = handle_deferred  # the session's inbox path, in its task
        self._nursery = nursery
        self._resources = settings.resources
        self.resources_ready: trio.Event | None = None
        """Set by the session while extensions' ``resources_discover`` runs: a run's prompt
        sections wait for it, so the first prompt sees the skills they add."""
        self._tools = settings.tools
        self._catch_up = settings.catch_up
        self._settings = settings
        self.current: Run | None = None
        self.count = 0  # runs accepted so far (the latest run's number)
        self.write_failure: ReadOnlySessionError | None = None
        self._next_turn: list[CustomMessage] = []
        # Plain prompts sent while a run only settles: taken, in order, right after its
        # agent_settled (see _finish). Opened at the first one: most sessions never defer,
        # and an idle session's empty channel held 1.7 KB (issue 38).
        self._deferred_channel: (
            tuple[trio.MemorySendChannel[Prompt], trio.MemoryReceiveChannel[Prompt]] | None
        ) = None
        self._decisions_taken = 0  # the number of the last low-level run the run has taken
        self._replay = SystemReplay()  # the prompt sections the transcript declares
        self._replayed_at: tuple[int, SystemMessage | None] | None = None  # see _replayed
        # The prompt sections last built, with what they were built from (see _sections).
        self._built: tuple[object, object, tuple[PromptSection, ...], dict[str, str]] | None = None

    # -- starting, deferring, aborting ---------------------------------------------------------

    def start_prompt(
        self, message: UserMessage, accepted: Reply[Accepted], settled: Reply[None]
    ) -> None:
        """Accept a user prompt's run (the session is idle): its task starts now."""
        run = self._open([settled])
        self._nursery.start_soon(self._run_one, run, message, accepted)

    def use_resources(self, resources: Resources) -> None:
        """The resources the next runs' prompt sections are built from (extensions added
        skills)."""
        self._resources = resources

    def start_custom(self, message: CustomMessage) -> None:
        """Accept a run whose prompt is a custom message (pi 1.6.0: the prompt's sections are
        patched first, as for a user prompt)."""
        run = self._open([])

        async def start() -> RunResult:
            patch = await self._system_patch()
            added = (
                () if self._host is None else await self._host.before_agent_start("", (), message)
            )
            return await self._loop.run_prompt((*patch, message, *added))

        self._nursery.start_soon(self._drive, run, start)

    def add_next_turn(self, message: CustomMessage) -> None:
        """Hold ``message`` for the next prompt's run (``deliverAs: nextTurn``)."""
        self._next_turn.append(message)

    def defer(self, command: Prompt) -> None:
        """Hold a plain prompt sent while the run only settles; it is handled after the settle."""
        if self._deferred_channel is None:
            self._deferred_channel = trio.open_memory_channel[Prompt](DEFERRED_CAPACITY)
        try:
            self._deferred_channel[0].send_nowait(command)
        except trio.WouldBlock:  # overflow policy: refuse, saying why (nothing is dropped)
            refused = SessionBusyError(TOO_MANY_DEFERRED)
            command.accepted.fail(refused)
            command.settled.fail(refused)

    def abort(self, reply: Reply[None], *, detach: bool) -> None:
        """Abort the current run (``detach``: its remaining events go unreported); ``reply``
        is answered at its settle, at once when there is no run."""
        run = self.current
        if run is None:
            reply.set(None)
            return
        if detach:
            run.detached = True
        if run.work is not None:
            run.work.cancel()  # the supervisor's step in progress, at once
        run.abort_waiters.append(reply)
        run.scope.cancel()

    async def abort_and_wait(self) -> None:
        """Abort the current run for a command that must start from an idle session (a
        manual compaction) and wait for its settle. pi 1.6.0 aborts as its ``abort`` does:
        the partial reply is reported (``message_end``, ``turn_end``, ``agent_end``) and
        kept, so what follows sees it in the context."""
        run = self.current
        if run is not None:
            waiter: Reply[None] = Reply()
            run.abort_waiters.append(waiter)
            run.scope.cancel()
            await waiter.wait()

    def wait_for_idle(self, reply: Reply[None]) -> None:
        """Answer ``reply`` when no run is in progress (at the current run's settle)."""
        if self.current is None:
            reply.set(None)
        else:
            self.current.idle_waiters.append(reply)

    def read_only(self, failure: ReadOnlySessionError) -> None:
        """The session file cannot be written: stop the run (nothing it did could be recorded)
        and refuse prompts from now on; the run's ``prompt()`` raises ``failure``."""
        if self.write_failure is None:
            self.write_failure = failure
            self._emit(SessionReadOnly(error=str(failure)))  # clients learn it once, at once
        run = self.current
        if run is not None:
            if run.failure is None:
                run.failure = failure
            run.scope.cancel()

    def _open(self, settled: list[Reply[None]]) -> Run:
        self.count += 1
        run = Run(number=self.count, scope=trio.CancelScope(), settled=settled)
        self.current = run
        return run

    # -- the run -------------------------------------------------------------------------------

    async def _run_one(self, run: Run, prompt: UserMessage, accepted: Reply[Accepted]) -> None:
        """A user prompt's run: preflight (pending bash, compaction check), then the run."""

        async def start() -> RunResult:
            try:
                await self._flush_pending_bash()
                await self._before_prompt(run)
                next_turn, self._next_turn = self._next_turn, []
                patch = await self._system_patch()
                added = (
                    ()
                    if self._host is None
                    else await self._host.before_agent_start(
                        text_of(prompt.content), _images_of(prompt)
                    )
                )
            except trio.Cancelled:
                # Aborted in its preflight: the prompt was accepted all the same and its run
                # settles as aborted. Unanswered, its sender waited for ever (found by
                # ``pitrio explore``: a prompt and an abort sent together).
                if run.failure is None:
                    accepted.set(Accepted(self._seq()))
                raise
            accepted.set(Accepted(self._seq()))  # pi answers a prompt after its preflight
            return await self._loop.run_prompt((*patch, prompt, *next_turn, *added))

        await self._drive(run, start)
        if run.failure is not None:
            accepted.fail(run.failure)  # failed in its preflight (an answer set before stays)

    async def _drive(self, run: Run, start: Callable[[], Awaitable[RunResult]]) -> None:
        """Run an accepted run to its settle: the low-level runs and what the supervisor
        decides after each, inside the run's cancel scope; then the shielded finaliser."""
        try:
            with run.scope:
                result = await start()
                while True:
                    decision = await self._take_decision(result.run)
                    follow = await self._after_low_run(run, decision)
                    if follow is None and self._queues.queued() and not run.scope.cancel_called:
                        # Queued after the loop's last poll (e.g. a steer sent on agent_end):
                        # the accepted run delivers it before settling.
                        follow = await self._continue()
                    if follow is None:
                        break
                    result = follow
        except ReadOnlySessionError as exc:
            self.read_only(exc)
        finally:
            with trio.CancelScope(shield=True, deadline=trio.current_time() + FINALIZE_SECONDS):
                await self._finish(run)

    async def _flush_pending_bash(self) -> None:
        try:
            await self._shell.flush()
        except ReadOnlySessionError as exc:
            self.read_only(exc)

    async def _before_prompt(self, run: Run) -> None:
        """The compaction check before a new prompt runs (pi's preflight, spec §3.4.1 step 7):
        the supervisor's, which compacts in a nursery the run lends when it must.

        First, entries another writer appended to the file (pi, which writes without a lock)
        are taken in, so the prompt follows the file's last entry and the model sees them."""
        if self._catch_up is not None and await self._catch_up():
            await self._loop.set_messages(await self._log.context_messages())
        facts = self._loop.facts()  # what the loop published: no round trip before each prompt
        last = facts.last_assistant
        if last is None:
            return
        check = CompactionCheck(
            message=last,
            context_window=facts.model.context_window,
            same_model=is_same_model(last, facts.model),
            settings=self._supervisor.view().settings.compaction,
            model_ref=facts.model.ref,
        )
        if self._supervisor.wants_before_prompt(check):
            last_id = self._entry_id_of(last)
            before = self._supervisor.before_prompt
            await lend(run, lambda lent: before(check, last_entry_id=last_id, lent=lent))

    async def _system_patch(self) -> tuple[SystemMessage, ...]:
        """A ``system`` message patching the prompt sections the transcript declares into the
        ones the session has now (all of them before the first prompt, or after a resume of a
        file written without them), or nothing when they are the same (pi 1.6.0's prompt
        preparation). The tools are declared by the agent loop before each request."""
        if self.resources_ready is not None:
            await self.resources_ready.wait()
        if self._settings.before_prompt is not None:
            await self._settings.before_prompt()
        if self._resources is None or self._tools is None:
            return ()
        sections, current = self._sections(self._resources, await self._tools.prompt_entries())
        replayed = await self._replayed()
        previous = {} if replayed is None or replayed.sections is None else replayed.sections
        patch = diff_sections(previous, current)
        if patch is None:
            return ()
        # The fallback prompt of a request without system messages, and the prompt extensions
        # chain from, follow the transcript's.
        rendered = render_sections(sections)
        if self._host is not None:
            await self._host.set_base_prompt(rendered)
        await self._loop.configure(system_prompt=rendered)
        return (SystemMessage(content="", sections=patch, timestamp=now_ms()),)

    async def _replayed(self) -> SystemMessage | None:
        """The replay of the loop's transcript's system messages. Read from a state of the
        loop only when the loop's count of such changes moved since the last read (see
        ``LoopFacts.system_changes``): otherwise the transcript only grew by messages that
        are not system ones, and the replay is what it was (issue 38: a round trip to the
        loop less before each prompt). The count is read before the state, so a change
        between the two makes the next prompt read again, never keep a stale replay."""
        changes = self._loop.facts().system_changes
        kept = self._replayed_at
        if kept is not None and kept[0] == changes:
            return kept[1]
        replayed = self._replay.current((await self._loop.state()).messages_view)
        self._replayed_at = (changes, replayed)
        return replayed

    def _sections(
        self, resources: Resources, entries: Sequence[ToolPromptInfo]
    ) -> tuple[tuple[PromptSection, ...], dict[str, str]]:
        """The prompt sections of ``resources`` and the active tools' ``entries``, and their
        map. Both are immutable and replaced, never changed, when they change (the tools'
        entries are the executor's published tuple), so the same two objects build the same
        sections: kept from the last prompt instead of built again (issue 38: ~50 us of
        every turn). The map is only read."""
        built = self._built
        if built is not None and built[0] is resources and built[1] is entries:
            return built[2], built[3]
        sections = system_prompt_sections(resources, entries)
        current = section_map(sections)
        self._built = (resources, entries, sections, current)
        return sections, current

    async def _after_low_run(self, run: Run, decision: PostRunDecision) -> RunResult | None:
        """Carry out the supervisor's decision for a low-level run; the next run's result."""
        match decision.action:
            case Retry() | CompactAction() as action:
                failed_id = self._entry_id_of(action.failed)
                step = await lend(
                    run,
                    lambda lent: self._supervisor.carry_out(
                        action, failed_entry_id=failed_id, run_scope=run.scope, lent=lent
                    ),
                )
                # After a compaction the boundary does not run (pi): only a continuation.
                return await self._continue() if isinstance(step, Continue) else None
            case Continue():
                return await self._continue()
            case BeforeSettle():
                requested, can_continue = False, True
                if self._host is not None and self._host.wants_settle_boundary():
                    last = (await self._loop.run_facts()).last_assistant
                    requested, can_continue = await self._host.settle_boundary(
                        outcome(last, self.current)
                    )
                # The display queues, not a round trip to the loop: the loop holds a queued
                # message before the display does, and the pump has seen every delivery of
                # this run; one whose display entry is not in yet is delivered by the next
                # run, as one sent after the settle would be (issue 7: a round trip less
                # between agent_end and the settle, which a prompt sent on agent_end awaits).
                after: End | Continue = decide_after_boundary(
                    abort_requested=self.current is None or self.current.scope.cancel_called,
                    continue_requested=requested,
                    has_queued_messages=self._queues.queued(),
                    can_continue=can_continue,
                )
                return await self._continue() if isinstance(after, Continue) else None
            case End():
                return None
        return None

    async def _continue(self) -> RunResult:
        """Continue the agent loop from the projected context."""
        await self._loop.set_messages(await self._log.context_messages())
        return await self._loop.run_continue()

    async def _take_decision(self, number: int) -> PostRunDecision:
        """The pump's decision for low-level run ``number`` (it has processed that run)."""
        while True:
            try:  # the pump is usually done with the run already: no task switch then
                taken, decision = self._decisions.receive_nowait()
            except trio.WouldBlock:
                taken, decision = await self._decisions.receive()
            self._decisions_taken = taken
            if taken >= number:
                return decision

    async def _drop_decisions(self, number: int) -> None:
        """Wait until the pump has processed low-level run ``number``; drop its decisions."""
        while self._decisions_taken < number:
            self._decisions_taken, _ = await self._decisions.receive()
        with suppress(trio.WouldBlock):
            while True:
                self._decisions_taken, _ = self._decisions.receive_nowait()

    async def _finish(self, run: Run) -> None:
        """The shielded finaliser: stop the loop, drain its events, settle, run deferred work."""
        aborted = bool(run.scope.cancel_called and run.failure is None) or bool(run.abort_waiters)
        if run.scope.cancelled_caught or run.abort_waiters:
            await self._loop.abort()
            state = await self._loop.state()
            await self._drop_decisions(state.runs)
            await self._supervisor.run_aborted()
        settled = AgentSettled(aborted=aborted)
        if self._settings.on_settled is not None:
            self._settings.on_settled()
        self._emit(settled)
        self._notify("agent_settled", settled)
        self.current = None
        for reply in run.settled:
            if run.failure is not None:
                reply.fail(run.failure)
            else:
                reply.set(None)
        for reply in (*run.abort_waiters, *run.idle_waiters):
            reply.set(None)
        # The deferred channel, drained in arrival order until one of them starts a run (the
        # rest then wait for that run's settle).
        while self.current is None and self._deferred_channel is not None:
            try:
                deferred = self._deferred_channel[1].receive_nowait()
            except trio.WouldBlock:
                break
            await self._handle_deferred(deferred)


def _images_of(message: UserMessage) -> tuple[ImageContent, ...]:
    content = message.content
    if isinstance(content, str):
        return ()
    return tuple(part for part in content if isinstance(part, ImageContent))
