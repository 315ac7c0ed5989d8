"""What a session's handle reads without changing anything: its state (``get_state``), entries,
tree, fork points, the last reply, the cache warmer's status and the two exports.

Split from :mod:`.actor`: the actor owns one :class:`SessionQueries` (made once its warmer
and run driver exist) and its handle's ``Invoke`` operations call it as ``actor.queries``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from pitrio.actors.session.cache_warming import WarmingMode
from pitrio.actors.session.commands import SessionState
from pitrio.actors.session.export import write_session_html, write_session_jsonl
from pitrio.actors.session.operations import last_assistant_text
from pitrio.actors.session.warming import UNAVAILABLE_WARMING, SessionWarming

if TYPE_CHECKING:
    from pitrio.actors.agent_loop import AgentLoopHandle
    from pitrio.actors.mcp.state import McpServerState
    from pitrio.actors.session.driver import RunDriver
    from pitrio.actors.session.queues import DisplayQueues
    from pitrio.actors.session_store.actor import SessionStoreHandle
    from pitrio.actors.session_store.tree import TreeNode
    from pitrio.actors.supervisor.actor.shell import SupervisorHandle


@attrs.frozen(slots=True)
class SessionQueries:
    """Read-only questions about one session, asked in its actor's task."""

    store: SessionStoreHandle
    loop: AgentLoopHandle
    supervisor: SupervisorHandle
    driver: RunDriver
    queues: DisplayQueues
    mcp_servers: Callable[[], tuple[McpServerState, ...]] | None
    warming: SessionWarming | None
    warming_mode: WarmingMode

    async def state(self) -> SessionState:
        """The session's state as ``get_state`` reports it."""
        supervisor = self.supervisor.view()
        run, failure = self.driver.current, self.driver.write_failure
        return SessionState(
            agent=await self.loop.state(),
            is_running=run is not None,
            is_settling=run is not None and run.closing,
            is_retrying=supervisor.state.retry.retrying,
            retry_attempt=supervisor.state.retry.attempt,
            steering=self.queues.steering,
            follow_up=self.queues.follow_up,
            session_id=self.store.header.id,
            session_file=str(self.store.path) if self.store.path else None,
            is_compacting=supervisor.compacting,
            auto_compaction_enabled=supervisor.settings.compaction.enabled,
            auto_retry_enabled=supervisor.settings.retry.enabled,
            session_name=await self.store.session_name(),
            write_error=None if failure is None else str(failure),
            mcp_servers=() if self.mcp_servers is None else self.mcp_servers(),
        )

    async def entry_lines(self) -> tuple[list[tuple[str, bytes]], str | None]:
        """Every entry of the file (all branches, compacted history too) as (id, JSON), in
        append order, and the leaf id (``get_entries``)."""
        return await self.store.entry_lines()

    async def tree(self) -> tuple[list[TreeNode], str | None]:
        """The session tree's roots and the leaf id (``get_tree``)."""
        return await self.store.tree_and_leaf()

    async def fork_messages(self) -> list[tuple[str, str]]:
        """Every user message of the file (all branches) with text: (entry id, text)."""
        return [(m.entry_id, m.text) for m in await self.store.user_messages_for_forking()]

    async def last_assistant_text(self) -> str | None:
        """The last assistant reply's text (pi's ``getLastAssistantText``)."""
        return last_assistant_text((await self.loop.state()).messages)

    async def cache_warming(self) -> dict[str, Any]:
        """The warmer's mode and status (pi's wording when a session makes no requests)."""
        if self.warming is None:
            return {"mode": self.warming_mode, "status": UNAVAILABLE_WARMING}
        return await self.warming.info()

    async def export_html(self, output_path: str | None) -> str:
        """Write the session as a self-contained HTML page; returns its path."""
        return await write_session_html(self.store, self.loop, output_path)

    async def export_jsonl(self, output_path: str | None) -> str:
        """Write the current branch as a new linear session file; returns its path."""
        return await write_session_jsonl(self.store, output_path)
