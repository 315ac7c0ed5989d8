"""The supervisor's handle and what it reads without a message: the published
:class:`SupervisorView` (state, :class:`SupervisorSettings`, compacting or not).

Split from :mod:`.shell` (whose docstring says why the pure policy runs here, in the caller's
task); the shell re-exports these names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import trio

from pitrio import _attrs_cache
from pitrio.actors._actor import Handle
from pitrio.actors.latest import LatestReader
from pitrio.actors.session_store.command_stamp import COMMAND_STAMP
from pitrio.actors.supervisor.branch_summary import BranchSummaryResult, BranchSummarySettings
from pitrio.actors.supervisor.compaction import CompactionCheck, CompactionSettings
from pitrio.actors.supervisor.decisions import (
    Compact,
    PostRunDecision,
    Retry,
    RunEnded,
    SupervisorState,
    decide_after_run,
    prompt_may_compact,
    run_needs_branch_inputs,
)
from pitrio.actors.supervisor.retry import RetrySettings
from pitrio.messages.agent import AssistantMessage
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.events import AutoRetryEnd
from pitrio.messages.model import Model

if TYPE_CHECKING:
    # The commands are imported where one is sent (below): a plain turn sends none, so a
    # start never needs them (cold start, issue 38).
    from pitrio.actors.supervisor.actor.commands import (  # noqa: F401 (the base's, quoted)
        Step,
        SupervisorCommand,
    )
    from pitrio.actors.supervisor.actor.lent import Lent


@attrs.frozen(kw_only=True)
class SupervisorSettings:
    """The settings the supervisor decides with (spec §8.2)."""

    retry: RetrySettings = attrs.field(factory=RetrySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    branch_summary: BranchSummarySettings = attrs.field(factory=BranchSummarySettings)


@attrs.frozen(kw_only=True)
class SupervisorView:
    """What the supervisor publishes: its state, its settings, whether it is compacting."""

    state: SupervisorState
    settings: SupervisorSettings
    compacting: bool = False


class SupervisorHandle(Handle["SupervisorCommand"]):
    """Typed access to a :class:`~.shell.Supervisor`; the pure policy runs here, over the published
    view, when no message is needed (see the module docstring)."""

    def view(self) -> SupervisorView:
        """What the supervisor published last."""
        reader: LatestReader[SupervisorView] = self._address.published
        return reader.get()

    async def decide(self, ended: RunEnded) -> PostRunDecision:
        """The post-run decision for a low-level run (seed priority)."""
        view = self.view()
        settings = view.settings
        if (
            ended.retry_settings is not settings.retry
            or ended.compaction_settings is not settings.compaction
        ):  # the caller passes the published ones as a rule: no copy then
            ended = attrs.evolve(
                ended, retry_settings=settings.retry, compaction_settings=settings.compaction
            )
        if not run_needs_branch_inputs(view.state, ended):
            decision = decide_after_run(view.state, ended)
            if decision.state is view.state or decision.state == view.state:
                return decision  # nothing for the supervisor to remember
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import Decide
        return await self.ask(lambda reply: Decide(ended, reply))

    async def user_message_started(self) -> None:
        """A user message entered the context (overflow recovery may be tried again)."""
        state = self.view().state
        changed = state.on_user_message_start()
        if changed is not state and changed != state:
            with _attrs_cache.caching():  # the commands' classes: first use, from the cache
                from pitrio.actors.supervisor.actor.commands import Observe
            await self.ask(lambda reply: Observe(None, reply))

    async def assistant_message_ended(self, message: AssistantMessage) -> AutoRetryEnd | None:
        """An assistant response ended; the event to emit after it, if any."""
        state = self.view().state
        changed, event = state.on_assistant_message_end(message)
        if event is None and (changed is state or changed == state):
            return None
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import Observe
        return await self.ask(lambda reply: Observe(message, reply))

    async def carry_out(
        self,
        action: Retry | Compact,
        *,
        failed_entry_id: str | None,
        run_scope: trio.CancelScope,
        lent: Lent,
    ) -> Step:
        """Retry after the back-off, or compact; what the run does next."""
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import CarryOut
        return await self.ask(
            lambda reply: CarryOut(action, failed_entry_id, run_scope, lent, reply)
        )

    def wants_before_prompt(self, check: CompactionCheck) -> bool:
        """Whether the check before a prompt may compact (else :meth:`before_prompt` would
        do nothing: the caller need not lend a nursery for it)."""
        view = self.view()
        if not view.settings.compaction.enabled:
            return False
        if check.settings is not view.settings.compaction:  # the caller passes the published
            check = attrs.evolve(check, settings=view.settings.compaction)
        return prompt_may_compact(check)

    async def before_prompt(
        self, check: CompactionCheck, *, last_entry_id: str | None, lent: Lent
    ) -> None:
        """The compaction check before a prompt runs; compacts (in ``lent``) when needed."""
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import BeforePrompt
        await self.ask(lambda reply: BeforePrompt(check, last_entry_id, lent, reply))

    async def run_aborted(self) -> None:
        """The run was aborted (a retry sequence in progress ends as cancelled)."""
        state = self.view().state
        if state.on_abort()[0] != state:
            with _attrs_cache.caching():  # the commands' classes: first use, from the cache
                from pitrio.actors.supervisor.actor.commands import RunAborted
            await self.ask(RunAborted)

    async def abort_retry(self) -> None:
        """Cancel a pending retry back-off (no-op when none is pending)."""
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import AbortRetry
        await self.ask(AbortRetry)

    async def compact(self, custom_instructions: str | None, lent: Lent) -> CompactionResult:
        """A manual compaction, run in ``lent``."""
        stamp = COMMAND_STAMP.get()  # a client's compact command: its id goes on the entry
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import ManualCompact
        return await self.ask(lambda reply: ManualCompact(custom_instructions, lent, reply, stamp))

    async def summarize_branch(
        self,
        entries: tuple[SessionEntry, ...],
        model: Model,
        *,
        custom_instructions: str | None,
        replace_instructions: bool,
        lent: Lent,
    ) -> BranchSummaryResult:
        """The summary of the entries a navigation leaves, made in ``lent``."""
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import SummarizeBranch
        return await self.ask(
            lambda reply: SummarizeBranch(
                entries, model, custom_instructions, replace_instructions, lent, reply
            )
        )

    async def configure(
        self, *, retry_enabled: bool | None = None, compaction_enabled: bool | None = None
    ) -> None:
        """Turn automatic retry or compaction on or off."""
        with _attrs_cache.caching():  # the commands' classes: first use, from the cache
            from pitrio.actors.supervisor.actor.commands import Configure
        await self.ask(lambda reply: Configure(retry_enabled, compaction_enabled, reply))
