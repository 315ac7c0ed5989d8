"""The Supervisor actor: retry, overflow recovery, compaction and branch summaries (DESIGN §2).

One per session, started in the session's nursery. The policy stays pure in the sibling
modules (:mod:`~pitrio.actors.supervisor.decisions`, ``retry``, ``compaction``,
``branch_summary``); this actor is its shell: it holds the :class:`SupervisorState` (the retry
attempt, the overflow-recovery latch) and its settings, takes the session's low-level run
results and the commands that concern it, calls the policy, does the I/O (the retry back-off,
the summary requests, the ``compaction`` and ``context_edit`` entries) and emits the retry and
compaction events. Its commands (typed messages) are in :mod:`.commands`.

**How its work meets abort.** A step that takes time (a retry back-off, a compaction, a branch
summary) runs in a nursery the requester *lends* (:class:`Lent`): the session opens a cancel
scope with a nursery in it, inside the run's own scope, and hands both over; the step is a task
of this actor started in that nursery. Cancelling the run (abort) therefore reaches the step at
once, as it reached the same code when it ran in the run's task, and the step emits its
``aborted`` event on its way out.

**What goes without a message.** The actor publishes a :class:`SupervisorView` (a
:class:`~pitrio.actors.latest.Latest`): the handle runs the pure policy over it in the
caller's task and sends a command only when the state would change or I/O is needed. A plain
turn (success, no retry, no compaction near) therefore costs no round trip (issue 7). This is
sound because the commands that change the state are asks awaited by the session's pump and
run tasks one after another, so the published view is never behind a command in flight.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from pitrio.actors._actor import Actor, Reply
from pitrio.actors.latest import Latest
from pitrio.actors.session_store.command_stamp import stamping
from pitrio.actors.supervisor._entries import iso_to_ms, recovery_omission_targets
from pitrio.actors.supervisor.actor.compactor import (
    BeforeCompact,
    CompactionCancelledByHook,
    StreamCall,
    SummaryRetry,
    compact,
    complete_retrying,
)
from pitrio.actors.supervisor.actor.handle import (
    SupervisorHandle,
    SupervisorSettings,
    SupervisorView,
)
from pitrio.actors.supervisor.actor.lent import Lent
from pitrio.actors.supervisor.branch_summary import (
    BranchSummaryResult,
    branch_response_text,
    build_branch_summary_request,
    finish_branch_summary,
    prepare_branch_entries,
    token_budget,
)
from pitrio.actors.supervisor.compaction import (
    COMPACTION_CANCELLED,
    CompactNow,
    compaction_failure_message,
    estimate_tokens,
)
from pitrio.actors.supervisor.decisions import (
    Compact,
    Continue,
    End,
    PostRunDecision,
    Retry,
    RunEnded,
    SupervisorState,
    decide_after_compaction,
    decide_after_run,
    decide_before_prompt,
    prompt_needs_branch_inputs,
    run_needs_branch_inputs,
)
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage, AssistantMessage
from pitrio.messages.content import ToolCall
from pitrio.messages.entries import (
    CompactionEntry,
    CompactionResult,
    ContextEditEntry,
)
from pitrio.messages.events import (
    AgentSessionEvent,
    AutoRetryEnd,
    CompactionEnd,
    CompactionReason,
    CompactionStart,
    EntryAppended,
)

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle
    from pitrio.actors.supervisor.actor.commands import (
        BeforePrompt,
        CarryOut,
        ManualCompact,
        Step,
        SummarizeBranch,
        SupervisorCommand,
    )

Emit = Callable[[AgentSessionEvent], None]
"""The session's event port: a synchronous call that gives the event its ``seq`` in the
session's stream, so the supervisor's events keep their place among the agent's."""

AfterCompact = Callable[[CompactionEntry, bool], Awaitable[None]]
"""Called once a compaction entry is written (extensions' ``session_compact``)."""

NO_ROUTER = "No model router: this session cannot make model requests"
STEP_ABANDONED = "Abandoned: the step's requester was aborted before the step started"


class CompactionCancelled(PitrioError):
    """A manual compaction was aborted (or an extension cancelled it)."""


class Supervisor(Actor["SupervisorCommand"]):
    """One session's retry, overflow recovery, compaction and branch summaries."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_after_compact", "_before_compact", "_compactions", "_emit",
        "_loop", "_retry_sleep", "_settings", "_state", "_store", "_stream", "_view",
    )
    # fmt: on

    def __init__(
        self,
        *,
        loop: AgentLoopHandle,
        store: SessionStoreHandle,
        stream: StreamCall | None,
        emit: Emit,
        settings: SupervisorSettings | None = None,
        before_compact: BeforeCompact | None = None,
        after_compact: AfterCompact | None = None,
        capacity: int = 64,
    ) -> None:
        super().__init__(name="supervisor", capacity=capacity)
        self._loop = loop
        self._store = store
        self._stream = stream
        self._emit = emit
        self._before_compact = before_compact
        self._after_compact = after_compact
        self._state = SupervisorState()
        self._settings = settings or SupervisorSettings()
        self._compactions = 0  # compaction or summary steps in progress
        self._retry_sleep: trio.CancelScope | None = None  # the back-off abort_retry cancels
        self._view = Latest(self._snapshot())
        self.address.published = self._view.reader()

    def _snapshot(self) -> SupervisorView:
        return SupervisorView(
            state=self._state, settings=self._settings, compacting=self._compactions > 0
        )

    def _publish(self) -> None:
        self._view.publish(self._snapshot())

    async def handle(self, command: SupervisorCommand) -> None:
        # Imported by the handle before it sent ``command`` (the commands wait for their first
        # use: cold start, issue 38).
        from pitrio.actors.supervisor.actor.commands import (
            AbortRetry,
            BeforePrompt,
            CarryOut,
            Configure,
            Decide,
            ManualCompact,
            Observe,
            RunAborted,
            SummarizeBranch,
        )

        match command:
            case Decide(ended=ended, reply=reply):
                reply.set(await self._decide(ended))
            case Observe(message=message, reply=reply):
                event: AutoRetryEnd | None = None
                if message is None:
                    self._state = self._state.on_user_message_start()
                else:
                    self._state, event = self._state.on_assistant_message_end(message)
                self._publish()
                reply.set(event)
            case CarryOut(lent=lent, reply=reply):
                self._start_lent(lent, reply, self._carry_out, command)
            case BeforePrompt(lent=lent, reply=reply):
                self._start_lent(lent, reply, self._before_prompt, command)
            case ManualCompact(lent=lent, reply=reply):
                with stamping(command.stamp):  # the compaction task's entry carries it
                    self._start_lent(lent, reply, self._manual, command)
            case SummarizeBranch(lent=lent, reply=reply):
                self._start_lent(lent, reply, self._summarize_branch, command)
            case RunAborted(reply=reply):
                self._on_abort()
                reply.set(None)
            case AbortRetry(reply=reply):
                if self._retry_sleep is not None:
                    self._retry_sleep.cancel()
                reply.set(None)
            case Configure(retry_enabled=retry, compaction_enabled=compaction, reply=reply):
                settings = self._settings
                if retry is not None:
                    settings = attrs.evolve(
                        settings, retry=attrs.evolve(settings.retry, enabled=retry)
                    )
                if compaction is not None:
                    settings = attrs.evolve(
                        settings, compaction=attrs.evolve(settings.compaction, enabled=compaction)
                    )
                self._settings = settings
                self._publish()
                reply.set(None)

    def _start_lent(
        self,
        lent: Lent,
        reply: Reply[Any],
        step: Callable[[Any], Awaitable[Any]],
        command: object,
    ) -> None:
        """Start ``step`` in the nursery its requester lent, unless the requester was aborted
        while the command waited in the inbox: its nursery may be closed by then, and
        starting a task there crashed the supervisor and the session with it (found by
        ``pitrio explore``, random-clients-wide seed 9590, PCT: an abort during a failed
        reply, before the retry's carry-out was taken). Nothing of the step had started, so
        there is nothing to report; nobody waits for the reply any more."""
        if lent.scope.cancel_called:
            reply.fail(PitrioError(STEP_ABANDONED))
            return
        lent.nursery.start_soon(self._answer, reply, step, command)

    async def _answer(
        self, reply: Reply[Any], step: Callable[[Any], Awaitable[Any]], command: object
    ) -> None:
        """A step in a lent nursery: its result or its error is the reply (an error must not
        reach the lender's nursery as a group); cancellation passes through."""
        try:
            reply.set(await step(command))
        except PitrioError as exc:
            reply.fail(exc)

    def _on_abort(self) -> None:
        self._state, cancelled = self._state.on_abort()
        self._publish()
        if cancelled is not None:
            self._emit(cancelled)

    @contextmanager
    def _compacting(self) -> Iterator[None]:
        self._compactions += 1
        self._publish()
        try:
            yield
        finally:
            self._compactions -= 1
            self._publish()

    # -- the post-run decision ---------------------------------------------------------------

    async def _decide(self, ended: RunEnded) -> PostRunDecision:
        settings = self._settings
        ended = attrs.evolve(
            ended, retry_settings=settings.retry, compaction_settings=settings.compaction
        )
        if run_needs_branch_inputs(self._state, ended):
            context, latest = await self._branch_inputs()
            ended = attrs.evolve(ended, context_messages=context, latest_compaction_ms=latest)
        decision = decide_after_run(self._state, ended)
        self._state = decision.state
        self._publish()
        return decision

    async def _branch_inputs(self) -> tuple[Sequence[AgentMessage], int | None]:
        """The projected context and when the branch's latest compaction was appended. One
        O(1) query: the projection knows its last compaction, and the checks read the
        context's lazy view, which they index only after a failed response (issue 7)."""
        context, timestamp = await self._store.context_and_latest_compaction()
        return context.messages, None if timestamp is None else iso_to_ms(timestamp)

    async def _carry_out(self, command: CarryOut) -> Step:
        match command.action:
            case Retry(delay_ms=delay_ms, event=event, failed=failed):
                # The omission and the agent's messages change together or not at all: an
                # abort between the two left the file's projection without the failed
                # attempt and the live context with it (found by ``pitrio explore``,
                # random-clients seed 1134). An abort by then stops the retry after both,
                # before its auto_retry_start (nothing announced, nothing to end).
                with trio.CancelScope(shield=True):
                    omitted = await self._omit(command.failed_entry_id, failed, announce=False)
                    # pi drops the failed attempt from the agent's messages when the back-off
                    # starts: messageCount and get_messages during and after it (an abort or
                    # abort_retry ends the run here) show the context without it. Done before
                    # the events, so a client that asks on seeing them sees it done (in pi
                    # the omission follows the event synchronously).
                    await self._loop.set_messages(await self._store.context_messages())
                try:
                    await trio.lowlevel.checkpoint_if_cancelled()
                except trio.Cancelled:
                    for entry in omitted:  # written all the same: announced
                        self._emit(EntryAppended(entry=entry))
                    raise
                # pi 1.6.0's order: auto_retry_start, then the omissions' entry_appended.
                self._state = attrs.evolve(self._state, retry=self._state.retry.announced())
                self._publish()
                self._emit(event)
                for entry in omitted:
                    self._emit(EntryAppended(entry=entry))
                try:
                    with trio.CancelScope() as sleep:
                        self._retry_sleep = sleep
                        await trio.sleep(delay_ms / 1000)
                finally:
                    self._retry_sleep = None
                if sleep.cancelled_caught:  # abort_retry: give up this sequence, settle
                    self._on_abort()
                    return End("settled")
                return Continue("recovery")
            case Compact(reason=reason, will_retry=will_retry, failed=failed) as action:
                if failed is not None and will_retry:
                    await self._omit(command.failed_entry_id, failed)
                    # pi refreshes the agent's messages at the omission, so they lose the
                    # failed attempt even when there is then nothing to compact.
                    await self._loop.set_messages(await self._store.context_messages())
                succeeded = await self._auto_compaction(reason, will_retry, command.lent)
                facts = await self._loop.run_facts()
                return decide_after_compaction(
                    action,
                    succeeded=succeeded,
                    abort_requested=command.run_scope.cancel_called,
                    has_queued_messages=facts.has_queued,
                )
        raise AssertionError(command.action)  # pragma: no cover - the match is exhaustive

    async def _before_prompt(self, command: BeforePrompt) -> None:
        check = attrs.evolve(
            command.check,
            settings=self._settings.compaction,
            overflow_recovery_attempted=self._state.overflow_recovery_attempted,
        )
        if prompt_needs_branch_inputs(check):
            context, latest = await self._branch_inputs()
            check = attrs.evolve(check, context_messages=context, latest_compaction_ms=latest)
        decision = decide_before_prompt(check)
        if isinstance(decision, CompactNow):
            if decision.failed is not None:
                await self._omit(command.last_entry_id, decision.failed)
            await self._auto_compaction(decision.reason, False, command.lent)

    async def _omit(
        self, entry_id: str | None, failed: AssistantMessage, *, announce: bool = True
    ) -> list[ContextEditEntry]:
        """Take a failed response and its tool results out of the projection; the file keeps
        them (one ``context_edit`` each, announced with ``entry_appended`` unless the caller
        announces them itself, later). Returns the edits appended."""
        if entry_id is None:
            return []
        targets: Sequence[str] = (entry_id,)
        if any(isinstance(block, ToolCall) for block in failed.content):
            path = await self._store.branch_entries()
            targets = recovery_omission_targets(entry_id, failed, path)
        edits = []
        for target in targets:
            entry = await self._store.append_context_edit(target, None)
            edits.append(entry)
            if announce:
                self._emit(EntryAppended(entry=entry))
        return edits

    # -- compaction (§3.8) -------------------------------------------------------------------

    async def _compact_now(
        self,
        *,
        custom_instructions: str | None,
        manual: bool,
        prepared: Callable[[], None] | None = None,
        reason: CompactionReason = "manual",
    ) -> tuple[CompactionResult, CompactionEntry] | None:
        if self._stream is None:
            raise PitrioError(NO_ROUTER)
        state = await self._loop.state()
        try:
            done = await compact(
                self._store,
                self._stream,
                state.model,
                self._settings.compaction,
                state.thinking_level,
                custom_instructions=custom_instructions,
                manual=manual,
                before=self._before_compact,
                prepared=prepared,
                retry=SummaryRetry(
                    settings=self._settings.retry,
                    emit=self._emit,
                    source="compaction",
                    reason=reason,
                ),
            )
        except CompactionCancelledByHook:
            raise CompactionCancelled(COMPACTION_CANCELLED) from None
        if done is None:
            return None
        result, entry, from_extension = done
        # No entry_appended: pi 1.6.0 announces no compaction entry (the result travels on
        # compaction_end and the compact reply).
        context = await self._store.context_messages()
        await self._loop.set_messages(context)
        # pi 1.6.0 measures the context the compaction left: every message's estimate.
        after = sum(estimate_tokens(message) for message in context)
        result = attrs.evolve(result, estimated_tokens_after=after)
        if self._after_compact is not None:
            await self._after_compact(entry, from_extension)
        return result, entry

    async def _manual(self, command: ManualCompact) -> CompactionResult:
        self._emit(CompactionStart(reason="manual"))
        try:
            with self._compacting():
                done = await self._compact_now(
                    custom_instructions=command.custom_instructions, manual=True
                )
            if done is None:
                raise CompactionCancelled(COMPACTION_CANCELLED)
        except PitrioError as exc:
            aborted = isinstance(exc, CompactionCancelled)
            error = None if aborted else compaction_failure_message("manual", str(exc))
            self._emit(
                CompactionEnd(
                    reason="manual", aborted=aborted, will_retry=False, error_message=error
                )
            )
            raise
        except BaseException:  # Cancelled, alone or in a summary call's group
            if command.lent.scope.cancel_called:  # aborted (not the session stopping)
                self._emit(CompactionEnd(reason="manual", aborted=True, will_retry=False))
            raise
        result = done[0]
        self._emit(CompactionEnd(reason="manual", result=result, aborted=False, will_retry=False))
        return result

    async def _auto_compaction(
        self, reason: Literal["threshold", "overflow"], will_retry: bool, lent: Lent
    ) -> bool:
        """An automatic compaction inside a run; ``True`` if it compacted.

        As pi 1.6.0: ``compaction_start`` only once there is something to compact (a branch
        too short to compact, or no model to summarize with, passes silently), and a
        ``compaction_end`` only after a ``compaction_start``.
        """
        started = False

        def start() -> None:
            nonlocal started
            started = True
            self._emit(CompactionStart(reason=reason))

        try:
            with self._compacting():
                done = await self._compact_now(
                    custom_instructions=None, manual=False, prepared=start, reason=reason
                )
        except PitrioError as exc:
            if started:
                self._emit(
                    CompactionEnd(
                        reason=reason,
                        aborted=False,
                        will_retry=False,
                        error_message=compaction_failure_message(reason, str(exc)),
                    )
                )
            return False
        except BaseException:  # Cancelled, alone or in a summary call's group
            # Aborted: the lender's scope takes the cancellation.
            if started and lent.scope.cancel_called:
                self._emit(CompactionEnd(reason=reason, aborted=True, will_retry=False))
            raise
        if done is None:
            return False
        self._emit(
            CompactionEnd(reason=reason, result=done[0], aborted=False, will_retry=will_retry)
        )
        return True

    # -- branch summaries (§3.9) -------------------------------------------------------------

    async def _summarize_branch(self, command: SummarizeBranch) -> BranchSummaryResult:
        if self._stream is None:
            raise PitrioError(NO_ROUTER)
        budget = token_budget(command.model.context_window, self._settings.branch_summary)
        preparation = prepare_branch_entries(list(command.entries), budget)
        request = build_branch_summary_request(
            preparation, command.custom_instructions, command.replace_instructions
        )
        text: str | None = None
        with self._compacting():
            if request is not None:
                # pi 1.6.0: at the session's thinking level, retried as compaction's calls are.
                state = await self._loop.state()
                retry = SummaryRetry(
                    settings=self._settings.retry, emit=self._emit, source="branchSummary"
                )
                reply = await complete_retrying(
                    self._stream, command.model, request, state.thinking_level, retry
                )
                text = branch_response_text(reply)
        return finish_branch_summary(preparation, text)


__all__ = [
    "NO_ROUTER",
    "AfterCompact",
    "CompactionCancelled",
    "Emit",
    "Lent",
    "Supervisor",
    "SupervisorHandle",
    "SupervisorSettings",
    "SupervisorView",
]
