"""The session's two maintenance commands: a manual compaction and a tree navigation.

Split from :mod:`.actor`. The inbox asks the :class:`MaintenanceGate` (the actor's, touched
only by its tasks) to start one: the gate marks the session busy with a
:class:`~.run.Maintenance` and starts one of the functions below as a task in the actor's
nursery; ``release`` clears that mark when the command ends, before the aborts that waited for
it are answered. The functions touch only what they are given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import attrs
import trio

from pitrio.actors._actor import Reply
from pitrio.actors.session.commands import Compact, Navigate
from pitrio.actors.session.operations import (
    COMPACTION_RUNNING,
    SummarizeBranch,
    TreeHooks,
    navigate_tree,
)
from pitrio.actors.session.run import Maintenance, lend
from pitrio.actors.supervisor.actor.compactor import StreamCall
from pitrio.actors.supervisor.actor.shell import CompactionCancelled, SupervisorHandle
from pitrio.actors.supervisor.branch_summary import BranchSummaryResult
from pitrio.actors.supervisor.compaction import COMPACTION_CANCELLED
from pitrio.errors import PitrioError
from pitrio.messages.agent import AgentMessage
from pitrio.messages.entries import CompactionResult, SessionEntry
from pitrio.messages.events import AgentSessionEvent
from pitrio.messages.model import Model

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.session.driver import RunDriver
    from pitrio.actors.session.extensions.host_handle import ExtensionHostHandle
    from pitrio.actors.session_store.actor import SessionStoreHandle


@attrs.frozen
class TreeParts:
    """What a navigation uses of its session."""

    store: SessionStoreHandle
    loop: AgentLoopHandle
    emit: Callable[[AgentSessionEvent], None]
    supervisor: SupervisorHandle
    stream: StreamCall | None
    restore_tools: Callable[[Sequence[AgentMessage]], Awaitable[None]] | None
    host: ExtensionHostHandle | None


class MaintenanceGate:
    """Whether a manual compaction or a navigation is in progress, and starting one: prompts,
    compactions and navigations are refused meanwhile, and abort stops it."""

    # Fields in slots (with a weak reference, as before): one per idle session in a daemon,
    # whose instance dict cost more than its fields (issue 38).
    # fmt: off
    __slots__ = (
        "__weakref__", "_current", "_driver", "_nursery", "_parts",
    )
    # fmt: on

    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        driver: RunDriver,
        parts: TreeParts,
    ) -> None:
        self._nursery = nursery
        self._driver = driver
        self._parts = parts
        self._current: Maintenance | None = None

    @property
    def busy(self) -> bool:
        """A compaction or navigation is in progress."""
        return self._current is not None

    def navigate(self, command: Navigate) -> None:
        """Start a navigation, or refuse it while the agent or another maintenance runs."""
        if self._driver.current is not None or self._current is not None:
            command.reply.fail(PitrioError("Cannot navigate the tree while the agent is busy"))
            return
        self._current = maintenance = Maintenance()  # nothing else may change the tree
        self._nursery.start_soon(navigate_command, command, maintenance, self._parts, self._release)

    def compact(self, command: Compact) -> None:
        """Start a manual compaction (a run in progress is aborted first), or refuse it
        while another maintenance runs."""
        if self._current is not None:
            command.reply.fail(PitrioError(COMPACTION_RUNNING))
            return
        self._current = maintenance = Maintenance()
        self._nursery.start_soon(
            partial(
                compact_command,
                maintenance,
                driver=self._driver,
                supervisor=self._parts.supervisor,
                instructions=command.custom_instructions,
                reply=command.reply,
                release=self._release,
            )
        )

    def abort(self, reply: Reply[None]) -> bool:
        """Stop the maintenance in progress, ``reply`` answered once it has (pi: when the
        session is idle); ``False`` when there is none."""
        if self._current is None:
            return False
        self._current.abort(reply)
        return True

    def _release(self) -> None:
        """The command ended: prompts and the others are taken again."""
        self._current = None


async def compact_command(
    maintenance: Maintenance,
    *,
    driver: RunDriver,
    supervisor: SupervisorHandle,
    instructions: str | None,
    reply: Reply[CompactionResult],
    release: Callable[[], None],
) -> None:
    """Manual compaction: a run in progress is aborted first (pi)."""
    try:
        # pi 1.6.0: the aborted partial reply is reported and kept, and compacted with
        # the rest (0.73.1 dropped it unreported).
        await driver.abort_and_wait()
        result = await lend(maintenance, lambda lent: supervisor.compact(instructions, lent))
        if result is None:
            raise CompactionCancelled(COMPACTION_CANCELLED)
    except PitrioError as exc:
        reply.fail(exc)
    else:
        reply.set(result)
    finally:
        release()
        # pi: the compaction's caller hears first, an abort that stopped it after (its
        # wait for idle resumes later); answered in one step, their order would be chance.
        try:
            await trio.lowlevel.checkpoint()
        finally:
            maintenance.finish()


async def navigate_command(
    command: Navigate,
    maintenance: Maintenance,
    parts: TreeParts,
    release: Callable[[], None],
) -> None:
    """Move the session's leaf (``navigate_tree``), with a branch summary when asked."""
    stream, supervisor = parts.stream, parts.supervisor

    def summarizer() -> SummarizeBranch:
        """A navigation's summary call (raises when this session cannot make requests)."""
        if stream is None:
            raise PitrioError("No model router: this session cannot make model requests")
        return lambda *args: _lent_summary(maintenance, supervisor, *args)

    try:
        result = await navigate_tree(
            command.target_id,
            store=parts.store,
            loop=parts.loop,
            emit=parts.emit,
            summarize=summarizer if command.summarize else None,
            custom_instructions=command.custom_instructions,
            replace_instructions=command.replace_instructions,
            label=command.label,
            restore_tools=parts.restore_tools,
            hooks=tree_hooks(parts.host),
        )
    except PitrioError as exc:
        command.reply.fail(exc)
    else:
        command.reply.set(result)
    finally:
        release()
        maintenance.finish()


async def _lent_summary(
    maintenance: Maintenance,
    supervisor: SupervisorHandle,
    entries: tuple[SessionEntry, ...],
    model: Model,
    custom_instructions: str | None,
    replace_instructions: bool,
) -> BranchSummaryResult | None:
    """A navigation's branch summary, the supervisor's; ``None`` when aborted."""
    return await lend(
        maintenance,
        lambda lent: supervisor.summarize_branch(
            entries,
            model,
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            lent=lent,
        ),
    )


def tree_hooks(host: ExtensionHostHandle | None) -> TreeHooks | None:
    """The extensions' ``session_before_tree`` / ``session_tree`` (none without them)."""
    if host is None:
        return None
    return TreeHooks(before=host.before_tree, after=host.after_tree)
